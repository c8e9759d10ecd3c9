//! What the listing tools share: the workflows a filter names, and how
//! many rows a listing has in all.

use opcode_runtime::store::{Listing, WorkflowFilter, WorkflowStatus};
use opcode_vm::codes;
use serde_json::Value;

use super::args::Args;
use super::{Api, ToolError};

/// The workflows `filter` asks for, one page of them.
pub(super) fn workflow_filter(
    filter: &Args,
    limit: u32,
    offset: u32,
) -> Result<WorkflowFilter, ToolError> {
    let mut statuses = match filter.get("status") {
        None => Vec::new(),
        Some(Value::String(s)) => vec![status_of(s)?],
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map_or_else(|| Err(bad_status()), status_of))
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err(bad_status()),
    };
    // Each status once: a list of thousands names at most seven.
    statuses.sort_by_key(|s| s.as_str());
    statuses.dedup();
    let text = |key: &str| -> Result<Option<String>, ToolError> {
        Ok(filter.opt_str(key)?.map(str::to_owned))
    };
    Ok(WorkflowFilter {
        statuses,
        agent_id: text("agent_id")?,
        template_name: text("template_name")?,
        parent_id: text("parent_workflow_id")?,
        since: text("since")?,
        until: text("until")?,
        id_contains: text("id_contains")?,
        limit: Some(limit),
        offset,
    })
}

/// How many rows a store listing has in all: a page short of its limit
/// says so itself (when it is not empty or starts at the first row), else
/// the store counts.
pub(super) async fn counted(
    api: &Api,
    got: usize,
    limit: u32,
    offset: u32,
    listing: Listing,
) -> Result<usize, ToolError> {
    if got < limit as usize && (got > 0 || offset == 0) {
        return Ok(offset as usize + got);
    }
    Ok(api.store().count(listing).await? as usize)
}

/// The workflow status spelled `text`.
fn status_of(text: &str) -> Result<WorkflowStatus, ToolError> {
    WorkflowStatus::parse(text).ok_or_else(|| {
        let known: Vec<&str> = WorkflowStatus::ALL.iter().map(|s| s.as_str()).collect();
        ToolError::new(
            codes::R0122,
            format!(
                "`filter.status` `{text}` is not a workflow status; one of: {}",
                known.join(", ")
            ),
        )
    })
}

/// The refusal of a `filter.status` that is neither a status nor a list.
fn bad_status() -> ToolError {
    ToolError::new(
        codes::R0122,
        "`filter.status` must be a status or a list of them",
    )
}
