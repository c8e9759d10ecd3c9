//! What only the PostgreSQL store does: migrating once for daemons that
//! start together, an upgrade from the previous schema, `sslmode`, and
//! notices other processes hear.

use std::time::Duration;

use opcode_runtime::store::WorkflowStatus;

use super::fresh_database;
use crate::{block_on, created_held};

/// Daemons starting at once on a new database migrate it once.
#[test]
fn daemons_starting_at_once_migrate_once() {
    use opcode_runtime::store::postgres::PostgresStore;
    let Some(url) = fresh_database() else {
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
#[test]
fn sslmode_is_honoured() {
    use opcode_runtime::store::postgres::PostgresStore;
    let Some(url) = fresh_database() else {
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

/// Another process hears every commit, each once, its owner and status
/// with it: a group of commits announces each of them.
#[test]
fn every_commit_is_announced_to_the_other_stores() {
    use opcode_runtime::store::postgres::PostgresStore;
    use opcode_runtime::store::{Notice, RunLog as _};
    let Some(url) = fresh_database() else {
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

/// A lease renewal locks its runs' rows in the order a group of commits
/// does (their ids'), so that neither holds a row the other waits for
/// while waiting itself: here a writer holding `a` then taking `b` goes
/// on while the renewal waits for `a` (locking `b` first, the renewal and
/// the writer waited for each other until PostgreSQL's deadlock timeout
/// failed one of them).
#[test]
fn a_lease_renewal_locks_rows_in_the_order_commits_do() {
    use opcode_runtime::store::RunLog as _;
    use opcode_runtime::store::postgres::PostgresStore;
    let Some(url) = fresh_database() else {
        return;
    };
    block_on(async {
        let store = std::sync::Arc::new(PostgresStore::connect(&url).await.unwrap());
        // `b` first: the table's own order is not the ids'.
        for id in ["b", "a"] {
            let created = created_held(id, "me", Duration::from_mins(1));
            store.commit(created).await.unwrap();
        }
        let (writer, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let touch =
            |id: &str| format!("UPDATE workflows SET updated_at = updated_at WHERE id = '{id}'");
        writer.batch_execute("BEGIN").await.unwrap();
        writer.batch_execute(&touch("a")).await.unwrap();
        let renewing = store.clone();
        let renewal =
            tokio::spawn(async move { renewing.renew("me", Duration::from_mins(1)).await });
        tokio::time::sleep(Duration::from_millis(200)).await;
        let b = touch("b");
        let next = tokio::time::timeout(Duration::from_secs(5), writer.batch_execute(&b));
        let took = next
            .await
            .expect("the renewal holds no row the writer wants");
        took.unwrap();
        writer.batch_execute("COMMIT").await.unwrap();
        renewal
            .await
            .unwrap()
            .expect("the renewal lands once the writer commits");
    });
}

/// A database written at schema 4 (before commits raised their refusals,
/// its logs a row an entry) upgrades when a newer build connects: its runs
/// read back, and commits to them land or are refused as before.
#[test]
fn a_schema_4_database_upgrades_and_its_runs_carry_on() {
    use opcode_runtime::store::postgres::PostgresStore;
    use opcode_runtime::store::{Commit, RunLog as _, StoreError};
    let Some(url) = fresh_database() else {
        return;
    };
    block_on(async {
        let store = PostgresStore::connect(&url).await.unwrap();
        store
            .commit(created_held("old", "me", Duration::from_mins(1)))
            .await
            .unwrap();
    });
    // Back to schema 4: what a database written by the previous build holds.
    let psql = |sql: &str| {
        let out = std::process::Command::new("psql")
            .args([url.as_str(), "-Atc", sql])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    psql(
        "DROP VIEW log_entries; DROP TABLE session_turns, transcripts, worktree_leases, run_slots, rate_windows, pending_starts, agent_versions, agent_skills, agent_evals; DROP FUNCTION opcode_refuse(text, text, bigint); \
         DELETE FROM schema_version WHERE version >= 5",
    );
    // Its log a row an entry, as builds before folded rows wrote it.
    psql(
        "DELETE FROM events WHERE workflow_id = 'old'; \
         INSERT INTO events VALUES \
         ('old', 1, '2026-01-01T00:00:00.000Z', 'input', 'step_started', 's0', 1, '{\"n\":0}'), \
         ('old', 2, '2026-01-01T00:00:01.000Z', 'record', 'step_started', 's1', 1, '{\"n\":1}')",
    );
    assert_eq!(psql("SELECT max(version) FROM schema_version"), "4");
    block_on(async {
        let store = PostgresStore::connect(&url).await.unwrap();
        let row = store.workflow("old").await.unwrap().unwrap();
        assert_eq!((row.status, row.last_seq), (WorkflowStatus::Active, 2));
        let next = |after_seq| Commit {
            workflow_id: "old".into(),
            after_seq,
            entries: vec![crate::entry(2)],
            ..Commit::default()
        };
        store.commit(next(2)).await.unwrap();
        let seqs: Vec<u64> = store
            .entries("old", 0, false)
            .await
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect();
        assert_eq!(seqs, [1, 2, 3]);
        let stale = store.commit(next(2)).await;
        assert!(
            matches!(
                stale,
                Err(StoreError::Conflict {
                    expected: 2,
                    actual: 3,
                    ..
                })
            ),
            "{stale:?}"
        );
    });
    let latest = opcode_runtime::store::postgres::SCHEMA_VERSION;
    assert_eq!(
        psql("SELECT max(version) FROM schema_version"),
        latest.to_string()
    );
}
