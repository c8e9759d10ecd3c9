//! Leases in the store contract, on every backend: exclusive until they
//! expire, fencing a writer whose lease moved on, riding along with
//! commits, and what the backlog and the orphans list count.

use std::time::Duration;

use opcode_runtime::store::{
    Backlog, Claim, Commit, Fence, LeaseChange, StepRow, StepStatus, StoreError, TimerChange,
    TimerRow, WorkflowStatus, WorkflowUpdate,
};

use super::{LONG, at, block_on, create, created_held, entry, stores};

/// Lets a lease granted for `Duration::ZERO` expire by the store's clock.
async fn expire() {
    tokio::time::sleep(Duration::from_millis(5)).await;
}

#[test]
fn leases_are_exclusive_until_they_expire() {
    for (name, store, _dir) in stores() {
        block_on(async {
            store.commit(create("w")).await.unwrap();
            let granted = store.claim("w", "me", None, LONG).await.unwrap();
            assert_eq!(granted, Claim::Granted { epoch: 1 }, "{name}");
            let held = store.claim("w", "you", None, LONG).await.unwrap();
            assert!(
                matches!(held, Claim::Held { ref owner, .. } if owner == "me"),
                "{name}: {held:?}"
            );
            // The owner may claim again, keeping its epoch.
            let again = store.claim("w", "me", None, LONG).await.unwrap();
            assert_eq!(again, Claim::Granted { epoch: 1 }, "{name}");
            // Taken from a dead owner: the next epoch.
            let taken = store.claim("w", "you", Some("me"), LONG).await.unwrap();
            assert_eq!(taken, Claim::Granted { epoch: 2 }, "{name}");
            // Renewed, it holds; let lapse, anyone takes it.
            store.renew("you", LONG).await.unwrap();
            let held = store.claim("w", "me", None, LONG).await.unwrap();
            assert!(matches!(held, Claim::Held { .. }), "{name}");
            store.renew("you", Duration::ZERO).await.unwrap();
            expire().await;
            let expired = store.claim("w", "me", None, LONG).await.unwrap();
            assert_eq!(expired, Claim::Granted { epoch: 3 }, "{name}");
            // Released, then claimed again by the same owner: a new grant.
            store.release("w", "me").await.unwrap();
            let free = store.claim("w", "me", None, LONG).await.unwrap();
            assert_eq!(free, Claim::Granted { epoch: 4 }, "{name}");
            let none = store.claim("nobody", "me", None, LONG).await.unwrap();
            assert_eq!(none, Claim::Granted { epoch: 0 }, "{name}");
        });
    }
}

/// A commit fenced by a lease that moved on is refused whole, even after
/// the new owner let the lease go; the current holder's goes through.
#[test]
fn a_commit_from_a_lease_that_moved_on_is_refused() {
    for (name, store, _dir) in stores() {
        block_on(async {
            store
                .commit(created_held("w", "me", Duration::ZERO))
                .await
                .unwrap();
            expire().await;
            let taken = store.claim("w", "you", None, LONG).await.unwrap();
            assert_eq!(taken, Claim::Granted { epoch: 2 }, "{name}");
            store.release("w", "you").await.unwrap();
            let late = |owner: &str, epoch| Commit {
                workflow_id: "w".into(),
                after_seq: 2,
                entries: vec![entry(2)],
                fence: Some(Fence {
                    owner: owner.into(),
                    epoch,
                }),
                ..Commit::default()
            };
            let refused = store.commit(late("me", 1)).await.unwrap_err();
            assert_eq!(refused, StoreError::Fenced("w".into()), "{name}");
            assert_eq!(store.entries("w", 0, false).await.unwrap().len(), 2);
            assert_eq!(store.workflow("w").await.unwrap().unwrap().last_seq, 2);
            // Released, the lease fences every writer out.
            let refused = store.commit(late("you", 2)).await.unwrap_err();
            assert_eq!(refused, StoreError::Fenced("w".into()), "{name}");
            let mine = store.claim("w", "me", None, LONG).await.unwrap();
            assert_eq!(mine, Claim::Granted { epoch: 3 }, "{name}");
            store.commit(late("me", 3)).await.unwrap();
            assert_eq!(store.workflow("w").await.unwrap().unwrap().last_seq, 3);
            let missing = Commit {
                workflow_id: "nobody".into(),
                ..late("me", 3)
            };
            let refused = store.commit(missing).await.unwrap_err();
            assert_eq!(refused, StoreError::NotFound("nobody".into()), "{name}");
        });
    }
}

#[test]
fn a_commit_of_step_rows_alone_moves_no_sequence_and_is_fenced() {
    for (name, store, _dir) in stores() {
        block_on(async {
            store.commit(created_held("w", "me", LONG)).await.unwrap();
            let rows = |owner: &str, epoch| Commit {
                workflow_id: "w".into(),
                after_seq: 2,
                steps: vec![StepRow {
                    step_id: "a".into(),
                    status: StepStatus::Running,
                    attempt: 1,
                    started_at: Some(at(1)),
                    ..StepRow::default()
                }],
                fence: Some(Fence {
                    owner: owner.into(),
                    epoch,
                }),
                ..Commit::default()
            };
            store.commit(rows("me", 1)).await.unwrap();
            let steps = store.steps("w").await.unwrap();
            assert_eq!(steps.len(), 1, "{name}");
            assert_eq!(steps[0].status, StepStatus::Running, "{name}");
            assert_eq!(store.workflow("w").await.unwrap().unwrap().last_seq, 2);
            assert_eq!(store.entries("w", 0, false).await.unwrap().len(), 2);
            let refused = store.commit(rows("you", 1)).await.unwrap_err();
            assert_eq!(refused, StoreError::Fenced("w".into()), "{name}");
        });
    }
}

