//! The [`EventStore`] contract, checked against both implementations.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use opcode_runtime::store::libsql::LibsqlStore;
use opcode_runtime::store::memory::MemoryStore;
use opcode_runtime::store::{
    Backlog, Claim, Commit, DecisionChange, DecisionRow, DecisionStatus, Durability, EntryKind,
    EventFilter, EventStore, Fence, LeaseChange, Listing, NewEntry, NewWorkflow, RunLog, Source,
    StepDetail, StepRow, StepStatus, StoreError, TemplateDraft, TemplateFilter, TimerChange,
    TimerRow, WorkflowFilter, WorkflowState, WorkflowStatus, WorkflowUpdate,
};

mod listings;
#[cfg(feature = "postgres")]
mod pg;
mod retention;

/// Every store, fresh: memory, libSQL, and PostgreSQL when a test cluster
/// is set; the temp dir lives as long as the libSQL one.
fn stores() -> Vec<(&'static str, Arc<dyn EventStore>, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().unwrap();
    let libsql = LibsqlStore::open(&dir.path().join("t.db"), Durability::Normal).unwrap();
    // Pushed to only with the `postgres` feature.
    #[cfg_attr(not(feature = "postgres"), allow(unused_mut))]
    let mut stores: Vec<(&'static str, Arc<dyn EventStore>, Option<tempfile::TempDir>)> = vec![
        ("memory", Arc::new(MemoryStore::new()), None),
        ("libsql", Arc::new(libsql), Some(dir)),
    ];
    #[cfg(feature = "postgres")]
    if let Some(url) = pg::fresh_database() {
        let store = block_on(opcode_runtime::store::postgres::PostgresStore::connect(
            &url,
        ));
        stores.push(("postgres", Arc::new(store.unwrap()), None));
    }
    stores
}

/// The creation of `id`, its lease taken by `owner` for `ttl`.
fn created_held(id: &str, owner: &str, ttl: Duration) -> Commit {
    Commit {
        lease: Some(LeaseChange::Take {
            owner: owner.into(),
            ttl,
        }),
        ..create(id)
    }
}

fn at(s: u32) -> String {
    format!("2026-01-01T00:00:{s:02}.000Z")
}

fn entry(n: u32) -> NewEntry {
    NewEntry {
        at: at(n),
        kind: if n.is_multiple_of(2) {
            EntryKind::Input
        } else {
            EntryKind::Record
        },
        event_type: "step_started",
        step_id: Some(format!("s{n}")),
        version: 1,
        payload: format!("{{\"n\":{n}}}"),
    }
}

fn create(id: &str) -> Commit {
    Commit {
        workflow_id: id.into(),
        create: Some(NewWorkflow {
            id: id.into(),
            name: "wf".into(),
            source: Source {
                hash: "h".into(),
                definition: "{}".into(),
                program: vec![1, 2, 3],
            },
            inputs: "{\"a\":1}".into(),
            created_at: at(0),
            ..NewWorkflow::default()
        }),
        entries: vec![entry(0), entry(1)],
        update: Some(WorkflowUpdate {
            status: WorkflowStatus::Active,
            started_at: Some(at(0)),
            updated_at: at(0),
            ..WorkflowUpdate::default()
        }),
        ..Commit::default()
    }
}

/// Runs `f` on the one runtime of this test binary (a PostgreSQL store's
/// connections live on the runtime that made them).
fn block_on<T>(f: impl Future<Output = T>) -> T {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap()
        })
        .block_on(f)
}

#[test]
fn appends_are_contiguous_and_compare_and_set() {
    for (name, store, _dir) in stores() {
        block_on(async {
            store.commit(create("w")).await.unwrap();
            let row = store.workflow("w").await.unwrap().unwrap();
            assert_eq!((row.status.as_str(), row.last_seq), ("active", 2), "{name}");
            let source = store.source(&row.source_hash).await.unwrap().unwrap();
            assert_eq!(source.program, vec![1, 2, 3], "{name}");
            // A writer that saw seq 2 appends 3 and 4.
            let next = Commit {
                workflow_id: "w".into(),
                after_seq: 2,
                entries: vec![entry(2), entry(3)],
                ..Commit::default()
            };
            store.commit(next.clone()).await.unwrap();
            // The same stale writer again: refused, nothing written.
            let err = store.commit(next).await.unwrap_err();
            assert_eq!(
                err,
                StoreError::Conflict {
                    id: "w".into(),
                    expected: 2,
                    actual: 4
                },
                "{name}"
            );
            let all = store.entries("w", 0, false).await.unwrap();
            let seqs: Vec<u64> = all.iter().map(|e| e.seq).collect();
            assert_eq!(seqs, [1, 2, 3, 4], "{name}");
            assert_eq!(all[3].payload, "{\"n\":3}", "{name}");
            let inputs = store.entries("w", 0, true).await.unwrap();
            assert!(inputs.iter().all(|e| e.kind == EntryKind::Input), "{name}");
            assert_eq!(inputs.len(), 2, "{name}");
            assert_eq!(
                store.entries("w", 3, false).await.unwrap().len(),
                1,
                "{name}"
            );
            assert_eq!(
                store.commit(create("w")).await.unwrap_err(),
                StoreError::Exists("w".into()),
                "{name}"
            );
        });
    }
}

