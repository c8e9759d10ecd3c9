//! Reading columns into Rust values, and the parameters of the write path's
//! statements.

use libsql::{Row, Value};

use super::{backend, seq};
use crate::store::{
    DecisionRow, DecisionStatus, EntryKind, LogEntry, NewWorkflow, StepRow, StepStatus, StoreError,
    StoreResult, WorkflowRow, WorkflowStatus, WorkflowUpdate,
};

/// A Rust value read from a column.
pub(super) trait FromColumn: Sized {
    fn from_column(value: Value) -> Option<Self>;
}

impl FromColumn for String {
    fn from_column(value: Value) -> Option<String> {
        match value {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }
}

impl FromColumn for WorkflowStatus {
    fn from_column(value: Value) -> Option<WorkflowStatus> {
        match value {
            Value::Text(s) => WorkflowStatus::parse(&s),
            _ => None,
        }
    }
}

impl FromColumn for StepStatus {
    fn from_column(value: Value) -> Option<StepStatus> {
        match value {
            Value::Text(s) => StepStatus::parse(&s),
            _ => None,
        }
    }
}

impl FromColumn for DecisionStatus {
    fn from_column(value: Value) -> Option<DecisionStatus> {
        match value {
            Value::Text(s) => DecisionStatus::parse(&s),
            _ => None,
        }
    }
}

impl FromColumn for i64 {
    fn from_column(value: Value) -> Option<i64> {
        match value {
            Value::Integer(i) => Some(i),
            _ => None,
        }
    }
}

impl FromColumn for Vec<u8> {
    fn from_column(value: Value) -> Option<Vec<u8>> {
        match value {
            Value::Blob(b) => Some(b),
            Value::Text(s) => Some(s.into_bytes()),
            _ => None,
        }
    }
}

impl<T: FromColumn> FromColumn for Option<T> {
    fn from_column(value: Value) -> Option<Option<T>> {
        match value {
            Value::Null => Some(None),
            other => T::from_column(other).map(Some),
        }
    }
}

pub(super) fn get<T: FromColumn>(row: &Row, i: i32) -> StoreResult<T> {
    let value = row.get_value(i).map_err(backend)?;
    T::from_column(value)
        .ok_or_else(|| StoreError::Backend(format!("column {i} holds a value of another type")))
}

/// The new row: its identity, then its state after the creating commit
/// (`update`), its last sequence and the lease taken.
pub(super) fn create_params(
    w: &NewWorkflow,
    update: Option<&WorkflowUpdate>,
    last_seq: u64,
    lease: Option<(&str, std::time::Duration)>,
) -> Vec<Value> {
    vec![
        w.id.as_str().into(),
        w.name.as_str().into(),
        w.source.hash.as_str().into(),
        w.inputs.as_str().into(),
        w.agent_id.clone().into(),
        w.parent_id.clone().into(),
        w.template_name.clone().into(),
        w.template_version.into(),
        w.base_dir.clone().into(),
        w.created_at.as_str().into(),
        update.map(|u| u.status.as_str()).into(),
        seq(last_seq),
        update.map(|u| u.updated_at.clone()).into(),
        update.and_then(|u| u.output.clone()).into(),
        update.and_then(|u| u.error.clone()).into(),
        update.and_then(|u| u.context.clone()).into(),
        update.and_then(|u| u.started_at.clone()).into(),
        update.and_then(|u| u.completed_at.clone()).into(),
        lease.map(|(owner, _)| owner.to_owned()).into(),
        lease.map(|(_, ttl)| crate::time::from_now(ttl)).into(),
    ]
}

pub(super) fn step_params(id: &str, s: &StepRow) -> Vec<Value> {
    vec![
        id.into(),
        s.step_id.as_str().into(),
        s.status.as_str().into(),
        i64::from(s.attempt).into(),
        s.output.clone().into(),
        s.error.clone().into(),
        s.started_at.clone().into(),
        s.completed_at.clone().into(),
        crate::store::commit::step_duration(s.started_at.as_deref(), s.completed_at.as_deref())
            .into(),
    ]
}

/// `id` then the update's columns, in the order of `update_workflow`.
pub(super) fn update_params(id: &str, u: &WorkflowUpdate) -> Vec<Value> {
    vec![
        id.into(),
        u.status.as_str().into(),
        u.output.clone().into(),
        u.error.clone().into(),
        u.context.clone().into(),
        u.started_at.clone().into(),
        u.completed_at.clone().into(),
        u.updated_at.as_str().into(),
    ]
}

pub(super) fn decision_params(id: &str, d: &DecisionRow) -> Vec<Value> {
    vec![
        id.into(),
        d.id.as_str().into(),
        d.step_id.as_str().into(),
        d.prompt.as_str().into(),
        d.context.as_str().into(),
        d.options.as_str().into(),
        d.fallback.clone().into(),
        d.target_agent.clone().into(),
        d.timeout_at.clone().into(),
        d.created_at.as_str().into(),
    ]
}

pub(super) fn workflow_row(row: &Row) -> StoreResult<WorkflowRow> {
    Ok(WorkflowRow {
        id: get(row, 0)?,
        name: get(row, 1)?,
        source_hash: get(row, 2)?,
        status: get(row, 3)?,
        inputs: get(row, 4)?,
        output: get(row, 5)?,
        error: get(row, 6)?,
        context: get(row, 7)?,
        agent_id: get(row, 8)?,
        parent_id: get(row, 9)?,
        template_name: get(row, 10)?,
        template_version: get(row, 11)?,
        base_dir: get(row, 12)?,
        last_seq: get::<i64>(row, 13)? as u64,
        created_at: get(row, 14)?,
        started_at: get(row, 15)?,
        completed_at: get(row, 16)?,
        updated_at: get(row, 17)?,
    })
}

/// The log entry in columns `first..first + 7` (`seq, at, kind, event_type,
/// step_id, version, payload`).
pub(super) fn log_entry(row: &Row, first: i32) -> StoreResult<LogEntry> {
    let kind: String = get(row, first + 2)?;
    Ok(LogEntry {
        seq: get::<i64>(row, first)? as u64,
        at: get(row, first + 1)?,
        kind: EntryKind::parse(&kind)
            .ok_or_else(|| StoreError::Backend(format!("unknown entry kind `{kind}`")))?,
        event_type: get(row, first + 3)?,
        step_id: get(row, first + 4)?,
        version: get::<i64>(row, first + 5)? as u16,
        payload: get(row, first + 6)?,
    })
}
