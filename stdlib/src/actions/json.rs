//! `json.jq`.

use opcode_vm::catalog::{ActionSpec, Ty};

use super::spec::action;

/// Signatures.
pub fn specs() -> Vec<ActionSpec> {
    vec![
        action("json.jq", "Runs a jq filter over `data`. `result` is the first output (null when none), `results` all of them.")
            .req("filter", Ty::String, "a jq filter")
            .opt("data", Ty::Any, "the input value (default null)")
            .output(Ty::object([("result", Ty::Any), ("results", Ty::array(Ty::Any))])),
    ]
}

/// Runs `json.jq`.
#[cfg(feature = "runtime")]
pub async fn run(
    call: &crate::call::Call,
    helper: Option<&std::path::Path>,
    limits: &crate::limits::Limits,
) -> Result<serde_json::Value, opcode_vm::error::ActionError> {
    let filter = call.required("filter")?;
    let null = serde_json::Value::Null;
    let data = call.params.get("data").unwrap_or(&null);
    let results =
        crate::evaluator::evaluate(crate::evaluator::Language::Jq, filter, data, helper, limits)
            .await?;
    let first = results.first().cloned().unwrap_or(serde_json::Value::Null);
    Ok(serde_json::json!({"result": first, "results": results}))
}
