//! `workflow.run`, `workflow.emit`, `workflow.context`, `workflow.fail`, `workflow.log`, `workflow.notify`.

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
        action("workflow.emit", "Publishes an event to live subscribers (the panel, SSE streams).")
            .opt("event_type", Ty::String, "the event name")
            .opt("event", Ty::String, "alias of event_type")
            .opt("payload", Ty::Any, "event data")
            .opt("data", Ty::Any, "alias of payload")
            .output(Ty::object([("emitted", Ty::Bool)])),
        action("workflow.context", "Reads or updates the workflow context (`context.*`). `update` merges `data` into it.")
            .req("action", Ty::one_of_strings(&["read", "update"]), "read or update")
            .opt("workflow_id", Ty::String, "whose context (default this workflow)")
            .opt("data", Ty::map(Ty::Any), "keys to merge (update)")
            .opt("agent_notes", Ty::String, "notes to store (update)")
            .output(Ty::Any),
        action("workflow.fail", "Fails the step, and the workflow unless on_error handles it.")
            .opt("reason", Ty::String, "why")
            .output(Ty::Null),
        action("workflow.log", "Writes a structured log line. Extra parameters are logged as fields.")
            .opt("message", Ty::String, "the message")
            .opt("level", Ty::one_of_strings(&["debug", "info", "warn", "error"]), "debug, info (default), warn or error")
            .opt("data", Ty::Any, "structured data")
            .open()
            .output(Ty::object([("logged", Ty::Bool)])),
        action("workflow.notify", "Sends a notification to the MCP session of the workflow's agent (best effort; never fails).")
            .req("message", Ty::String, "the notification text")
            .opt("data", Ty::Any, "structured data")
            .output(Ty::object([("notified", Ty::Bool), ("reason", Ty::String)])),
    ]
}