#[test]
fn the_sequence_is_checked_against_the_log_with_or_without_a_state_change() {
    for (name, store, _dir) in stores() {
        block_on(async {
            store.commit(create("w")).await.unwrap();
            let append = |after_seq, n, status: Option<WorkflowStatus>| Commit {
                workflow_id: "w".into(),
                after_seq,
                entries: vec![entry(n)],
                update: status.map(|status| WorkflowUpdate {
                    status,
                    updated_at: at(n),
                    ..WorkflowUpdate::default()
                }),
                ..Commit::default()
            };
            // Appends that change no state move the run's last sequence too.
            store.commit(append(2, 2, None)).await.unwrap();
            store.commit(append(3, 3, None)).await.unwrap();
            let listed = store.workflows(WorkflowFilter::default()).await.unwrap();
            assert_eq!(listed[0].last_seq, 4, "{name}");
            let row = store.workflow("w").await.unwrap().unwrap();
            assert_eq!(row.last_seq, 4, "{name}");
            // Behind or ahead of the log, with a state change or without.
            for (after_seq, status) in [
                (2, Some(WorkflowStatus::Suspended)),
                (2, None),
                (7, Some(WorkflowStatus::Suspended)),
                (7, None),
            ] {
                let refused = store.commit(append(after_seq, 4, status)).await;
                let expected = StoreError::Conflict {
                    id: "w".into(),
                    expected: after_seq,
                    actual: 4,
                };
                assert_eq!(refused, Err(expected), "{name}: {after_seq} {status:?}");
            }
            store
                .commit(append(4, 4, Some(WorkflowStatus::Suspended)))
                .await
                .unwrap();
            let row = store.workflow("w").await.unwrap().unwrap();
            let state = (row.status, row.last_seq);
            assert_eq!(state, (WorkflowStatus::Suspended, 5), "{name}");
            let entries = store.entries("w", 0, false).await.unwrap();
            assert_eq!(entries.len(), 5, "{name}");
        });
    }
}

#[test]
fn a_failed_commit_in_a_batch_leaves_the_others_intact() {
    for (name, store, _dir) in stores() {
        block_on(async {
            store.commit(create("a")).await.unwrap();
            store.commit(create("b")).await.unwrap();
            let good = Commit {
                workflow_id: "a".into(),
                after_seq: 2,
                entries: vec![entry(2)],
                ..Commit::default()
            };
            let stale = Commit {
                workflow_id: "b".into(),
                after_seq: 0,
                entries: vec![entry(2)],
                steps: vec![StepRow {
                    step_id: "x".into(),
                    status: StepStatus::Running,
                    ..StepRow::default()
                }],
                ..Commit::default()
            };
            // Sent together, so the libSQL store writes them in one transaction.
            let (a, b) = tokio::join!(store.commit(good), store.commit(stale));
            assert!(a.is_ok(), "{name}");
            assert!(matches!(b, Err(StoreError::Conflict { .. })), "{name}");
            assert_eq!(
                store.workflow("a").await.unwrap().unwrap().last_seq,
                3,
                "{name}"
            );
            assert_eq!(
                store.workflow("b").await.unwrap().unwrap().last_seq,
                2,
                "{name}"
            );
            assert!(store.steps("b").await.unwrap().is_empty(), "{name}");
        });
    }
}

