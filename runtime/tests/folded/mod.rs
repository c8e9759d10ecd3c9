//! A commit's entries kept in one row (decision 0050), on every backend:
//! they read back as the entries they were, from any point of the log, and
//! queries across runs find each of them; a log written one row an entry
//! by an earlier build reads on with them.

use opcode_runtime::store::{
    Catalog as _, Commit, Durability, EntryKind, EventFilter, Listing, NewEntry, RunLog as _,
};

use super::{at, block_on, create, stores};

/// Entries whose payloads, steps and times would break a careless fold.
fn awkward(n: u32) -> NewEntry {
    NewEntry {
        at: at(n / 3),
        kind: if n.is_multiple_of(4) {
            EntryKind::Input
        } else {
            EntryKind::Record
        },
        event_type: if n.is_multiple_of(4) {
            "action_completed"
        } else {
            "step_completed"
        },
        step_id: (!n.is_multiple_of(5)).then(|| format!("loop[{n}]/\"q\"\\")),
        version: 1,
        // Some hold NUL, which PostgreSQL's JSON functions refuse.
        payload: if n % 7 == 3 {
            format!(r#"{{"n":{n},"text":"é \u0000 \" ]}}","list":[1.5e3,null]}}"#)
        } else {
            format!(r#"{{"n":{n},"text":"é \" ]}}","list":[1.5e3,null]}}"#)
        },
    }
}

#[test]
fn a_commits_entries_read_back_whole_from_any_point() {
    for (name, store, _dir) in stores() {
        block_on(async {
            store.commit(create("w")).await.unwrap();
            let entries: Vec<NewEntry> = (0..150).map(awkward).collect();
            let commit = Commit {
                workflow_id: "w".into(),
                after_seq: 2,
                entries: entries.clone(),
                ..Commit::default()
            };
            store.commit(commit).await.unwrap();
            let stored: Vec<_> = entries
                .iter()
                .enumerate()
                .map(|(i, e)| e.stored(3 + i as u64))
                .collect();
            let all = store.entries("w", 2, false).await.unwrap();
            assert_eq!(all, stored, "{name}");
            for after in [3, 66, 67, 100, 151, 152] {
                let from = store.entries("w", after, false).await.unwrap();
                assert_eq!(from, stored[(after - 2) as usize..], "{name} after {after}");
            }
            let inputs = store.entries("w", 40, true).await.unwrap();
            let expected: Vec<_> = stored
                .iter()
                .filter(|e| e.seq > 40 && e.kind == EntryKind::Input)
                .cloned()
                .collect();
            assert_eq!(inputs, expected, "{name}");
            // A query across runs finds each entry, with its own sequence.
            let step = "loop[77]/\"q\"\\";
            let found = store
                .find_entries(EventFilter {
                    step_id: Some(step.into()),
                    ..EventFilter::default()
                })
                .await
                .unwrap();
            assert_eq!(found.len(), 1, "{name}");
            assert_eq!(found[0].entry.seq, 80, "{name}");
            let payload: serde_json::Value = serde_json::from_str(&found[0].entry.payload).unwrap();
            assert_eq!(payload["text"], "é \" ]}", "{name}");
            let nul = store
                .find_entries(EventFilter {
                    step_id: Some("loop[73]/\"q\"\\".into()),
                    ..EventFilter::default()
                })
                .await
                .unwrap();
            let payload: serde_json::Value = serde_json::from_str(&nul[0].entry.payload).unwrap();
            assert_eq!(payload["text"], "é \u{0} \" ]}", "{name}");
            let completed = EventFilter {
                workflow_id: Some("w".into()),
                event_type: Some("action_completed".into()),
                ..EventFilter::default()
            };
            let total = store
                .count(Listing::Entries(completed.clone()))
                .await
                .unwrap();
            assert_eq!(total, 38, "{name}");
            let page = store
                .find_entries(EventFilter {
                    limit: Some(5),
                    offset: 10,
                    ..completed
                })
                .await
                .unwrap();
            let seqs: Vec<u64> = page.iter().map(|f| f.entry.seq).collect();
            assert_eq!(seqs, [43, 47, 51, 55, 59], "{name}");
            // A page of the newest entries of every run reads only the
            // newest rows, and gives what the whole list gives.
            store.commit(create("v")).await.unwrap();
            let everything = store.find_entries(EventFilter::default()).await.unwrap();
            for (offset, limit) in [(0, 1), (2, 5), (40, 30), (150, 20)] {
                let page = store
                    .find_entries(EventFilter {
                        limit: Some(limit),
                        offset,
                        ..EventFilter::default()
                    })
                    .await
                    .unwrap();
                let end = (offset + limit).min(everything.len() as u32) as usize;
                assert_eq!(
                    page,
                    everything[offset as usize..end],
                    "{name} {offset}+{limit}"
                );
            }
            // A payload holding the text a filter looks for is only read:
            // the entries are filtered exactly.
            let tricky = |kind, event_type, payload: &str| NewEntry {
                at: at(59),
                kind,
                event_type,
                step_id: None,
                version: 1,
                payload: payload.into(),
            };
            let more = Commit {
                workflow_id: "v".into(),
                after_seq: 2,
                entries: vec![
                    tricky(
                        EntryKind::Record,
                        "step_completed",
                        r#"{"output":{"event_type":"action_completed"}}"#,
                    ),
                    tricky(EntryKind::Input, "action_completed", "{}"),
                ],
                ..Commit::default()
            };
            store.commit(more).await.unwrap();
            let across = EventFilter {
                event_type: Some("action_completed".into()),
                ..EventFilter::default()
            };
            let found = store.find_entries(across.clone()).await.unwrap();
            assert_eq!(found.len(), 39, "{name}");
            assert!(
                found
                    .iter()
                    .all(|f| f.entry.event_type == "action_completed")
            );
            assert_eq!(
                (found[0].workflow_id.as_str(), found[0].entry.seq),
                ("v", 4)
            );
            assert_eq!(store.count(Listing::Entries(across)).await.unwrap(), 39);
            let all = store.count(Listing::Entries(EventFilter::default())).await;
            assert_eq!(all.unwrap(), 152 + 4, "{name}: every entry of both runs");
        });
    }
}

/// A libSQL database whose log an earlier build wrote (schema 12: a row
/// an entry) upgrades, and its old rows and the new folded ones read as
/// one log.
#[test]
fn a_log_written_a_row_an_entry_reads_on_after_the_upgrade() {
    use opcode_runtime::store::libsql::LibsqlStore;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    drop(LibsqlStore::open(&path, Durability::Normal).unwrap());
    block_on(async {
        let db = libsql::Builder::new_local(&path).build().await.unwrap();
        let conn = db.connect().unwrap();
        conn.execute_batch(
            "DROP VIEW log_entries; DROP TABLE session_turns; DROP TABLE transcripts;
             DROP TABLE worktree_leases; DROP TABLE agent_versions; DROP TABLE agent_skills; DROP TABLE agent_evals;
             DELETE FROM schema_version WHERE version >= 13;
             INSERT INTO workflows (id, name, source_hash, input_params, created_at, status,
                 last_seq, updated_at)
             VALUES ('old', 'wf', 'h', '{}', '2026-01-01T00:00:00.000Z', 'active', 3,
                 '2026-01-01T00:00:00.000Z');
             INSERT INTO events (workflow_id, seq, at, kind, event_type, step_id, version, payload)
             VALUES ('old', 1, '2026-01-01T00:00:00.000Z', 'input', 'run_started', NULL, 1, '{\"a\":1}'),
                    ('old', 2, '2026-01-01T00:00:00.000Z', 'record', 'workflow_started', NULL, 1, '{}'),
                    ('old', 3, '2026-01-01T00:00:00.000Z', 'record', 'step_started', 's', 1, '{}');",
        )
        .await
        .unwrap();
    });
    let store = LibsqlStore::open(&path, Durability::Normal).unwrap();
    block_on(async {
        let next = Commit {
            workflow_id: "old".into(),
            after_seq: 3,
            entries: (0..4).map(awkward).collect(),
            ..Commit::default()
        };
        store.commit(next).await.unwrap();
        let all = store.entries("old", 0, false).await.unwrap();
        let seqs: Vec<u64> = all.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(all[2].event_type, "step_started");
        assert_eq!(all[4].payload, awkward(1).payload);
        let steps = store
            .find_entries(EventFilter {
                workflow_id: Some("old".into()),
                event_type: Some("step_started".into()),
                ..EventFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(steps.len(), 1);
        let inputs = store.entries("old", 0, true).await.unwrap();
        let seqs: Vec<u64> = inputs.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 4]);
    });
}