#[test]
fn leases_ride_along_with_commits() {
    for (name, store, _dir) in stores() {
        block_on(async {
            store.commit(created_held("w", "me", LONG)).await.unwrap();
            let held = store.claim("w", "you", None, LONG).await.unwrap();
            assert!(
                matches!(held, Claim::Held { ref owner, .. } if owner == "me"),
                "{name}"
            );
            // Someone else's release is ignored; the owner's frees it.
            for owner in ["you", "me"] {
                let commit = Commit {
                    workflow_id: "w".into(),
                    after_seq: 2,
                    lease: Some(LeaseChange::Release {
                        owner: owner.into(),
                    }),
                    ..Commit::default()
                };
                store.commit(commit).await.unwrap();
            }
            let free = store.claim("w", "you", None, LONG).await.unwrap();
            assert_eq!(free, Claim::Granted { epoch: 2 }, "{name}");
        });
    }
}

/// A run's last commit, fenced, appends, ends the run and lets its lease
/// go, all at once: the fence is checked before the lease is let go.
#[test]
fn a_fenced_last_commit_lets_its_lease_go() {
    for (name, store, _dir) in stores() {
        block_on(async {
            store.commit(created_held("w", "me", LONG)).await.unwrap();
            let last = Commit {
                workflow_id: "w".into(),
                after_seq: 2,
                fence: Some(Fence {
                    owner: "me".into(),
                    epoch: 1,
                }),
                entries: vec![entry(2)],
                steps: vec![StepRow {
                    step_id: "s".into(),
                    status: StepStatus::Completed,
                    ..StepRow::default()
                }],
                update: Some(WorkflowUpdate {
                    status: WorkflowStatus::Completed,
                    output: Some("{\"ok\":true}".into()),
                    updated_at: at(3),
                    ..WorkflowUpdate::default()
                }),
                lease: Some(LeaseChange::Release { owner: "me".into() }),
                ..Commit::default()
            };
            store.commit(last).await.unwrap();
            let row = store.workflow("w").await.unwrap().unwrap();
            assert_eq!(row.status, WorkflowStatus::Completed, "{name}");
            assert_eq!(row.output.as_deref(), Some("{\"ok\":true}"), "{name}");
            let free = store.claim("w", "you", None, LONG).await.unwrap();
            assert_eq!(free, Claim::Granted { epoch: 2 }, "{name}");
        });
    }
}

/// Runs whose lease is free or lapsed are orphans, each agent's oldest
/// first and one agent at a time, so one agent's flood does not starve
/// another's; held, suspended and ended runs are not.
#[test]
fn orphans_are_listed_fairly_across_agents() {
    for (name, store, _dir) in stores() {
        block_on(async {
            let runs = [
                ("a1", "flood", 1, WorkflowStatus::Active),
                ("a2", "flood", 2, WorkflowStatus::Active),
                ("a3", "flood", 3, WorkflowStatus::Pending),
                ("b1", "calm", 4, WorkflowStatus::Active),
                ("held", "calm", 5, WorkflowStatus::Active),
                ("waiting", "calm", 6, WorkflowStatus::Suspended),
                ("done", "calm", 7, WorkflowStatus::Completed),
            ];
            for (id, agent, second, status) in runs {
                let mut commit = create(id);
                if let Some(new) = commit.create.as_mut() {
                    new.agent_id = Some(agent.into());
                    new.created_at = at(second);
                }
                if let Some(update) = commit.update.as_mut() {
                    update.status = status;
                }
                store.commit(commit).await.unwrap();
            }
            store.claim("held", "me", None, LONG).await.unwrap();
            store.claim("a2", "me", None, Duration::ZERO).await.unwrap();
            expire().await;
            let orphans = store.orphans(10).await.unwrap();
            assert_eq!(orphans, ["a1", "b1", "a2", "a3"], "{name}");
            assert_eq!(store.orphans(2).await.unwrap(), ["a1", "b1"], "{name}");
        });
    }
}

/// The backlog an autoscaler reads: runs no live lease holds, timers due,
/// and the live leases by owner.
#[test]
fn the_backlog_counts_work_nobody_holds() {
    for (name, store, _dir) in stores() {
        block_on(async {
            assert_eq!(store.backlog().await.unwrap(), Backlog::default(), "{name}");
            for id in ["held", "lapsed", "free"] {
                store.commit(create(id)).await.unwrap();
            }
            store.claim("held", "me", None, LONG).await.unwrap();
            store
                .claim("lapsed", "you", None, Duration::ZERO)
                .await
                .unwrap();
            let due = Commit {
                workflow_id: "held".into(),
                timers: vec![
                    TimerChange::Set(TimerRow {
                        timer_id: 1,
                        due_at: at(0),
                        purpose: "retry".into(),
                        step_id: None,
                    }),
                    TimerChange::Set(TimerRow {
                        timer_id: 2,
                        due_at: "2999-01-01T00:00:00.000Z".into(),
                        purpose: "retry".into(),
                        step_id: None,
                    }),
                ],
                ..Commit::default()
            };
            store.commit(due).await.unwrap();
            expire().await;
            let backlog = store.backlog().await.unwrap();
            assert_eq!(
                (backlog.runnable, backlog.timers_due, backlog.leases.clone()),
                (2, 1, vec![("me".to_owned(), 1)]),
                "{name}"
            );
            // The due timer has waited since 2026-01-01.
            assert!(backlog.oldest_seconds > 3600.0, "{name}: {backlog:?}");
        });
    }
}