/// Many commits at once, refusals of every kind among them: each gets its
/// own answer (a store that writes them as one group must not let one
/// refusal take the others down, nor one's answer reach another).
#[test]
fn commits_sent_together_each_get_their_own_answer() {
    for (name, store, _dir) in stores() {
        block_on(async {
            // All landing: a group written whole.
            let created =
                futures::future::join_all((0..40).map(|i| store.commit(create(&format!("w{i}")))));
            assert!(created.await.iter().all(Result::is_ok), "{name}");
            let advance = |i: u32, after_seq: u64| Commit {
                workflow_id: format!("w{i}"),
                after_seq,
                entries: vec![entry(2)],
                ..Commit::default()
            };
            let mut commits = Vec::new();
            let mut expected = Vec::new();
            for i in 0..40 {
                let (commit, answer) = match i % 10 {
                    3 => (advance(i, 0), "conflict"),
                    5 => (create(&format!("w{i}")), "exists"),
                    7 => (advance(i + 1000, 2), "not_found"),
                    9 => (
                        Commit {
                            after_seq: 7,
                            ..create(&format!("n{i}"))
                        },
                        "bad_create",
                    ),
                    _ => (advance(i, 2), "ok"),
                };
                commits.push(commit);
                expected.push(answer);
            }
            commits.push(Commit {
                fence: Some(Fence {
                    owner: "someone else".into(),
                    epoch: 1,
                }),
                ..advance(0, 2)
            });
            expected.push("fenced");
            // A second commit of one run, after the first: both land.
            commits.push(advance(1, 3));
            expected.push("ok");
            let answers = futures::future::join_all(commits.into_iter().map(|c| store.commit(c)));
            for (i, (answer, want)) in answers.await.into_iter().zip(expected).enumerate() {
                let got = match answer {
                    Ok(()) => "ok",
                    Err(StoreError::Conflict {
                        expected: 0,
                        actual: 2,
                        ..
                    }) => "conflict",
                    Err(StoreError::Conflict {
                        expected: 7,
                        actual: 0,
                        ..
                    }) => "bad_create",
                    Err(StoreError::Exists(_)) => "exists",
                    Err(StoreError::NotFound(_)) => "not_found",
                    Err(StoreError::Fenced(_)) => "fenced",
                    Err(e) => panic!("{name}: commit {i}: {e}"),
                };
                assert_eq!(got, want, "{name}: commit {i}");
            }
            for i in 0..40 {
                let row = store.workflow(&format!("w{i}")).await.unwrap().unwrap();
                let want = match i {
                    1 => 4,
                    _ if matches!(i % 10, 3 | 5 | 7 | 9) => 2,
                    _ => 3,
                };
                assert_eq!(row.last_seq, want, "{name}: w{i}");
            }
        });
    }
}

#[test]
fn step_rows_keep_their_first_start_and_get_a_duration() {
    for (name, store, _dir) in stores() {
        block_on(async {
            store.commit(create("w")).await.unwrap();
            let step = |status: &str, started: Option<u32>, ended: Option<u32>, attempt| StepRow {
                step_id: "fetch".into(),
                status: StepStatus::parse(status).unwrap(),
                attempt,
                output: ended.map(|_| "{\"ok\":true}".into()),
                started_at: started.map(at),
                completed_at: ended.map(at),
                ..StepRow::default()
            };
            for row in [
                step("running", Some(1), None, 1),
                step("retrying", None, None, 1),
                step("running", Some(3), None, 2),
                step("completed", None, Some(4), 2),
            ] {
                let commit = Commit {
                    workflow_id: "w".into(),
                    after_seq: 2,
                    steps: vec![row],
                    ..Commit::default()
                };
                store.commit(commit).await.unwrap();
            }
            let rows = store.steps("w").await.unwrap();
            assert_eq!(rows.len(), 1, "{name}");
            let row = &rows[0];
            assert_eq!(row.status.as_str(), "completed", "{name}");
            assert_eq!(row.attempt, 2, "{name}");
            assert_eq!(row.started_at.as_deref(), Some(at(1).as_str()), "{name}");
            assert_eq!(row.duration_ms, Some(3_000), "{name}");
        });
    }
}

