//! The tools as MCP lists them: names, descriptions, input and output
//! schemas, hints, and the server's instructions. Every parameter has a
//! description and one type (strict function-calling schemas refuse
//! unions); the values the tools also accept beyond it (a version as a
//! number, a boolean as `"true"`) are said in the description.

use std::sync::LazyLock;

use serde_json::{Value, json};

use super::outputs;

/// What the server tells a client about itself at `initialize`.
pub const INSTRUCTIONS: &str = "opcode runs agent workflows deterministically, durably and \
for free once defined. Define a workflow once with opcode.define (it is compiled; if it is \
invalid the result lists every diagnostic with a JSON pointer and a fix), start it with \
opcode.run (params are validated against its input_schema; the result is the workflow's \
status and output, or pass wait=false to get the workflow_id at once), follow it with \
opcode.status, answer a reasoning step's decision or send a signal with opcode.signal \
(decision / cancel / resume / signal), list workflows, events, templates and decisions with \
opcode.query, and draw a template or a running workflow with opcode.diagram (ascii, \
mermaid, or an svg or png image). Results are sized for a context window: steps, events and \
inputs come only with `include`, and a value over 4 KiB is replaced by {bytes, uri}, a \
resource to read. Workflows survive restarts: a suspended workflow waits in the database \
until it is signalled.";

/// What a tool does to the world, for clients that ask before calling:
/// MCP's four tool annotations.
#[allow(clippy::struct_excessive_bools)] // one per annotation
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hints {
    /// It changes nothing.
    pub read_only: bool,
    /// It may end or undo something (a cancel).
    pub destructive: bool,
    /// Calling it again with the same arguments does nothing more.
    pub idempotent: bool,
    /// It reaches beyond the daemon (a workflow's actions).
    pub open_world: bool,
}

/// One tool.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Its arguments' JSON Schema.
    pub input_schema: Value,
    /// Its result's JSON Schema.
    pub output_schema: Value,
    /// What it does to the world.
    pub hints: Hints,
}

impl ToolSpec {
    /// The names of its arguments.
    pub fn arguments(&self) -> Vec<&str> {
        self.input_schema["properties"]
            .as_object()
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }
}

/// The six tools, built once.
pub fn tools() -> &'static [ToolSpec] {
    static TOOLS: LazyLock<Vec<ToolSpec>> = LazyLock::new(build);
    &TOOLS
}

/// The tool named `name`, if it is one of the six.
pub fn tool(name: &str) -> Option<&'static ToolSpec> {
    tools().iter().find(|t| t.name == name)
}

fn text(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

/// The arguments that choose what a run view shows (spec/mcp.md).
pub fn view_arguments() -> Value {
    json!({
        "include": {
            "type": "array",
            "items": {"type": "string", "enum": ["steps", "outputs", "inputs", "events"]},
            "description": "Details to add to the result: steps (each step's status, attempts, times, error), outputs (each step's output too), inputs (the run's inputs), events (its log). Default: none, only status, output, error and pending decisions."
        },
        "steps": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Only these step ids (and their loop instances) in steps and events; implies include steps."
        }
    })
}

fn with_view(mut properties: Value) -> Value {
    if let (Some(map), Value::Object(view)) = (properties.as_object_mut(), view_arguments()) {
        map.extend(view);
    }
    properties
}

