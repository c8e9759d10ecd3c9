//! The tools as MCP lists them: names, descriptions and input schemas, and
//! the server's instructions.

use serde_json::{Value, json};

/// What the server tells a client about itself at `initialize`.
pub const INSTRUCTIONS: &str = "opcode runs agent workflows deterministically, durably and \
for free once defined. Define a workflow once with opcode.define (it is compiled; if it is \
invalid the result lists every diagnostic with a JSON pointer and a fix), start it with \
opcode.run (params are validated against its input_schema; the result is the workflow's \
status and output, or pass wait=false to get the workflow_id at once), follow it with \
opcode.status, answer a reasoning step's decision or send a signal with opcode.signal \
(decision / cancel / resume / signal), list workflows, events, templates and decisions with \
opcode.query, and draw a template or a running workflow with opcode.diagram (ascii, \
mermaid, or an svg or png image). Workflows survive restarts: a suspended workflow waits in the database until \
it is signalled.";

/// One tool.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// Its name.
    pub name: &'static str,
    /// What it does.
    pub description: &'static str,
    /// Its arguments' JSON Schema.
    pub input_schema: Value,
}

/// The six tools.
pub fn tools() -> Vec<ToolSpec> {
    let version = json!({
        "type": ["string", "integer"],
        "description": "Template version: 3 or \"v3\". Default: the newest."
    });
    vec![
        ToolSpec {
            name: "opcode.define",
            description: "Compile a workflow and store it as the next version of a template. \
                An invalid workflow is rejected with its diagnostics (code, message, pointer, \
                line, column, help, fix) in error.details.diagnostics.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "Template name."},
                    "definition": {"type": ["object", "string"], "description": "The workflow: {\"steps\": [...], ...}, or its text (JSON, or .opc when it does not start with `{`)."},
                    "agent_id": {"type": "string", "description": "Who defines it."},
                    "description": {"type": "string"},
                    "input_schema": {"type": "object", "description": "JSON Schema of run params; defaults apply."},
                    "output_schema": {"type": "object"},
                    "triggers": {"type": "object", "description": "{\"cron\": \"0 9 * * 1-5\", \"timezone\": \"UTC\", \"params\": {}, \"missed\": \"run_once\"|\"skip\"} runs the template on a schedule."}
                },
                "required": ["name", "definition"]
            }),
        },
        ToolSpec {
            name: "opcode.run",
            description: "Run a template. Params are validated against its input_schema. \
                Returns when the workflow completes, fails or suspends (status, steps, \
                output, pending_decisions), or at once with wait=false.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "template_name": {"type": "string"},
                    "version": version,
                    "params": {"type": "object", "description": "The workflow's inputs."},
                    "agent_id": {"type": "string"},
                    "wait": {"type": "boolean", "description": "Default true."}
                },
                "required": ["template_name"]
            }),
        },
        ToolSpec {
            name: "opcode.status",
            description: "A workflow's status, steps, pending decisions, output and events.",
            input_schema: json!({
                "type": "object",
                "properties": {"workflow_id": {"type": "string"}},
                "required": ["workflow_id"]
            }),
        },
        ToolSpec {
            name: "opcode.signal",
            description: "decision: answer a pending decision (step_id, payload.choice, \
                optional payload.data and reasoning), then the workflow resumes. cancel: a \
                pending decision (with step_id) or the whole workflow. resume: an \
                interrupted or suspended workflow. signal (or data): a named signal for \
                wait steps (payload.name, payload.data).",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "workflow_id": {"type": "string"},
                    "signal_type": {"type": "string", "enum": ["decision", "cancel", "resume", "signal", "data"]},
                    "step_id": {"type": "string"},
                    "payload": {"type": "object"},
                    "reasoning": {"type": "string"},
                    "agent_id": {"type": "string"}
                },
                "required": ["workflow_id", "signal_type"]
            }),
        },
        ToolSpec {
            name: "opcode.query",
            description: "List workflows (filter: status, agent_id, template_name, \
                parent_workflow_id, since), events (workflow_id, event_type, step_id, since), \
                templates (name, agent_id, latest), decisions (workflow_id, status: pending \
                by default or all, agent_id), schedules (template_name) or plugins (name: \
                status, tools, restarts), with limit (default 50) and offset.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "resource": {"type": "string", "enum": ["workflows", "events", "templates", "decisions", "schedules", "plugins"]},
                    "filter": {"type": "object"},
                    "limit": {"type": "integer", "minimum": 0},
                    "offset": {"type": "integer", "minimum": 0}
                },
                "required": ["resource"]
            }),
        },
        ToolSpec {
            name: "opcode.diagram",
            description: "Draw a template (template_name, version) or a workflow \
                (workflow_id, with each step's status) as ascii or mermaid text, or as an \
                svg or png image (image content).",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "template_name": {"type": "string"},
                    "version": version,
                    "workflow_id": {"type": "string"},
                    "format": {"type": "string", "enum": ["ascii", "mermaid", "svg", "png"]},
                    "include_status": {"type": ["boolean", "string"]}
                }
            }),
        },
    ]
}