#[test]
fn timers_decisions_and_inbox() {
    for (name, store, _dir) in stores() {
        block_on(async {
            store.commit(create("w")).await.unwrap();
            store.commit(create("v")).await.unwrap();
            let timer = |id, s| {
                TimerChange::Set(TimerRow {
                    timer_id: id,
                    due_at: at(s),
                    purpose: "decision_timeout".into(),
                    step_id: Some("review".into()),
                })
            };
            let decision = DecisionRow {
                id: "review[0]".into(),
                step_id: "review".into(),
                prompt: "ok?".into(),
                options: "[]".into(),
                context: "{}".into(),
                created_at: at(1),
                ..DecisionRow::default()
            };
            let commit = Commit {
                workflow_id: "w".into(),
                after_seq: 2,
                timers: vec![timer(1, 30), timer(2, 20)],
                decisions: vec![DecisionChange::Ask(Box::new(decision))],
                ..Commit::default()
            };
            store.commit(commit).await.unwrap();
            let commit = Commit {
                workflow_id: "v".into(),
                after_seq: 2,
                timers: vec![timer(1, 10)],
                ..Commit::default()
            };
            store.commit(commit).await.unwrap();
            assert_eq!(
                store.next_timers(10).await.unwrap(),
                [("v".into(), at(10)), ("w".into(), at(20))],
                "{name}"
            );
            let pending = store
                .decisions(Some("w"), Some(DecisionStatus::Pending))
                .await
                .unwrap();
            assert_eq!(pending.len(), 1, "{name}");
            assert_eq!(pending[0].workflow_id, "w", "{name}");
            let settle = |status| DecisionChange::Settle {
                id: "review[0]".into(),
                status,
                resolution: Some("{\"choice\":\"yes\"}".into()),
                resolved_by: Some("me".into()),
                at: at(5),
            };
            let id = store
                .send("w", "{\"type\":\"resume\"}".into(), at(6))
                .await
                .unwrap();
            assert_eq!(store.inbox(None).await.unwrap().len(), 1, "{name}");
            let commit = Commit {
                workflow_id: "w".into(),
                after_seq: 2,
                timers: vec![TimerChange::Clear(2), TimerChange::Clear(1)],
                // The first settlement wins; the second finds nothing pending.
                decisions: vec![
                    settle(DecisionStatus::Resolved),
                    settle(DecisionStatus::Cancelled),
                ],
                inbox_taken: vec![id],
                ..Commit::default()
            };
            store.commit(commit).await.unwrap();
            assert_eq!(store.next_timers(10).await.unwrap().len(), 1, "{name}");
            let all = store.decisions(None, None).await.unwrap();
            assert_eq!(all[0].status.as_str(), "resolved", "{name}");
            assert_eq!(all[0].resolved_by.as_deref(), Some("me"), "{name}");
            assert!(
                store
                    .decisions(None, Some(DecisionStatus::Pending))
                    .await
                    .unwrap()
                    .is_empty()
            );
            assert!(store.inbox(Some("w")).await.unwrap().is_empty(), "{name}");
        });
    }
}