fn build() -> Vec<ToolSpec> {
    let version =
        text("Template version: \"3\" or \"v3\" (a number is accepted too). Default: the newest.");
    let agent = text(
        "Your agent id (any stable name): registers you, and workflow.notify messages come to this session.",
    );
    vec![
        ToolSpec {
            name: "opcode.define".into(),
            description: "Compile a workflow and store it as the next version of a template \
                (an identical definition returns its existing version). An invalid workflow \
                is rejected with its diagnostics (code, message, pointer, line, column, help, \
                fix) in error.details.diagnostics. With `agent` instead of `definition`, \
                publish an agent definition as an immutable release of the agent registry \
                (opcode://agents), refused the same way."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "name": text("Template name: letters, digits, '-', '_' and '.'. With `agent`, the agent's name (optional)."),
                    "agent": {
                        "oneOf": [
                            {"type": "object", "description": "{\"name\", \"version\" (semver), \"role\": scout|worker|runner, \"runs_on\", \"model\", \"variant\", \"skills\": [{\"name\", \"content\"}], \"mcp\", \"budgets\", \"permissions\"}."},
                            {"type": "string", "description": "The agent definition as JSON text."}
                        ],
                        "description": "An agent definition to publish as a release (instead of `definition`); a step names it as agent: \"name\" or \"name@version\"."
                    },
                    "definition": {
                        "oneOf": [
                            {"type": "object", "description": "The workflow object: {\"steps\": [...], \"output\": ..., ...}."},
                            {"type": "string", "description": "The workflow as text: JSON, or .opc when it does not start with '{'."}
                        ],
                        "description": "The workflow, as an object or as text."
                    },
                    "agent_id": agent,
                    "description": text("What the template does, for people and agents."),
                    "input_schema": {"type": "object", "description": "JSON Schema of the run params; its defaults apply to every run."},
                    "output_schema": {"type": "object", "description": "JSON Schema of the workflow's output."},
                    "triggers": {"type": "object", "description": "{\"cron\": \"0 9 * * 1-5\", \"timezone\": \"UTC\", \"params\": {}, \"missed\": \"run_once\" or \"skip\"} runs the template on a schedule; {\"webhook\": {\"secret\": \"VAULT_SECRET\", \"auth\": \"hmac\" or \"stripe\" or \"token\"}} gives it POST /hooks/NAME, the body as the params."},
                    "expose": {"type": "boolean", "description": "List the template as a tool of its own, named as it is, its input_schema the tool's; calling it runs the newest version (default false)."},
                    "priority": {"type": "integer", "minimum": 0, "maximum": 9, "description": "Its runs' priority, 0 (first) to 9 (last), default 5; not above the settings' priority_highest (default 5)."}
                },
                "required": []
            }),
            output_schema: outputs::define(),
            hints: Hints {
                idempotent: true,
                ..Hints::default()
            },
        },
        ToolSpec {
            name: "opcode.run".into(),
            description: "Run a template. Params are validated against its input_schema. \
                Returns when the workflow completes, fails or suspends: its status, output, \
                error and pending decisions (steps, events and inputs with include), or at \
                once with wait=false."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": with_view(json!({
                    "template_name": text("The template to run."),
                    "version": version,
                    "params": {"type": "object", "description": "The workflow's inputs, checked against the template's input_schema."},
                    "agent_id": agent,
                    "session_id": text("A conversation this run belongs to: delegated agents' steps of runs in one session get its earlier turns; the workflow reads it as workflow.session_id."),
                    "priority": {"type": "integer", "minimum": 0, "maximum": 9, "description": "0 (first) to 9 (last), default 5: when action calls wait for a worker slot, those of runs with a lower number go first, then the oldest. Runs it starts inherit it. The settings' priority_highest bounds how high a caller may ask (default 5)."},
                    "idempotency_key": text("Starts one run per key and template: a call again with the same key (a retry) gets that run, marked duplicate, instead of a second one. 1 to 256 characters."),
                    "wait": {"type": "boolean", "description": "Wait until the run completes, fails or suspends (default true); false returns its workflow_id at once."}
                })),
                "required": ["template_name"]
            }),
            output_schema: outputs::run_view(),
            // A workflow's actions may change anything (files, services).
            hints: Hints {
                destructive: true,
                open_world: true,
                ..Hints::default()
            },
        },
        ToolSpec {
            name: "opcode.status".into(),
            description: "A workflow's status, output, error and pending decisions; its \
                steps, events and inputs with include."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": with_view(json!({
                    "workflow_id": text("The workflow (run) id, as opcode.run returned it."),
                    "agent_id": agent
                })),
                "required": ["workflow_id"]
            }),
            output_schema: outputs::run_view(),
            hints: Hints {
                read_only: true,
                idempotent: true,
                ..Hints::default()
            },
        },
        ToolSpec {
            name: "opcode.signal".into(),
            description: "decision: answer a pending decision (step_id, payload.choice, \
                optional payload.data and reasoning), then the workflow resumes. cancel: a \
                pending decision (with step_id) or the whole workflow. resume: an \
                interrupted or suspended workflow. signal (or data): a named signal for \
                wait steps (payload.name, payload.data)."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": with_view(json!({
                    "workflow_id": text("The workflow (run) id."),
                    "signal_type": {"type": "string", "enum": ["decision", "cancel", "resume", "signal", "data"], "description": "What to do: answer a decision, cancel, resume, or send a named signal."},
                    "step_id": text("decision and cancel: the reasoning step (or the decision id) to answer or cancel; signal: the signal's name when payload.name is absent."),
                    "payload": {"type": "object", "description": "decision: {\"choice\": option id, \"data\": {...}}; cancel: {\"reason\": text}; signal: {\"name\": signal, \"data\": {...}}."},
                    "reasoning": text("decision: why this choice, kept with the resolution."),
                    "agent_id": agent,
                    "wait": {"type": "boolean", "description": "Answer once the run has settled again (default true); false answers at once."}
                })),
                "required": ["workflow_id", "signal_type"]
            }),
            output_schema: outputs::signal(),
            hints: Hints {
                destructive: true,
                ..Hints::default()
            },
        },
        ToolSpec {
            name: "opcode.query".into(),
            description: "List workflows, events, templates, decisions, schedules or \
                plugins, filtered and paged; the result says the total and whether more \
                pages exist. `test_cases` gives runs at rest as workflow test cases (their \
                inputs, calls as mocks, decisions and outcome): write `{\"cases\": [...]}` \
                beside the workflow as NAME.test.json and `opcodec test` replays them."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "resource": {"type": "string", "enum": ["workflows", "events", "templates", "decisions", "schedules", "plugins", "pruned", "test_cases"], "description": "What to list."},
                    "filter": {"type": "object", "description": "workflows: status (one or a list), agent_id, template_name, parent_workflow_id, since, until (created before), id_contains; events: workflow_id, event_type, step_id, since; templates: name, agent_id, latest; decisions: workflow_id, status (pending by default, or all), agent_id; schedules: template_name; plugins: name; test_cases: workflow_id (one run), or the workflows keys (runs that ended or rest suspended)."},
                    "limit": {"type": "integer", "minimum": 0, "maximum": 1000, "description": "Rows per page (default 50, at most 1000)."},
                    "offset": {"type": "integer", "minimum": 0, "description": "Rows to skip (default 0)."},
                    "agent_id": agent
                },
                "required": ["resource"]
            }),
            output_schema: outputs::query(),
            hints: Hints {
                read_only: true,
                idempotent: true,
                ..Hints::default()
            },
        },
        ToolSpec {
            name: "opcode.diagram".into(),
            description: "Draw a template (template_name, version) or a workflow \
                (workflow_id, with each step's status) as ascii or mermaid text, or as an \
                svg or png image (image content; opcode's \"image\" is png)."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "template_name": text("The template to draw (or give workflow_id)."),
                    "version": text("Template version: \"3\" or \"v3\". Default: the newest."),
                    "workflow_id": text("The workflow to draw, with each step's status."),
                    "format": {"type": "string", "enum": ["ascii", "mermaid", "svg", "png", "image"], "description": "Default mermaid; image is png."},
                    "include_status": {"type": "boolean", "description": "Draw each step's status on a workflow's diagram (default true)."},
                    "agent_id": agent
                }
            }),
            output_schema: outputs::diagram(),
            hints: Hints {
                read_only: true,
                idempotent: true,
                ..Hints::default()
            },
        },
    ]
}
