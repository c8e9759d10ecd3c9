//! The run view (spec/mcp.md): what `opcode.run`, `opcode.status` and
//! `opcode.signal` answer, sized for a context window, with details only
//! when `include` asks for them.

use std::sync::Arc;

use opcode_runtime::store::{
    Admitted, EntryKind, EventFilter, EventStore, FoundEntry, StepRow, WorkflowRow, WorkflowState,
    WorkflowStatus,
};
use opcode_runtime::summary::{self, View};
use opcode_vm::codes;
use serde_json::{Map, Value, json};

use super::args::Args;
use super::{Api, ToolError, ToolResult};

/// The details `include` may ask for.
const DETAILS: [&str; 4] = ["steps", "outputs", "inputs", "events"];

/// What the caller asked to see.
#[derive(Debug, Clone, Default)]
pub struct Asked {
    /// The summary's view.
    pub view: View,
    /// The log too.
    pub events: bool,
}

impl Asked {
    /// Reads `include` and `steps`, with the daemon's inline limit.
    pub fn from_args(args: &Args, inline_limit: usize) -> Result<Asked, ToolError> {
        let include = strings(args, "include")?;
        if let Some(bad) = include.iter().find(|i| !DETAILS.contains(&i.as_str())) {
            return Err(ToolError::new(
                codes::R0122,
                format!("`include` has `{bad}`: use {}", DETAILS.join(", ")),
            ));
        }
        let has = |detail: &str| include.iter().any(|i| i == detail);
        Ok(Asked {
            view: View {
                steps: has("steps"),
                outputs: has("outputs"),
                inputs: has("inputs"),
                only: strings(args, "steps")?,
                inline_limit: Some(inline_limit),
                order: Vec::new(),
            },
            events: has("events"),
        })
    }
}

/// A list of strings, or R0122.
fn strings(args: &Args, name: &str) -> Result<Vec<String>, ToolError> {
    let bad = || ToolError::new(codes::R0122, format!("`{name}` must be a list of strings"));
    match args.get(name) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned).ok_or_else(bad))
            .collect(),
        Some(_) => Err(bad()),
    }
}

/// The view of run `id`: from `state` when the caller has it, else read.
pub async fn render(
    api: &Api,
    id: &str,
    state: Option<Arc<WorkflowState>>,
    asked: &Asked,
) -> ToolResult {
    let state = match state {
        Some(state) => state,
        None => match api.store().state(id).await? {
            Some(state) => Arc::new(state),
            None => return Err(api.unknown_run(id).await),
        },
    };
    let mut out = summary::ordered_summary(api.store().as_ref(), &state, &asked.view).await?;
    if let Some(queue) = queue(api.store().as_ref(), &state.workflow, &state.steps).await? {
        out["queue"] = queue;
    }
    if asked.events {
        out["events"] = Value::Array(events(api, id, asked).await?);
    }
    Ok(out)
}

/// Where a run that waits for a slot of its concurrency key stands: `{key,
/// limit, position, holders}` (a run waiting so is active and has started
/// no step). The view's `queue`, AG-UI's `opcode.queued`.
pub async fn queue(
    store: &dyn EventStore,
    row: &WorkflowRow,
    steps: &[StepRow],
) -> Result<Option<Value>, ToolError> {
    if row.status != WorkflowStatus::Active || !steps.is_empty() {
        return Ok(None);
    }
    let Some(standing) = store.standing(&row.id).await? else {
        return Ok(None);
    };
    let Admitted::Waits { position, holders } = standing.admitted else {
        return Ok(None);
    };
    Ok(Some(json!({
        "key": standing.key,
        "limit": standing.limit,
        "position": position,
        "holders": holders,
    })))
}

/// The run's log as the view shows it: no input entry, no repeated
/// workflow id, big payloads by reference, the step filter applied.
async fn events(api: &Api, id: &str, asked: &Asked) -> Result<Vec<Value>, ToolError> {
    let entries = api
        .store()
        .find_entries(EventFilter {
            workflow_id: Some(id.to_owned()),
            ..EventFilter::default()
        })
        .await?;
    Ok(entries
        .iter()
        .filter(|f| f.entry.kind != EntryKind::Input)
        .filter(|f| {
            asked.view.only.is_empty()
                || f.entry
                    .step_id
                    .as_deref()
                    .is_some_and(|s| asked.view.keeps(s))
        })
        .map(|f| event(f, asked.view.inline_limit))
        .collect())
}

/// One entry of the log.
pub fn event(found: &FoundEntry, limit: Option<usize>) -> Value {
    let e = &found.entry;
    let mut out = Map::new();
    out.insert("sequence".into(), json!(e.seq));
    out.insert("timestamp".into(), json!(e.at));
    out.insert("kind".into(), json!(e.kind.as_str()));
    out.insert("event_type".into(), json!(e.event_type));
    if let Some(step) = &e.step_id {
        out.insert("step_id".into(), json!(step));
    }
    let payload = summary::stored(Some(&e.payload), limit, || {
        summary::run_uri(&found.workflow_id, &format!("events/{}", e.seq))
    });
    if let Some(payload) = payload.filter(|p| !p.is_null()) {
        out.insert("payload".into(), payload);
    }
    Value::Object(out)
}
