//! `assert.equals`, `assert.contains`, `assert.matches`, `assert.schema`.

use opcode_vm::catalog::{ActionSpec, Ty};

use super::spec::action;

fn pass() -> Ty {
    Ty::object([("pass", Ty::Bool)])
}

/// Signatures.
pub fn specs() -> Vec<ActionSpec> {
    vec![
        action("assert.equals", "Fails unless `actual` deeply equals `expected` (numbers compare by value; no string/number coercion).")
            .in_round()
            .req("expected", Ty::Any, "the expected value")
            .req("actual", Ty::Any, "the value to check")
            .opt("message", Ty::String, "failure message")
            .output(pass()),
        action("assert.contains", "Fails unless the string `haystack` contains `needle`, or the array `haystack` has an element equal to it.")
            .in_round()
            .req("haystack", Ty::OneOf { types: vec![Ty::String, Ty::array(Ty::Any)] }, "string or array")
            .req("needle", Ty::Any, "substring or element")
            .opt("message", Ty::String, "failure message")
            .output(pass()),
        action("assert.matches", "Fails unless `value` matches the regular expression `pattern`; returns the first match.")
            .in_round()
            .req("value", Ty::String, "the text")
            .req("pattern", Ty::String, "a regular expression")
            .opt("message", Ty::String, "failure message")
            .output(Ty::object([("pass", Ty::Bool), ("matches", Ty::String)])),
        action("assert.schema", "Fails unless `data` is valid against the JSON Schema `schema`.")
            .in_round()
            .req("data", Ty::Any, "the value to validate")
            .req("schema", Ty::map(Ty::Any), "a JSON Schema (draft 2020-12)")
            .opt("message", Ty::String, "failure message")
            .output(pass()),
    ]
}

/// Runs `assert.<name>`.
#[cfg(feature = "runtime")]
pub fn run(
    name: &str,
    call: &crate::call::Call,
) -> Result<serde_json::Value, opcode_vm::error::ActionError> {
    use opcode_vm::codes::R0111;
    use opcode_vm::error::ActionError;
    use serde_json::{Value, json};

    let fail = |default: String, details: Value| {
        let message = call.str("message").map_or(default, str::to_owned);
        Err(ActionError::new(R0111, "ASSERTION_FAILED", message, false).with_details(details))
    };
    let null = Value::Null;
    let param = |n: &str| call.params.get(n).unwrap_or(&null);
    match name {
        "equals" => {
            let (expected, actual) = (param("expected"), param("actual"));
            if json_equal(expected, actual) {
                Ok(json!({"pass": true}))
            } else {
                fail(
                    format!("expected {expected}, got {actual}"),
                    json!({"expected": expected, "actual": actual}),
                )
            }
        }
        "contains" => {
            let needle = param("needle");
            let found = match param("haystack") {
                Value::String(s) => {
                    let text = match needle {
                        Value::String(n) => n.clone(),
                        other => other.to_string(),
                    };
                    s.contains(&text)
                }
                Value::Array(items) => items.iter().any(|i| json_equal(i, needle)),
                other => {
                    return Err(ActionError::validation(format!(
                        "`haystack` must be a string or an array, got {other}"
                    )));
                }
            };
            if found {
                Ok(json!({"pass": true}))
            } else {
                fail(
                    format!("{} does not contain {needle}", param("haystack")),
                    json!({"haystack": param("haystack"), "needle": needle}),
                )
            }
        }
        "matches" => {
            let value = call.str("value").unwrap_or_default();
            let pattern = call.required("pattern")?;
            let re = regex::Regex::new(pattern)
                .map_err(|e| ActionError::validation(format!("invalid pattern: {e}")))?;
            match re.find(value) {
                Some(m) => Ok(json!({"pass": true, "matches": m.as_str()})),
                None => fail(
                    format!("{value:?} does not match {pattern:?}"),
                    json!({"value": value, "pattern": pattern}),
                ),
            }
        }
        "schema" => {
            let schema = param("schema");
            let validator = jsonschema::validator_for(schema)
                .map_err(|e| ActionError::validation(format!("invalid schema: {e}")))?;
            let data = param("data");
            let violations: Vec<String> = validator
                .iter_errors(data)
                .map(|e| format!("{} at {}", e, e.instance_path()))
                .collect();
            if violations.is_empty() {
                Ok(json!({"pass": true}))
            } else {
                fail(
                    format!("data does not match the schema: {}", violations.join("; ")),
                    json!({"violations": violations}),
                )
            }
        }
        _ => Err(super::unknown(call)),
    }
}

/// Deep equality with numbers compared by value (`1 == 1.0`).
#[cfg(feature = "runtime")]
pub fn json_equal(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}