const LONG: Duration = Duration::from_mins(1);

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
fn a_large_commit_keeps_its_entries_and_steps_in_order() {
    for (name, store, _dir) in stores() {
        block_on(async {
            store.commit(create("w")).await.unwrap();
            let commit = Commit {
                workflow_id: "w".into(),
                after_seq: 2,
                entries: (2..75).map(entry).collect(),
                steps: (0..40)
                    .map(|n| StepRow {
                        step_id: format!("s{n:02}"),
                        status: StepStatus::Running,
                        attempt: 1,
                        started_at: Some(at(n)),
                        ..StepRow::default()
                    })
                    .collect(),
                ..Commit::default()
            };
            store.commit(commit).await.unwrap();
            let seqs: Vec<u64> = store
                .entries("w", 0, false)
                .await
                .unwrap()
                .iter()
                .map(|e| e.seq)
                .collect();
            assert_eq!(seqs, (1..=75).collect::<Vec<u64>>(), "{name}");
            let steps = store.steps("w").await.unwrap();
            assert_eq!(steps.len(), 40, "{name}");
            assert_eq!(steps[39].step_id, "s39", "{name}");
            assert_eq!(store.workflow("w").await.unwrap().unwrap().last_seq, 75);
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

#[test]
fn workflows_are_listed_newest_first_by_status() {
    for (name, store, _dir) in stores() {
        block_on(async {
            for (i, id) in ["a", "b", "c"].into_iter().enumerate() {
                let mut c = create(id);
                if let Some(w) = c.create.as_mut() {
                    w.created_at = at(i as u32);
                }
                if id == "b"
                    && let Some(u) = c.update.as_mut()
                {
                    u.status = WorkflowStatus::Completed;
                }
                store.commit(c).await.unwrap();
            }
            let all = store.workflows(WorkflowFilter::default()).await.unwrap();
            let ids: Vec<&str> = all.iter().map(|w| w.id.as_str()).collect();
            assert_eq!(ids, ["c", "b", "a"], "{name}");
            let active = store
                .workflows(WorkflowFilter {
                    statuses: vec![WorkflowStatus::Active],
                    limit: Some(1),
                    ..WorkflowFilter::default()
                })
                .await
                .unwrap();
            assert_eq!(active.len(), 1, "{name}");
            assert_eq!(active[0].id, "c", "{name}");
            let active = WorkflowFilter {
                statuses: vec![WorkflowStatus::Active],
                limit: Some(1),
                offset: 1,
                ..WorkflowFilter::default()
            };
            let total = store.count(Listing::Workflows(active)).await.unwrap();
            assert_eq!(total, 2, "{name}: the page is ignored");
            let found = |filter: WorkflowFilter| {
                let store = &store;
                async move {
                    let rows = store.workflows(filter).await.unwrap();
                    rows.into_iter().map(|w| w.id).collect::<Vec<_>>()
                }
            };
            let window = WorkflowFilter {
                since: Some(at(1)),
                until: Some(at(2)),
                ..WorkflowFilter::default()
            };
            assert_eq!(
                found(window).await,
                ["b"],
                "{name}: since is in, until is out"
            );
            let by_id = WorkflowFilter {
                id_contains: Some("c".into()),
                ..WorkflowFilter::default()
            };
            assert_eq!(found(by_id).await, ["c"], "{name}");
            let literal = WorkflowFilter {
                id_contains: Some("%".into()),
                ..WorkflowFilter::default()
            };
            assert!(
                found(literal).await.is_empty(),
                "{name}: the text is literal"
            );
            assert!(store.workflow("nope").await.unwrap().is_none(), "{name}");
        });
    }
}

#[test]
fn a_database_from_a_newer_build_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    drop(LibsqlStore::open(&path, Durability::Full).unwrap());
    block_on(async {
        let db = libsql::Builder::new_local(&path).build().await.unwrap();
        let conn = db.connect().unwrap();
        conn.execute(
            "INSERT INTO schema_version (version, name, applied_at) VALUES (99, 'future', 'x')",
            (),
        )
        .await
        .unwrap();
    });
    let err = LibsqlStore::open(&path, Durability::Normal).unwrap_err();
    assert_eq!(
        err,
        StoreError::Schema {
            found: 99,
            known: opcode_runtime::store::SCHEMA_VERSION
        }
    );
}

#[test]
fn a_reopened_database_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    {
        let store = LibsqlStore::open(&path, Durability::Normal).unwrap();
        block_on(store.commit(create("w"))).unwrap();
    }
    let store = LibsqlStore::open(&path, Durability::Normal).unwrap();
    let row = block_on(store.workflow("w")).unwrap().unwrap();
    assert_eq!(row.last_seq, 2);
    assert_eq!(block_on(store.entries("w", 0, false)).unwrap().len(), 2);
}

#[test]
fn templates_get_numeric_versions_per_name() {
    for (name, store, _dir) in stores() {
        block_on(async {
            let draft = |n: &str| TemplateDraft {
                name: n.into(),
                definition: "{}".into(),
                triggers: "{}".into(),
                agent_id: Some("bot".into()),
                at: at(0),
                ..TemplateDraft::default()
            };
            for _ in 0..10 {
                store.define_template(draft("hello")).await.unwrap();
            }
            let other = store.define_template(draft("alpha")).await.unwrap();
            assert_eq!(other.version, 1, "{name}");
            let latest = store.template("hello", None).await.unwrap().unwrap();
            assert_eq!(latest.version, 10, "{name}: 10 sorts after 9");
            let second = store.template("hello", Some(2)).await.unwrap().unwrap();
            assert_eq!(second.version, 2, "{name}");
            assert!(store.template("nope", None).await.unwrap().is_none());
            let page = store
                .templates(TemplateFilter {
                    name: Some("hello".into()),
                    limit: Some(3),
                    offset: 1,
                    ..TemplateFilter::default()
                })
                .await
                .unwrap();
            let versions: Vec<i64> = page.iter().map(|t| t.version).collect();
            assert_eq!(versions, [9, 8, 7], "{name}");
            let counted = |filter| store.count(Listing::Templates(filter));
            let hello = TemplateFilter {
                name: Some("hello".into()),
                limit: Some(3),
                ..TemplateFilter::default()
            };
            assert_eq!(counted(hello).await.unwrap(), 10, "{name}");
            let latest = TemplateFilter {
                latest_only: true,
                ..TemplateFilter::default()
            };
            assert_eq!(counted(latest).await.unwrap(), 2, "{name}");
            let latest = store
                .templates(TemplateFilter {
                    latest_only: true,
                    ..TemplateFilter::default()
                })
                .await
                .unwrap();
            let names: Vec<(&str, i64)> = latest
                .iter()
                .map(|t| (t.name.as_str(), t.version))
                .collect();
            assert_eq!(names, [("alpha", 1), ("hello", 10)], "{name}");
        });
    }
}

#[test]
fn entries_are_found_across_workflows() {
    for (name, store, _dir) in stores() {
        block_on(async {
            store.commit(create("a")).await.unwrap();
            store.commit(create("b")).await.unwrap();
            let found = store
                .find_entries(EventFilter {
                    workflow_id: Some("b".into()),
                    ..EventFilter::default()
                })
                .await
                .unwrap();
            let seqs: Vec<u64> = found.iter().map(|f| f.entry.seq).collect();
            assert_eq!(seqs, [1, 2], "{name}");
            let by_step = store
                .find_entries(EventFilter {
                    step_id: Some("s1".into()),
                    limit: Some(10),
                    ..EventFilter::default()
                })
                .await
                .unwrap();
            assert_eq!(by_step.len(), 2, "{name}");
            assert!(
                by_step
                    .iter()
                    .all(|f| f.entry.step_id.as_deref() == Some("s1"))
            );
            let skipped = store
                .find_entries(EventFilter {
                    offset: 3,
                    ..EventFilter::default()
                })
                .await
                .unwrap();
            assert_eq!(skipped.len(), 1, "{name}");
            let s1 = EventFilter {
                step_id: Some("s1".into()),
                limit: Some(1),
                ..EventFilter::default()
            };
            let total = store.count(Listing::Entries(s1)).await.unwrap();
            assert_eq!(total, 2, "{name}");
        });
    }
}

#[test]
fn a_commit_can_read_back_the_state_it_left() {
    for (name, store, _dir) in stores() {
        block_on(async {
            let mut first = create("w");
            first.steps = vec![StepRow {
                step_id: "s".into(),
                status: StepStatus::Completed,
                attempt: 1,
                output: Some("7".into()),
                started_at: Some(at(0)),
                completed_at: Some(at(2)),
                ..StepRow::default()
            }];
            let state = store
                .commit_and_state(first, StepDetail::Whole)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(state, store.state("w").await.unwrap().unwrap(), "{name}");
            assert_eq!(state.workflow.last_seq, 2, "{name}");
            assert_eq!(state.steps[0].duration_ms, Some(2000), "{name}");
            // Statuses only: the same workflow row, the same names and
            // statuses (a store may read the rest too).
            let mut next = Commit {
                workflow_id: "w".into(),
                after_seq: 2,
                entries: vec![entry(3)],
                ..Commit::default()
            };
            next.steps = vec![StepRow {
                step_id: "t".into(),
                status: StepStatus::Running,
                attempt: 1,
                started_at: Some(at(3)),
                ..StepRow::default()
            }];
            let brief = store
                .commit_and_state(next, StepDetail::StatusOnly)
                .await
                .unwrap()
                .unwrap();
            let whole = store.state("w").await.unwrap().unwrap();
            let names = |s: &WorkflowState| -> Vec<(String, StepStatus)> {
                s.steps
                    .iter()
                    .map(|r| (r.step_id.clone(), r.status))
                    .collect()
            };
            assert_eq!(names(&brief), names(&whole), "{name}");
            assert_eq!(brief.workflow, whole.workflow, "{name}");
            // A refused commit reads nothing back.
            let behind = Commit {
                workflow_id: "w".into(),
                entries: vec![entry(5)],
                ..Commit::default()
            };
            let refused = store
                .commit_and_state(behind, StepDetail::Whole)
                .await
                .unwrap_err();
            assert!(matches!(refused, StoreError::Conflict { .. }), "{name}");
        });
    }
}

#[test]
fn creating_a_run_notes_its_agent_as_seen() {
    for (name, store, _dir) in stores() {
        block_on(async {
            let mut first = create("w");
            if let Some(new) = first.create.as_mut() {
                new.agent_id = Some("bot-1".into());
                new.created_at = at(7);
            }
            store.commit(first).await.unwrap();
            let agents = store.agents().await.unwrap();
            let seen: Vec<(&str, &str)> = agents
                .iter()
                .map(|a| (a.id.as_str(), a.last_seen_at.as_str()))
                .collect();
            assert_eq!(seen, [("bot-1", at(7).as_str())], "{name}");
        });
    }
}

#[test]
fn a_run_of_what_was_the_latest_template_is_refused_once_outdated() {
    for (name, store, _dir) in stores() {
        block_on(async {
            let draft = TemplateDraft {
                name: "t".into(),
                definition: "{}".into(),
                triggers: "{}".into(),
                at: at(0),
                ..TemplateDraft::default()
            };
            store.define_template(draft.clone()).await.unwrap();
            store.define_template(draft).await.unwrap();
            let of_version = |id: &str, version: i64| {
                let mut commit = create(id);
                if let Some(new) = commit.create.as_mut() {
                    new.template_name = Some("t".into());
                    new.template_version = Some(version);
                    new.template_latest = true;
                }
                commit
            };
            let refused = store.commit(of_version("old", 1)).await.unwrap_err();
            assert_eq!(refused, StoreError::Outdated("t".into()), "{name}");
            assert!(store.workflow("old").await.unwrap().is_none(), "{name}");
            store.commit(of_version("new", 2)).await.unwrap();
            // An explicit version is not checked.
            let mut pinned = of_version("pinned", 1);
            if let Some(new) = pinned.create.as_mut() {
                new.template_latest = false;
            }
            store.commit(pinned).await.unwrap();
        });
    }
}

/// The WAL's checkpoint sequence number (its header's bytes 12..16), which
/// goes up each time the WAL starts over from its beginning.
fn wal_restarts(db: &std::path::Path) -> u32 {
    use std::io::Read;
    let mut header = [0u8; 16];
    std::fs::File::open(db.with_extension("db-wal"))
        .and_then(|mut wal| wal.read_exact(&mut header))
        .unwrap();
    u32::from_be_bytes(header[12..16].try_into().unwrap())
}

#[test]
fn a_steady_writer_does_not_grow_the_wal_without_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let store = LibsqlStore::open(&path, Durability::Normal).unwrap();
    block_on(async {
        store.commit(create("first")).await.unwrap();
        let before = wal_restarts(&path);
        // Commits back to back, a few pages each, so the checkpointer never
        // finds the writer idle: only a restart lets the WAL start over.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut n = 0;
        while wal_restarts(&path) == before {
            assert!(
                std::time::Instant::now() < deadline,
                "the WAL never started over in {n} commits"
            );
            let mut commit = create(&format!("w{n}"));
            for entry in &mut commit.entries {
                entry.payload = format!("{{\"pad\":\"{}\"}}", "x".repeat(3000));
            }
            store.commit(commit).await.unwrap();
            n += 1;
        }
    });
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

/// Daemons starting at once on a new database migrate it once.
#[cfg(feature = "postgres")]
#[test]
fn daemons_starting_at_once_migrate_once() {
    use opcode_runtime::store::postgres::PostgresStore;
    let Some(url) = pg::fresh_database() else {
        return;
    };
    let stores = block_on(async {
        let opening = (0..4).map(|_| PostgresStore::connect(&url));
        futures::future::join_all(opening).await
    });
    for store in &stores {
        assert!(store.is_ok(), "{store:?}");
    }
    let versions = std::process::Command::new("psql")
        .args([
            url.as_str(),
            "-Atc",
            "SELECT count(*), max(version) FROM schema_version",
        ])
        .output()
        .unwrap();
    let versions = String::from_utf8_lossy(&versions.stdout);
    let latest = opcode_runtime::store::postgres::SCHEMA_VERSION;
    assert_eq!(versions.trim(), format!("{latest}|{latest}"));
}

/// `sslmode` is honoured: `require` against a server without TLS is
/// refused with the reason; `disable` connects without trying.
#[cfg(feature = "postgres")]
#[test]
fn sslmode_is_honoured() {
    use opcode_runtime::store::postgres::PostgresStore;
    let Some(url) = pg::fresh_database() else {
        return;
    };
    let required = block_on(PostgresStore::connect(&format!("{url}?sslmode=require")));
    let refused = required.expect_err("the test cluster serves no TLS");
    assert!(refused.to_string().contains("TLS"), "{refused}");
    let plain = block_on(PostgresStore::connect(&format!("{url}?sslmode=disable")));
    assert!(plain.is_ok(), "{plain:?}");
    let nonsense = block_on(PostgresStore::connect(&format!("{url}?sslmode=sometimes")));
    let refused = nonsense.expect_err("not an sslmode");
    assert!(
        refused.to_string().contains("URL is not valid"),
        "{refused}"
    );
}

/// A large value written as an action's result, a step's output and the
/// run's output reads back whole everywhere; a store with a file keeps it
/// once (spec/events.md, "Large values").
#[test]
fn a_large_value_reads_back_whole_and_is_kept_once() {
    let big = "x".repeat(3 << 20);
    let output = serde_json::json!({"content": big, "path": "/a"}).to_string();
    let run_output = format!("{{\"r\":{output}}}");
    for (name, store, dir) in stores() {
        let mut commit = create("w");
        commit.entries.push(NewEntry {
            payload: output.clone(),
            ..entry(2)
        });
        commit.steps.push(StepRow {
            step_id: "r".into(),
            status: StepStatus::Completed,
            output: Some(output.clone()),
            ..StepRow::default()
        });
        if let Some(update) = &mut commit.update {
            update.output = Some(run_output.clone());
        }
        block_on(store.commit(commit)).unwrap();
        let entries = block_on(store.entries("w", 0, false)).unwrap();
        assert_eq!(entries[2].payload, output, "{name}");
        let steps = block_on(store.steps("w")).unwrap();
        assert_eq!(steps[0].output.as_deref(), Some(output.as_str()), "{name}");
        let row = block_on(store.workflow("w")).unwrap().unwrap();
        assert_eq!(row.output.as_deref(), Some(run_output.as_str()), "{name}");
        let listed = block_on(store.workflows(WorkflowFilter::default())).unwrap();
        assert_eq!(
            listed[0].output.as_deref(),
            Some(run_output.as_str()),
            "{name}"
        );
        if let Some(dir) = dir {
            drop(store);
            let size: u64 = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|f| f.unwrap().metadata().unwrap().len())
                .sum();
            // Database and WAL together: at most 1.2 times the value, not three.
            assert!(
                size * 5 < big.len() as u64 * 6,
                "{name}: {size} bytes for {}",
                big.len()
            );
        }
    }
}

#[test]
fn a_store_says_its_schema_journal_and_clock() {
    for (name, store, _dir) in stores() {
        let empty = block_on(store.health()).unwrap();
        assert_eq!(empty.newest_run_at, None, "{name}");
        block_on(store.commit(create("w"))).unwrap();
        let health = block_on(store.health()).unwrap();
        assert_eq!(
            health.newest_run_at.as_deref(),
            Some(at(0).as_str()),
            "{name}"
        );
        assert!(health.clock.as_str() > "2026", "{name}: {}", health.clock);
        match name {
            "libsql" => {
                assert_eq!(health.schema_version, opcode_runtime::store::SCHEMA_VERSION);
                assert_eq!(health.journal_mode.as_deref(), Some("wal"));
                assert_eq!(health.synchronous.as_deref(), Some("normal"));
            }
            #[cfg(feature = "postgres")]
            "postgres" => assert_eq!(
                health.schema_version,
                opcode_runtime::store::postgres::SCHEMA_VERSION
            ),
            _ => assert_eq!(health.journal_mode, None),
        }
    }
}

/// Another process hears every commit, each once, its owner and status
/// with it: a group of commits announces each of them.
#[cfg(feature = "postgres")]
#[test]
fn every_commit_is_announced_to_the_other_stores() {
    use opcode_runtime::store::postgres::PostgresStore;
    use opcode_runtime::store::{Notice, RunLog as _};
    let Some(url) = pg::fresh_database() else {
        return;
    };
    block_on(async {
        let writer = PostgresStore::connect(&url).await.unwrap();
        let listener = PostgresStore::connect(&url).await.unwrap();
        let mut heard = listener.notices().unwrap();
        let held = (0..20).map(|i| created_held(&format!("w{i}"), "me", Duration::from_mins(1)));
        let answers = futures::future::join_all(held.map(|c| writer.commit(c))).await;
        assert!(answers.iter().all(Result::is_ok), "{answers:?}");
        let mut ids = std::collections::BTreeSet::new();
        while ids.len() < 20 {
            let notice = tokio::time::timeout(Duration::from_secs(10), heard.recv())
                .await
                .expect("every commit is heard")
                .unwrap();
            let Notice::Committed {
                workflow_id,
                owner,
                status,
            } = notice
            else {
                continue;
            };
            assert_eq!(owner.as_deref(), Some("me"));
            assert_eq!(status, Some(WorkflowStatus::Active));
            assert!(ids.insert(workflow_id.clone()), "{workflow_id} heard twice");
        }
    });
}
