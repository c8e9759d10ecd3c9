//! What a [`Commit`] means, written once: the row writes it makes, in
//! order, and the refusals each can give. A backend executes the
//! [`Write`]s of [`plan`] in one transaction and adds nothing of its own;
//! `spec/store.md` is the same contract in prose.
//!
//! Only the writes before the first change can refuse
//! ([`Write::RequireLatest`], [`Write::Create`], [`Write::Advance`],
//! [`Write::Update`]): a backend that checks them first, or rolls back,
//! is all or nothing. Every check is against the database as it is, not as
//! the writer last saw it, so several processes may write one database.

use std::time::Duration;

use super::{
    Blob, Commit, DecisionChange, Fence, LeaseChange, NewEntry, NewWorkflow, StepRow, StoreError,
    StoreResult, TimerChange, WorkflowUpdate,
};

/// One write of a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write<'a> {
    /// Refuse with [`StoreError::Fenced`] unless the workflow's lease is
    /// held by the fence's owner at its epoch (or with
    /// [`StoreError::NotFound`]).
    Fence(&'a Fence),
    /// Refuse with [`StoreError::Outdated`] if `template` has a version
    /// newer than `version` (the writer took "the latest" from a cache).
    RequireLatest {
        /// The template.
        template: &'a str,
        /// The version the writer took.
        version: i64,
    },
    /// Create the workflow, refusing with [`StoreError::Exists`] if its id
    /// is taken: its source unless stored (sources are shared by hash),
    /// its row — status `pending` or `update`'s, the update's columns,
    /// `last_seq`, the lease if given — and its agent seen at creation.
    Create {
        /// The workflow.
        new: &'a NewWorkflow,
        /// Its first derived state.
        update: Option<&'a WorkflowUpdate>,
        /// Its log's last sequence once the commit's entries are appended.
        last_seq: u64,
        /// `(owner, ttl)`: the creator's lease, at epoch 1.
        lease: Option<(&'a str, Duration)>,
    },
    /// Compare and set the workflow's `last_seq` from `from` to `to`,
    /// refusing with [`StoreError::Conflict`] (another writer appended)
    /// or [`StoreError::NotFound`]; with `update`, the derived state too.
    Advance {
        /// The last sequence the writer saw.
        from: u64,
        /// The new last sequence.
        to: u64,
        /// The derived state.
        update: Option<&'a WorkflowUpdate>,
    },
    /// Set the derived state of a workflow (no entries appended),
    /// refusing with [`StoreError::NotFound`].
    Update(&'a WorkflowUpdate),
    /// Keep large values by hash; one already kept stays as it is.
    PutBlobs(&'a [Blob]),
    /// Append entries, numbered from `first_seq`.
    Append {
        /// The first entry's sequence number.
        first_seq: u64,
        /// The entries.
        entries: &'a [NewEntry],
    },
    /// Upsert step instances by name. A row written before keeps its first
    /// `started_at`; `duration_ms` is `completed_at` minus that start (0
    /// for a step that ends without having started), none while running.
    PutSteps(&'a [StepRow]),
    /// Start or end a timer.
    Timer(&'a TimerChange),
    /// Ask a decision (`pending`), or settle one — only if still pending.
    Decision(&'a DecisionChange),
    /// Delete an inbox message the commit consumed.
    TakeInbox(i64),
    /// Take the lease (only after [`Write::Create`] took none), or give it
    /// up — only if `owner` holds it.
    Lease(&'a LeaseChange),
}

/// The writes of `commit`, in the order they must be made.
pub fn plan(commit: &Commit) -> StoreResult<Vec<Write<'_>>> {
    let c = commit;
    let last_seq = c.after_seq + c.entries.len() as u64;
    let mut writes = Vec::with_capacity(4 + c.steps.len().min(1) + c.timers.len());
    let mut lease = c.lease.as_ref();
    if let (Some(fence), None) = (&c.fence, &c.create) {
        writes.push(Write::Fence(fence));
    }
    if let Some(new) = &c.create {
        if c.after_seq != 0 {
            return Err(StoreError::Conflict {
                id: c.workflow_id.clone(),
                expected: c.after_seq,
                actual: 0,
            });
        }
        if new.template_latest
            && let (Some(template), Some(version)) = (&new.template_name, new.template_version)
        {
            writes.push(Write::RequireLatest { template, version });
        }
        let taken = match lease {
            Some(LeaseChange::Take { owner, ttl }) => Some((owner.as_str(), *ttl)),
            _ => None,
        };
        if taken.is_some() {
            lease = None;
        }
        writes.push(Write::Create {
            new,
            update: c.update.as_ref(),
            last_seq,
            lease: taken,
        });
    } else if !c.entries.is_empty() {
        writes.push(Write::Advance {
            from: c.after_seq,
            to: last_seq,
            update: c.update.as_ref(),
        });
    } else if let Some(update) = &c.update {
        writes.push(Write::Update(update));
    }
    if !c.blobs.is_empty() {
        writes.push(Write::PutBlobs(&c.blobs));
    }
    if !c.entries.is_empty() {
        writes.push(Write::Append {
            first_seq: c.after_seq + 1,
            entries: &c.entries,
        });
    }
    if !c.steps.is_empty() {
        writes.push(Write::PutSteps(&c.steps));
    }
    writes.extend(c.timers.iter().map(Write::Timer));
    writes.extend(c.decisions.iter().map(Write::Decision));
    writes.extend(c.inbox_taken.iter().map(|&m| Write::TakeInbox(m)));
    writes.extend(lease.map(Write::Lease));
    Ok(writes)
}

/// The `duration_ms` of a step row: `completed_at` minus `first_started`
/// (the row's first start, kept across writes).
pub fn step_duration(first_started: Option<&str>, completed_at: Option<&str>) -> Option<i64> {
    let completed = crate::time::parse_ms(completed_at?)?;
    let started = first_started.map_or(Some(completed), crate::time::parse_ms)?;
    Some(completed as i64 - started as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{EntryKind, NewEntry};

    fn entry() -> NewEntry {
        NewEntry {
            at: "2026-01-01T00:00:00.000Z".into(),
            kind: EntryKind::Input,
            event_type: "resume_requested",
            step_id: None,
            version: 1,
            payload: "{}".into(),
        }
    }

    #[test]
    fn appends_compare_and_set_and_updates_alone_do_not() {
        let commit = Commit {
            workflow_id: "w".into(),
            after_seq: 4,
            entries: vec![entry(), entry()],
            ..Commit::default()
        };
        let writes = plan(&commit).unwrap();
        assert!(matches!(
            writes[..],
            [
                Write::Advance {
                    from: 4,
                    to: 6,
                    update: None
                },
                Write::Append { first_seq: 5, .. }
            ]
        ));
        let update = WorkflowUpdate::default();
        let commit = Commit {
            workflow_id: "w".into(),
            update: Some(update),
            ..Commit::default()
        };
        assert!(matches!(plan(&commit).unwrap()[..], [Write::Update(_)]));
    }

    #[test]
    fn a_creation_takes_its_lease_with_the_row_and_checks_the_latest_template_first() {
        let commit = Commit {
            workflow_id: "w".into(),
            create: Some(NewWorkflow {
                id: "w".into(),
                template_name: Some("t".into()),
                template_version: Some(3),
                template_latest: true,
                ..NewWorkflow::default()
            }),
            entries: vec![entry()],
            lease: Some(LeaseChange::Take {
                owner: "me".into(),
                ttl: Duration::from_secs(9),
            }),
            ..Commit::default()
        };
        let writes = plan(&commit).unwrap();
        assert!(matches!(
            writes[..],
            [
                Write::RequireLatest {
                    template: "t",
                    version: 3
                },
                Write::Create {
                    last_seq: 1,
                    lease: Some(("me", _)),
                    ..
                },
                Write::Append { first_seq: 1, .. }
            ]
        ));
    }

    #[test]
    fn a_fenced_commit_checks_its_lease_before_anything_else() {
        let fence = Fence {
            owner: "me".into(),
            epoch: 2,
        };
        let commit = Commit {
            workflow_id: "w".into(),
            after_seq: 1,
            entries: vec![entry()],
            fence: Some(fence.clone()),
            ..Commit::default()
        };
        let writes = plan(&commit).unwrap();
        assert!(matches!(
            writes[..],
            [Write::Fence(f), Write::Advance { .. }, Write::Append { .. }] if *f == fence
        ));
    }

    #[test]
    fn a_creation_after_entries_is_a_conflict() {
        let commit = Commit {
            workflow_id: "w".into(),
            create: Some(NewWorkflow::default()),
            after_seq: 2,
            ..Commit::default()
        };
        assert!(matches!(plan(&commit), Err(StoreError::Conflict { .. })));
    }

    #[test]
    fn durations_run_from_the_first_start() {
        let (a, b) = ("2026-01-01T00:00:00.000Z", "2026-01-01T00:00:01.500Z");
        assert_eq!(step_duration(Some(a), Some(b)), Some(1500));
        assert_eq!(step_duration(None, Some(b)), Some(0));
        assert_eq!(step_duration(Some(a), None), None);
    }
}
