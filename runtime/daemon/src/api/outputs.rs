//! The JSON Schemas of the tools' results (`outputSchema`): what a client
//! can rely on. Results may carry more than a schema names; a failed call
//! is `{"error": {code, name, message, details}}` with `isError`.

use serde_json::{Value, json};

/// A value inlined, or `{bytes, uri}` when over the inline limit.
fn sized(description: &str) -> Value {
    json!({"description": format!("{description}; over the inline limit, {{bytes, uri}}: the resource that reads it")})
}

/// `opcode.run` and `opcode.status`: the run view of spec/mcp.md.
pub fn run_view() -> Value {
    json!({
        "type": "object",
        "properties": {
            "workflow_id": {"type": "string", "description": "The run's id."},
            "name": {"type": "string", "description": "The run's name (its template's)."},
            "status": {"type": "string", "enum": ["pending", "active", "suspended", "completed", "failed", "cancelled", "quarantined"]},
            "step_counts": {"type": "object", "additionalProperties": {"type": "integer"}, "description": "Step instances by status."},
            "output": sized("The workflow's output"),
            "error": sized("Why it failed: {code, kind, message, step, details}"),
            "pending_decisions": {"type": "array", "items": pending_decision(), "description": "Decisions it waits for (a child run's carry its workflow_id): answer with opcode.signal (decision)."},
            "waiting_runs": {"type": "array", "items": {"type": "string"}, "description": "Suspended child runs that hold this run (their decisions are in pending_decisions; a signal goes to the child's id)."},
            "queue": {"type": "object", "description": "The run waits for a slot of its concurrency key (no step started yet): the key, its limit, how many runs wait before it (position) and the runs holding its slots.", "properties": {"key": {"type": "string"}, "limit": {"type": "integer"}, "position": {"type": "integer"}, "holders": {"type": "array", "items": {"type": "string"}}}},
            "started_at": {"type": "string", "format": "date-time"},
            "completed_at": {"type": "string", "format": "date-time"},
            "inputs": sized("The run's inputs (include inputs)"),
            "steps": {"type": "object", "description": "Step instances in DAG order (include steps): {status, attempts, started_at, completed_at, duration_ms, error, output}."},
            "events": {"type": "array", "description": "The log (include events): {sequence, timestamp, kind, event_type, step_id, payload}."}
        },
        "required": ["workflow_id", "status"]
    })
}

fn pending_decision() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "step_id": {"type": "string"},
            "status": {"type": "string"},
            "context": {"type": "object", "properties": {"prompt": {"type": "string"}, "data": {}}},
            "options": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string"}, "description": {"type": "string"}}}},
            "timeout_at": {"type": "string", "format": "date-time"},
            "fallback": {"type": "string"},
            "target_agent": {"type": "string"},
            "workflow_id": {"type": "string", "description": "The child run that asks, when it is not this run."}
        },
        "required": ["id", "step_id", "status", "context"]
    })
}

/// `opcode.define`.
pub fn define() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "version": {"type": "string", "description": "\"v3\"; an agent's semantic version, \"1.2.0\""},
            "version_number": {"type": "integer", "description": "A template's version (not given for an agent)."},
            "unchanged": {"type": "boolean", "description": "true when the definition was already the newest version: nothing new was stored."},
            "schedule": {"type": "object"},
            "warnings": {"type": "array"},
            "kind": {"type": "string", "description": "\"agent\" when an agent release was published."},
            "digest": {"type": "string", "description": "An agent release's digest."},
            "uri": {"type": "string", "description": "An agent release's resource."}
        },
        "required": ["name", "version"]
    })
}

/// `opcode.signal`.
pub fn signal() -> Value {
    let mut view = run_view();
    if let Some(properties) = view["properties"].as_object_mut() {
        properties.insert("ok".into(), json!({"type": "boolean"}));
        properties.insert("signal_type".into(), json!({"type": "string"}));
        properties.insert(
            "resumed".into(),
            json!({"type": "boolean", "description": "A resume that restarted the run."}),
        );
        properties.insert("queued".into(), json!({"type": "boolean", "description": "Another daemon owns the run: the signal waits in its inbox."}));
        properties.insert("owner".into(), json!({"type": "string"}));
    }
    view["required"] = json!(["ok"]);
    view
}

/// `opcode.query`.
pub fn query() -> Value {
    json!({
        "type": "object",
        "properties": {
            "count": {"type": "integer", "description": "Rows in this page."},
            "total": {"type": "integer", "description": "Rows that match the filter."},
            "has_more": {"type": "boolean", "description": "More rows after this page: ask again with offset + count."},
            "limit": {"type": "integer"},
            "offset": {"type": "integer"}
        },
        "required": ["count", "total", "has_more", "limit", "offset"]
    })
}

/// `opcode.diagram`.
pub fn diagram() -> Value {
    json!({
        "type": "object",
        "properties": {
            "format": {"type": "string"},
            "diagram": {"type": "string", "description": "ascii or mermaid text."},
            "mime_type": {"type": "string", "description": "An image's type; the image is the result's image content."}
        },
        "required": ["format"]
    })
}
