//! CEL's run-time errors in our words (spec/errors/R0103.md): which name
//! was missing, that a null was read (a skipped step has no output), which
//! operator would not mix which kinds, and the conversion that makes it
//! work.

use cel::{ExecutionError, Value as Cel};

/// `error`, raised evaluating a CEL expression, as a person would say it.
pub fn plain(error: &ExecutionError) -> String {
    match error {
        ExecutionError::NoSuchKey(key) => format!(
            "`{key}` is not there: an input not given (and without a default), or a field the value \
             lacks; `has(x.{key})` tests for it first"
        ),
        ExecutionError::UndeclaredReference(name) => format!(
            "`{name}` is not a variable here: CEL reads steps, inputs, workflow, context, iter and data"
        ),
        ExecutionError::UnsupportedBinaryOperator(op, left, right) => binary(op, left, right),
        ExecutionError::NoSuchOverload(overload) => overload_in_words(&overload.to_string()),
        ExecutionError::ValuesNotComparable(left, right) => format!(
            "{} and {} cannot be compared{}",
            kind(left),
            kind(right),
            conversion(left, right)
        ),
        ExecutionError::DivisionByZero(_) => "division by zero".to_owned(),
        ExecutionError::RemainderByZero(_) => "remainder (`%`) by zero".to_owned(),
        other => other.to_string(),
    }
}

/// `op` refused between `left` and `right`.
fn binary(op: &str, left: &Cel, right: &Cel) -> String {
    let symbol = match op {
        "add" => "+",
        "sub" => "-",
        "mul" => "*",
        "div" => "/",
        "rem" => "%",
        other => other,
    };
    format!(
        "`{symbol}` does not take {} and {}{}",
        kind(left),
        kind(right),
        conversion(left, right)
    )
}

/// What converts one side to the other's kind, where CEL keeps them apart.
fn conversion(left: &Cel, right: &Cel) -> &'static str {
    match (left, right) {
        (Cel::Float(_), Cel::Int(_) | Cel::UInt(_))
        | (Cel::Int(_) | Cel::UInt(_), Cel::Float(_)) => {
            ": CEL does not mix doubles and ints; convert one, e.g. `double(n)` or `int(x)`"
        }
        (Cel::String(_), Cel::Int(_) | Cel::UInt(_) | Cel::Float(_))
        | (Cel::Int(_) | Cel::UInt(_) | Cel::Float(_), Cel::String(_)) => {
            ": convert one, e.g. `string(n)` or `int(s)`"
        }
        (Cel::Null, _) | (_, Cel::Null) => {
            ": a null is read (a step that was skipped, or failed under `ignore`, has no output)"
        }
        _ => "",
    }
}

/// A CEL value's kind, with the value when it is short.
fn kind(value: &Cel) -> String {
    match value {
        Cel::Int(n) => format!("an int ({n})"),
        Cel::UInt(n) => format!("a uint ({n})"),
        Cel::Float(x) => format!("a double ({x})"),
        Cel::String(s) if s.chars().count() <= 40 => format!("a string (\"{s}\")"),
        Cel::String(_) => "a string".to_owned(),
        Cel::Bool(b) => format!("a bool ({b})"),
        Cel::Null => "null".to_owned(),
        Cel::List(_) => "a list".to_owned(),
        Cel::Map(_) => "a map".to_owned(),
        Cel::Bytes(_) => "bytes".to_owned(),
        _ => "a value of another kind".to_owned(),
    }
}

/// "found no matching overload for 'F' applied to '(A, B)'", in words.
fn overload_in_words(said: &str) -> String {
    let parsed = said
        .strip_prefix("found no matching overload for '")
        .and_then(|rest| rest.split_once("' applied to '"))
        .map(|(function, types)| (function, types.trim_end_matches('\'')));
    let Some((function, types)) = parsed else {
        return said.to_owned();
    };
    if function == "_._" && types.starts_with("(null_type") {
        return "a field of a null value is read: a step that was skipped (or failed under \
                `ignore`) has no output, and an absent value is null; test it first, e.g. \
                `has(steps.x.field)`, or guard on the step"
            .to_owned();
    }
    let operator = function
        .strip_prefix('_')
        .and_then(|f| f.strip_suffix('_'))
        .map(|f| f.trim_matches('_'))
        .filter(|f| !f.is_empty() && !f.chars().any(char::is_alphanumeric));
    let kinds = types.trim_start_matches('(').trim_end_matches(')');
    let mixes = kinds.contains("double") && kinds.contains("int");
    let hint = if mixes {
        ": CEL does not mix doubles and ints; convert one, e.g. `double(n)`"
    } else if kinds.contains("null_type") {
        ": a null is read (a step that was skipped has no output)"
    } else {
        ""
    };
    match operator {
        Some(op) => format!("`{op}` does not take ({kinds}){hint}"),
        None => format!("`{function}` does not take ({kinds}){hint}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn failure(source: &str, scope: &serde_json::Value) -> String {
        let budget = crate::cel::budget::Budget {
            cost: 1_000_000,
            memory: 8 << 20,
        };
        crate::cel::eval_source(source, scope, &json!(null), budget)
            .expect_err("the evaluation fails")
            .message
    }

    #[test]
    fn run_time_errors_say_what_and_how_to_fix_it() {
        let said = failure("2.5 * 2", &json!({}));
        assert!(said.contains("`*`") && said.contains("double(n)"), "{said}");
        let said = failure("inputs.env == 'prod'", &json!({"inputs": {}}));
        assert!(
            said.contains("`env` is not there") && said.contains("has("),
            "{said}"
        );
        let said = failure("steps.a.items.size() > 0", &json!({"steps": {"a": null}}));
        assert!(said.contains("null") && said.contains("skipped"), "{said}");
    }
}
