//! Reading rows into the store's types.

use tokio_postgres::Row;

use super::backend;
use crate::store::{
    DecisionRow, DecisionStatus, EntryKind, LogEntry, StepRow, StepStatus, StoreError, StoreResult,
    WorkflowRow, WorkflowStatus,
};

/// The columns [`workflow_row`] reads, in its order.
pub(super) const WORKFLOW_COLUMNS: &str = "id, name, source_hash, status, input_params, output, \
     error, context, agent_id, parent_workflow_id, template_name, template_version, base_dir, \
     last_seq, created_at, started_at, completed_at, updated_at";

fn text(row: &Row, i: usize) -> StoreResult<String> {
    row.try_get(i).map_err(backend)
}

fn maybe(row: &Row, i: usize) -> StoreResult<Option<String>> {
    row.try_get(i).map_err(backend)
}

fn int(row: &Row, i: usize) -> StoreResult<i64> {
    row.try_get(i).map_err(backend)
}

fn parsed<T>(row: &Row, i: usize, parse: impl Fn(&str) -> Option<T>) -> StoreResult<T> {
    let value = text(row, i)?;
    parse(&value).ok_or_else(|| StoreError::Backend(format!("column {i} holds `{value}`")))
}

pub(super) fn workflow_row(row: &Row) -> StoreResult<WorkflowRow> {
    Ok(WorkflowRow {
        id: text(row, 0)?,
        name: text(row, 1)?,
        source_hash: text(row, 2)?,
        status: parsed(row, 3, WorkflowStatus::parse)?,
        inputs: text(row, 4)?,
        output: maybe(row, 5)?,
        error: maybe(row, 6)?,
        context: maybe(row, 7)?,
        agent_id: maybe(row, 8)?,
        parent_id: maybe(row, 9)?,
        template_name: maybe(row, 10)?,
        template_version: row.try_get(11).map_err(backend)?,
        base_dir: maybe(row, 12)?,
        last_seq: int(row, 13)? as u64,
        created_at: text(row, 14)?,
        started_at: maybe(row, 15)?,
        completed_at: maybe(row, 16)?,
        updated_at: text(row, 17)?,
    })
}

/// The log entry in columns `first..first + 7` (`seq, at, kind,
/// event_type, step_id, version, payload`).
pub(super) fn log_entry(row: &Row, first: usize) -> StoreResult<LogEntry> {
    let version: i32 = row.try_get(first + 5).map_err(backend)?;
    Ok(LogEntry {
        seq: int(row, first)? as u64,
        at: text(row, first + 1)?,
        kind: parsed(row, first + 2, EntryKind::parse)?,
        event_type: text(row, first + 3)?,
        step_id: maybe(row, first + 4)?,
        version: u16::try_from(version).unwrap_or(u16::MAX),
        payload: text(row, first + 6)?,
    })
}

pub(super) fn step_row(row: &Row) -> StoreResult<StepRow> {
    Ok(StepRow {
        step_id: text(row, 0)?,
        status: parsed(row, 1, StepStatus::parse)?,
        attempt: int(row, 2)? as u32,
        output: maybe(row, 3)?,
        error: maybe(row, 4)?,
        started_at: maybe(row, 5)?,
        completed_at: maybe(row, 6)?,
        duration_ms: row.try_get(7).map_err(backend)?,
    })
}

pub(super) fn decision_row(row: &Row) -> StoreResult<DecisionRow> {
    Ok(DecisionRow {
        workflow_id: text(row, 0)?,
        id: text(row, 1)?,
        step_id: text(row, 2)?,
        prompt: text(row, 3)?,
        context: text(row, 4)?,
        options: text(row, 5)?,
        fallback: maybe(row, 6)?,
        target_agent: maybe(row, 7)?,
        timeout_at: maybe(row, 8)?,
        status: parsed(row, 9, DecisionStatus::parse)?,
        resolution: maybe(row, 10)?,
        resolved_by: maybe(row, 11)?,
        created_at: text(row, 12)?,
        resolved_at: maybe(row, 13)?,
    })
}
