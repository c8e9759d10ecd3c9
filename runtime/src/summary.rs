//! A workflow's state as one JSON object, read from the store's derived
//! tables: what `opcode status` prints and the daemon returns.
//!
//! `{workflow_id, name, status, output, error, steps: {name: {status,
//! output, error, attempts, started_at, completed_at, duration_ms}},
//! pending_decisions: [{id, step_id, prompt, options, data, timeout_at,
//! fallback, target_agent}], created_at, started_at, completed_at}`

use serde_json::{Map, Value, json};

use crate::store::{EventStore, StoreError, WorkflowState};

/// The summary of workflow `id`, or `None` if there is no such workflow.
pub async fn summary(store: &dyn EventStore, id: &str) -> Result<Option<Value>, StoreError> {
    Ok(store.state(id).await?.map(|state| of_state(&state)))
}

/// The summary of a workflow's state as read.
pub fn of_state(state: &WorkflowState) -> Value {
    let row = &state.workflow;
    let mut steps = Map::new();
    for step in &state.steps {
        steps.insert(
            step.step_id.clone(),
            json!({
                "status": step.status,
                "output": parse(step.output.as_deref()),
                "error": parse(step.error.as_deref()),
                "attempts": step.attempt,
                "started_at": step.started_at,
                "completed_at": step.completed_at,
                "duration_ms": step.duration_ms,
            }),
        );
    }
    let pending: Vec<Value> = state
        .pending_decisions
        .iter()
        .map(|d| {
            json!({
                "id": d.id,
                "step_id": d.step_id,
                "prompt": d.prompt,
                "options": parse(Some(&d.options)),
                "data": parse(Some(&d.context)),
                "timeout_at": d.timeout_at,
                "fallback": d.fallback,
                "target_agent": d.target_agent,
            })
        })
        .collect();
    json!({
        "workflow_id": row.id,
        "name": row.name,
        "status": row.status,
        "output": parse(row.output.as_deref()),
        "error": parse(row.error.as_deref()),
        "steps": steps,
        "pending_decisions": pending,
        "created_at": row.created_at,
        "started_at": row.started_at,
        "completed_at": row.completed_at,
    })
}

/// Stored JSON text as a value (`null` when absent or unreadable).
fn parse(text: Option<&str>) -> Value {
    text.and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or(Value::Null)
}
