//! Expr evaluations (`expr.eval` with `language: expr`), with the
//! `expr-lang` crate. They run where [`crate::evaluator`] puts them: in a
//! process of their own in a daemon, since a range or a `repeat` may ask
//! for any amount of memory and nothing inside the engine bounds it.

use serde_json::Value;

/// Why an Expr evaluation gave no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// It read a variable that is not there.
    UnknownVariable(String),
    /// It does not parse, or its evaluation failed.
    Error(String),
}

/// Evaluates `source` with the members of `variables` (an object) as its
/// variables. opcode's predicate shorthand (`{.score > 1}`) is accepted.
pub fn evaluate(source: &str, variables: &Value) -> Result<Value, Failure> {
    let error = |e: String| Failure::Error(e);
    opcode_vm::limits::check_expr(source)
        .map_err(|limit| error(format!("the expression {limit}")))?;
    let normal = opcode_vm::expr_lang::normalize(source)
        .map_err(|(at, what)| error(format!("{what} (at byte {at})")))?;
    if opcode_vm::expr_lang::unbuilt_map_value(source).is_some() {
        return Err(error(opcode_vm::expr_lang::MAP_VALUES.to_owned()));
    }
    // The crate stops (panics) on some texts its grammar takes: each is an
    // error of this evaluation, never the engine's.
    let stopped = || error("opcode's Expr engine cannot evaluate this expression".to_owned());
    let program = std::panic::catch_unwind(|| expr::compile(&normal))
        .map_err(|_| stopped())?
        .map_err(|e| error(format!("invalid Expr: {e}")))?;
    let mut context = expr::Context::default();
    if let Value::Object(members) = variables {
        for (name, value) in members {
            let value = expr::to_value(value).map_err(|e| error(e.to_string()))?;
            context.insert(name.clone(), value);
        }
    }
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        expr::run(&program, &context)
    }))
    .map_err(|_| stopped())?;
    let value = run.map_err(|e| {
        let message = e.to_string();
        match message.strip_prefix("unknown variable: ") {
            Some(name) => Failure::UnknownVariable(name.to_owned()),
            None => error(message),
        }
    })?;
    expr::from_value::<Value>(value)
        .map_err(|e| error(format!("the result is not a JSON value: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_map_of_computed_values_is_an_error_not_a_panic() {
        let vars = json!({"inputs": {"xs": [1, 2]}});
        // A list is no constant either: one more member the crate stops on.
        for source in [
            r#"{"n": sum(inputs.xs)}"#,
            r#"{"a": {"b": 1}}"#,
            r#"{"a": [1, 2]}"#,
        ] {
            assert_eq!(
                evaluate(source, &vars),
                Err(Failure::Error(opcode_vm::expr_lang::MAP_VALUES.to_owned())),
                "{source}"
            );
        }
        assert_eq!(
            evaluate(r#"{"n": 1, "s": "x"}"#, &vars),
            Ok(json!({"n": 1, "s": "x"}))
        );
    }

    #[test]
    fn evaluates_opcode_expressions() {
        let vars = json!({
            "steps": {"fetch-data": {"body": {"items": [{"id": 1, "score": 0.2}, {"id": 2, "score": 0.9}]}}},
            "inputs": {"threshold": 0.5},
        });
        assert_eq!(
            evaluate(
                "filter(steps['fetch-data'].body.items, {.score >= inputs.threshold})",
                &vars
            ),
            Ok(json!([{"id": 2, "score": 0.9}]))
        );
        assert_eq!(
            evaluate("steps['fetch-data'].body.items | map(.id) | sum()", &vars),
            Ok(json!(3))
        );
        assert_eq!(
            evaluate("inputs.missing ?? 'none'", &vars),
            Ok(json!("none"))
        );
    }

    #[test]
    fn failures_say_what_went_wrong() {
        assert_eq!(
            evaluate("thresold > 1", &json!({})),
            Err(Failure::UnknownVariable("thresold".into()))
        );
        assert!(
            matches!(evaluate("1 +", &json!({})), Err(Failure::Error(m)) if m.contains("invalid Expr"))
        );
        assert!(matches!(
            evaluate("now()", &json!({})),
            Err(Failure::Error(_))
        ));
    }
}
