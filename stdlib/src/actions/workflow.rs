//! `workflow.run`, `workflow.map`, `workflow.emit`, `workflow.context`, `workflow.fail`, `workflow.log`, `workflow.notify`.

use opcode_vm::catalog::{ActionSpec, Ty};

use super::spec::action;

/// Signatures.
pub fn specs() -> Vec<ActionSpec> {
    vec![
        action("workflow.run", "Runs another workflow template as a child and waits for it; its status and output become this step's output.")
            .req("template_name", Ty::String, "the template to run")
            .opt("version", Ty::String, "template version such as v2 (default latest)")
            .opt("params", Ty::map(Ty::Any), "the child's inputs")
            .output(Ty::object([("workflow_id", Ty::String), ("status", Ty::String), ("output", Ty::Any)])),
        action("workflow.map", "Runs one child of a template per item of a list, at most `max_concurrency` at a time, and waits for them; outputs come back in item order.")
            .req("template_name", Ty::String, "the template to run per item")
            .req("items", Ty::array(Ty::Any), "one child per item")
            .opt("version", Ty::String, "template version such as v2 (default latest)")
            .opt("params", Ty::map(Ty::Any), "inputs every child gets")
            .opt("item_param", Ty::String, "the input that receives the item (default `item`)")
            .opt("index_param", Ty::String, "an input that receives the item's position (default none)")
            .opt("max_concurrency", Ty::Int, "children running at once (default 8)")
            .opt("on_failure", Ty::one_of_strings(&["fail_fast", "collect"]), "fail_fast (default): the first failure cancels the rest and fails the step; collect: run all and report each")
            .output(Ty::object([
                ("outputs", Ty::array(Ty::Any)),
                ("children", Ty::array(Ty::Any)),
                ("completed", Ty::Int),
                ("failed", Ty::Int),
            ])),
        action("workflow.emit", "Publishes an event to live subscribers (the panel, SSE streams).")
            .in_round()
            .opt("event_type", Ty::String, "the event name")
            .opt("event", Ty::String, "alias of event_type")
            .opt("payload", Ty::Any, "event data")
            .opt("data", Ty::Any, "alias of payload")
            .output(Ty::object([("emitted", Ty::Bool)])),
        action("workflow.context", "Reads or updates the workflow context (`context.*`). `update` merges `data` into it.")
            .in_round_for_own_run()
            .req("action", Ty::one_of_strings(&["read", "update"]), "read or update")
            .opt("workflow_id", Ty::String, "whose context (default this workflow)")
            .opt("data", Ty::map(Ty::Any), "keys to merge (update)")
            .opt("agent_notes", Ty::String, "notes to store (update)")
            .output(Ty::Any),
        action("workflow.fail", "Fails the step, and the workflow unless on_error handles it.")
            .in_round()
            .opt("reason", Ty::String, "why")
            .output(Ty::Null),
        action("workflow.log", "Writes a structured log line. Extra parameters are logged as fields.")
            .in_round()
            .opt("message", Ty::String, "the message")
            .opt("level", Ty::one_of_strings(&["debug", "info", "warn", "error"]), "debug, info (default), warn or error")
            .opt("data", Ty::Any, "structured data")
            .open()
            .output(Ty::object([("logged", Ty::Bool)])),
        action("workflow.notify", "Sends a notification to the MCP session of the workflow's agent (best effort; never fails).")
            .in_round()
            .req("message", Ty::String, "the notification text")
            .opt("data", Ty::Any, "structured data")
            .output(Ty::object([("notified", Ty::Bool), ("reason", Ty::String)])),
    ]
}

/// Runs `workflow.<name>`.
#[cfg(feature = "runtime")]
pub async fn run(
    name: &str,
    call: &crate::call::Call,
    services: &dyn crate::call::Services,
) -> Result<serde_json::Value, opcode_vm::error::ActionError> {
    use opcode_vm::error::ActionError;
    use serde_json::{Value, json};

    let null = Value::Null;
    match name {
        "run" => {
            let template = call.required("template_name")?;
            if template.is_empty() {
                return Err(ActionError::validation("`template_name` must not be empty"));
            }
            let params = call
                .params
                .get("params")
                .cloned()
                .unwrap_or_else(|| json!({}));
            let passed = crate::call::sites_under(
                &call.passed,
                &[opcode_vm::program::PathSeg::Key("params".into())],
            );
            let child = crate::call::Child {
                template,
                version: call.str("version"),
                params: &params,
                secrets: &passed,
                index: None,
            };
            services.run_child(call, child).await
        }
        "emit" => {
            let event_type = call
                .str("event_type")
                .or_else(|| call.str("event"))
                .unwrap_or("custom");
            let payload = call
                .params
                .get("payload")
                .or_else(|| call.params.get("data"))
                .unwrap_or(&null);
            services.emit(call, event_type, payload);
            Ok(json!({"emitted": true}))
        }
        "context" => {
            let action = call.required("action")?;
            let target = call
                .str("workflow_id")
                .filter(|id| !id.is_empty() && *id != call.run_id);
            match action {
                "read" => match target {
                    Some(id) => services.context_of(id).await.ok_or_else(|| {
                        ActionError::execution(format!("no context for workflow `{id}`"))
                    }),
                    None => Ok(call
                        .scope
                        .as_ref()
                        .and_then(|s| s.get("context"))
                        .cloned()
                        .unwrap_or_else(|| json!({}))),
                },
                "update" => {
                    if target.is_some() {
                        return Err(ActionError::validation(
                            "`workflow.context` can only update its own workflow's context",
                        ));
                    }
                    Ok(json!({"updated": true, "workflow_id": call.run_id}))
                }
                other => Err(ActionError::validation(format!(
                    "`action` must be read or update, not `{other}`"
                ))),
            }
        }
        "fail" => {
            let reason = call.str("reason").unwrap_or("workflow.fail invoked");
            Err(ActionError::new(
                opcode_vm::codes::R0110,
                "NON_RETRYABLE",
                reason,
                false,
            ))
        }
        "log" => {
            let level = call.str("level").unwrap_or("info");
            let message = call.str("message").unwrap_or_default();
            let mut data = serde_json::Map::new();
            if let Value::Object(params) = &call.params {
                for (k, v) in params {
                    if k != "message" && k != "level" {
                        data.insert(k.clone(), v.clone());
                    }
                }
            }
            services.log(call, level, message, &Value::Object(data));
            Ok(json!({"logged": true}))
        }
        "notify" => {
            let message = call.str("message").unwrap_or_default();
            Ok(services.notify(call, message, call.params.get("data").unwrap_or(&null)))
        }
        _ => Err(super::unknown(call)),
    }
}
