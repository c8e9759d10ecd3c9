//! The [`EventStore`] contract, checked against both implementations.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use opcode_runtime::store::libsql::LibsqlStore;
use opcode_runtime::store::memory::MemoryStore;
use opcode_runtime::store::{
    Commit, Durability, EntryKind, EventFilter, EventStore, LeaseChange, Listing, NewEntry,
    NewWorkflow, RunLog, Source, StepDetail, StepRow, StepStatus, StoreError, TemplateDraft,
    TemplateFilter, WorkflowFilter, WorkflowState, WorkflowStatus, WorkflowUpdate,
};

mod delegated;
mod folded;
mod groups;
mod leases;
mod listings;
#[cfg(feature = "postgres")]
mod pg;
mod registry;
mod retention;
mod slots;
mod waits;

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

const LONG: Duration = Duration::from_mins(1);

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
fn an_agent_seen_again_moves_forward_only_and_to_within_a_second() {
    let time = |t: &str| format!("2026-01-01T00:00:{t}Z");
    for (name, store, _dir) in stores() {
        block_on(async {
            let seen = || async {
                let agents = store.agents().await.unwrap();
                assert_eq!(agents.len(), 1, "{name}");
                agents[0].last_seen_at.clone()
            };
            store.touch_agent("bot", &time("07.000")).await.unwrap();
            assert_eq!(seen().await, time("07.000"), "{name}");
            let mut run = create("w");
            if let Some(new) = run.create.as_mut() {
                new.agent_id = Some("bot".into());
                new.created_at = time("07.500");
            }
            store.commit(run).await.unwrap();
            let within = seen().await;
            assert!(
                [time("07.000"), time("07.500")].contains(&within),
                "{name}: {within}"
            );
            store.touch_agent("bot", &time("09.000")).await.unwrap();
            assert_eq!(seen().await, time("09.000"), "{name}");
            store.touch_agent("bot", &time("03.000")).await.unwrap();
            assert_eq!(seen().await, time("09.000"), "{name}: never back");
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
