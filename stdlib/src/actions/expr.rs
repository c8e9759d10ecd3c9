//! `expr.eval`.

use opcode_vm::catalog::{ActionSpec, Ty};

use super::spec::action;

/// Signatures.
pub fn specs() -> Vec<ActionSpec> {
    vec![
        action("expr.eval", "Evaluates a CEL expression with the workflow's variables (`steps`, `inputs`, `workflow`, `context`, `iter`) and `data`.")
            .in_round()
            .req("expression", Ty::String, "a CEL expression")
            .opt("data", Ty::Any, "extra value, visible as `data`")
            .output(Ty::object([("result", Ty::Any)])),
    ]
}

/// Runs `expr.eval`.
#[cfg(feature = "runtime")]
pub fn run(
    call: &crate::exec::Call,
    budget: crate::cel::budget::Budget,
) -> Result<serde_json::Value, opcode_vm::error::ActionError> {
    use opcode_vm::error::ActionError;
    let expression = call.required("expression")?;
    let null = serde_json::Value::Null;
    let scope = call.scope.as_ref().unwrap_or(&null);
    let data = call.params.get("data").unwrap_or(&null);
    let result =
        crate::cel::eval_source(expression, scope, data, budget).map_err(|e| ActionError {
            message: format!("expr.eval: {}", e.message),
            ..e
        })?;
    Ok(serde_json::json!({"result": result}))
}
