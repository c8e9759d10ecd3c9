//! Recovery that cannot loop: each recovery at start is noted in the run's
//! log before the run replays; a run recovered more than
//! `limits.recoveries` times without getting past the work it was
//! recovered at (a run that ended the process each time) is quarantined
//! instead: it keeps its log and waits, visible as `quarantined`, until
//! someone resumes or cancels it (spec/limits.md).

use std::sync::Arc;

use serde_json::json;

use super::{ExecError, Inner};
use crate::log::{self, stamp};
use crate::store::{
    Commit, EntryKind, EventName, LogEntry, WorkflowRow, WorkflowStatus, WorkflowUpdate,
};
use crate::time::now_ms;

/// The note a recovery at start appends before the run replays.
pub(crate) const RECOVERED: EventName = EventName::WorkflowRecovered;
/// The note a graceful shutdown appends to each run it lets go.
pub(crate) const INTERRUPTED: EventName = EventName::WorkflowInterrupted;

/// How many recoveries in a row the log shows since the run last made
/// progress (an input) or was let go by a graceful shutdown.
pub(crate) fn recoveries_in_a_row(entries: &[LogEntry]) -> u32 {
    let mut count = 0;
    for entry in entries.iter().rev() {
        match (entry.kind, entry.name()) {
            (EntryKind::Input, _) | (EntryKind::Note, Some(INTERRUPTED)) => break,
            (EntryKind::Note, Some(RECOVERED)) => count += 1,
            _ => {}
        }
    }
    count
}

impl Inner {
    /// Recovers `row`, left running by a process that is gone: notes the
    /// recovery, then loads it; or quarantines it if it has been recovered
    /// too often in a row. Says whether it was loaded.
    pub(crate) async fn recover_one(
        self: &Arc<Self>,
        row: &WorkflowRow,
    ) -> Result<bool, ExecError> {
        self.claim(&row.id).await?;
        match self.note_recovery(row).await {
            // Loading takes the lease this process holds.
            Ok(Recovery::Noted) => self.resume(&row.id).await.map(|()| true),
            other => {
                self.release_lease(&row.id).await;
                other.map(|_| false)
            }
        }
    }

    /// Appends the recovery note, or quarantines the run. Holds the lease.
    async fn note_recovery(&self, row: &WorkflowRow) -> Result<Recovery, ExecError> {
        // Read under the lease: the row may have moved on since listed.
        let row = self
            .store
            .workflow(&row.id)
            .await?
            .unwrap_or_else(|| row.clone());
        let entries = self.store.entries(&row.id, 0, false).await?;
        let before = recoveries_in_a_row(&entries);
        let most = self.config.limits.recoveries;
        let at = stamp(now_ms());
        let quarantine = before >= most;
        let (note, payload) = if quarantine {
            (
                EventName::WorkflowQuarantined,
                json!({
                    "recoveries": before,
                    "limit": most,
                    "reason": format!(
                        "recovered {before} times in a row without getting past the same work \
                         (limits.recoveries is {most}); resume or cancel it by hand"
                    ),
                }),
            )
        } else {
            (RECOVERED, json!({ "recovery": before + 1, "limit": most }))
        };
        let commit = Commit {
            workflow_id: row.id.clone(),
            after_seq: row.last_seq,
            entries: vec![log::note(&at, note, None, &payload)],
            update: quarantine.then(|| WorkflowUpdate {
                status: WorkflowStatus::Quarantined,
                output: row.output.clone(),
                error: row.error.clone(),
                updated_at: at.clone(),
                ..WorkflowUpdate::default()
            }),
            ..Commit::default()
        };
        self.commit(commit, None).await?;
        if quarantine {
            tracing::error!(
                workflow = %row.id,
                recoveries = before,
                "workflow quarantined: each recovery ended the process; resume or cancel it by hand"
            );
            self.publish(&row.id, WorkflowStatus::Quarantined, false, None);
            return Ok(Recovery::Quarantined);
        }
        Ok(Recovery::Noted)
    }
}

/// What [`Inner::note_recovery`] did.
enum Recovery {
    Noted,
    Quarantined,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(kind: EntryKind, event_type: &str) -> LogEntry {
        LogEntry {
            seq: 0,
            at: String::new(),
            kind,
            event_type: event_type.into(),
            step_id: None,
            version: 1,
            payload: "{}".into(),
        }
    }

    #[test]
    fn recoveries_count_back_to_the_last_progress_or_shutdown() {
        let input = entry(EntryKind::Input, "action_finished");
        let recovered = entry(EntryKind::Note, RECOVERED.as_str());
        let redispatched = entry(EntryKind::Note, "action_redispatched");
        let record = entry(EntryKind::Record, "step_started");
        let log = vec![
            recovered.clone(),
            input.clone(),
            recovered.clone(),
            redispatched.clone(),
            record,
            recovered.clone(),
            redispatched,
        ];
        assert_eq!(recoveries_in_a_row(&log), 2);
        let mut shut = log.clone();
        shut.push(entry(EntryKind::Note, INTERRUPTED.as_str()));
        assert_eq!(recoveries_in_a_row(&shut), 0);
        shut.push(recovered);
        assert_eq!(recoveries_in_a_row(&shut), 1);
        assert_eq!(recoveries_in_a_row(&[input]), 0);
    }
}
