//! `opcode.status`: a workflow's state, steps, pending decisions and log.

use serde_json::{Value, json};

use super::args::Args;
use super::{Api, ToolError, ToolResult};
use opcode_runtime::store::EventFilter;
use opcode_vm::codes;

/// Handles `opcode.status`.
pub async fn status(api: &Api, args: &Args) -> ToolResult {
    let id = args.str("workflow_id")?;
    let mut summary = summary_of(api, id).await?;
    let entries = api
        .store()
        .find_entries(EventFilter {
            workflow_id: Some(id.to_owned()),
            ..EventFilter::default()
        })
        .await?;
    let events: Vec<Value> = entries
        .iter()
        .filter(|f| f.entry.kind != opcode_runtime::store::EntryKind::Input)
        .map(super::query::event_json)
        .collect();
    summary["events"] = Value::Array(events);
    Ok(summary)
}

/// The status summary of `id`, or R0121.
pub async fn summary_of(api: &Api, id: &str) -> ToolResult {
    opcode_runtime::summary::summary(api.store().as_ref(), id)
        .await?
        .ok_or_else(|| ToolError::new(codes::R0121, format!("workflow `{id}` not found")))
        .map(|mut s| {
            if let Some(map) = s.as_object_mut() {
                map.entry("workflow_id").or_insert_with(|| json!(id));
            }
            s
        })
}
