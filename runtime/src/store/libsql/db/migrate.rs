//! The schema's migrations applied to a libSQL database (spec/events.md).

use libsql::Connection;

use super::backend;
use super::columns::get;
use crate::store::schema::{LATEST, MIGRATIONS};
use crate::store::{StoreError, StoreResult};

/// Applies the migrations this database lacks. Each one runs in a write
/// transaction that first reads the version again, so processes opening a
/// new database at the same time apply it once.
pub(super) async fn migrate(conn: &Connection) -> StoreResult<()> {
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_version \
         (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)",
        (),
    )
    .await
    .map_err(backend)?;
    for &(version, name, sql) in MIGRATIONS {
        conn.execute("BEGIN IMMEDIATE", ()).await.map_err(backend)?;
        let result = migrate_one(conn, version, name, sql).await;
        let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
        conn.execute(end, ()).await.map_err(backend)?;
        result?;
    }
    Ok(())
}

async fn migrate_one(conn: &Connection, version: i64, name: &str, sql: &str) -> StoreResult<()> {
    let mut rows = conn
        .query("SELECT COALESCE(MAX(version), 0) FROM schema_version", ())
        .await
        .map_err(backend)?;
    let current: i64 = match rows.next().await.map_err(backend)? {
        Some(row) => get(&row, 0)?,
        None => 0,
    };
    drop(rows);
    if current > LATEST {
        return Err(StoreError::Schema {
            found: current,
            known: LATEST,
        });
    }
    if current >= version {
        return Ok(());
    }
    let failed =
        |e: libsql::Error| StoreError::Backend(format!("migration {version} ({name}) failed: {e}"));
    conn.execute_batch(sql).await.map_err(failed)?;
    // Recorded with parameters: a name is text, never SQL.
    let at = crate::time::rfc3339(crate::time::now_ms());
    conn.execute(
        "INSERT INTO schema_version (version, name, applied_at) VALUES (?1, ?2, ?3)",
        libsql::params![version, name, at],
    )
    .await
    .map(|_| ())
    .map_err(failed)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::path::Path;

    use super::super::Db;
    use super::super::tests::another_connection;
    use super::*;
    use crate::store::{Claim, Durability};

    /// Makes the database at `path` as schema `version` left it, then runs `sql`.
    fn left_by_schema(path: &Path, version: usize, sql: &str) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let conn = libsql::Builder::new_local(path)
                .build()
                .await
                .unwrap()
                .connect()
                .unwrap();
            conn.execute(
                "CREATE TABLE schema_version \
                 (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)",
                (),
            )
            .await
            .unwrap();
            for &(version, name, sql) in &MIGRATIONS[..version] {
                migrate_one(&conn, version, name, sql).await.unwrap();
            }
            conn.execute_batch(sql).await.unwrap();
        });
    }

    /// A migration's name is recorded as text, whatever it holds (a quote
    /// in one once failed the migration: it was written into the SQL).
    #[test]
    fn a_name_with_quotes_is_recorded_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        left_by_schema(&dir.path().join("t.db"), 0, "");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let conn = libsql::Builder::new_local(dir.path().join("t.db"))
                .build()
                .await
                .unwrap()
                .connect()
                .unwrap();
            let name = "agents' \"notes\"; DROP TABLE schema_version; --";
            migrate_one(&conn, 1, name, "CREATE TABLE x (a TEXT)")
                .await
                .unwrap();
            let mut rows = conn
                .query("SELECT name FROM schema_version WHERE version = 1", ())
                .await
                .unwrap();
            let row = rows.next().await.unwrap().unwrap();
            assert_eq!(get::<String>(&row, 0).unwrap(), name);
        });
    }

    /// A database left by schema 3 keeps its leases when migrated.
    #[test]
    fn leases_move_into_the_workflow_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v3.db");
        left_by_schema(
            &path,
            3,
            "INSERT INTO workflows (id, name, source_hash, status, created_at, updated_at) \
             VALUES ('w', 'wf', 'h', 'active', 'a', 'a'), ('v', 'wf', 'h', 'active', 'a', 'a'); \
             INSERT INTO leases (workflow_id, owner, expires_at) \
             VALUES ('w', 'me', '2999-01-01T00:00:00.000Z');",
        );
        let db = Db::open(&path, Durability::Normal).unwrap();
        let ttl = std::time::Duration::from_secs(30);
        assert_eq!(
            db.claim("w", "you", None, ttl).unwrap(),
            Claim::Held {
                owner: "me".into(),
                expires_at: "2999-01-01T00:00:00.000Z".into(),
            }
        );
        assert_eq!(
            db.claim("v", "you", None, ttl).unwrap(),
            Claim::Granted { epoch: 1 }
        );
        assert!(matches!(
            db.claim("v", "me", None, ttl).unwrap(),
            Claim::Held { owner, .. } if owner == "you"
        ));
        // The lease held before schema 6 is its run's first grant.
        assert_eq!(
            db.claim("w", "me", None, ttl).unwrap(),
            Claim::Granted { epoch: 1 }
        );
    }

    /// A database left by schema 4 keeps its runs, leases and indexes, and
    /// takes the `quarantined` status.
    #[test]
    fn runs_may_be_quarantined_after_the_migration() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v4.db");
        left_by_schema(
            &path,
            4,
            "INSERT INTO workflows (id, name, source_hash, status, created_at, updated_at, \
             lease_owner, lease_expires_at) \
             VALUES ('w', 'wf', 'h', 'active', 'a', 'a', 'me', '2999-01-01T00:00:00.000Z');",
        );
        let db = Db::open(&path, Durability::Normal).unwrap();
        assert!(matches!(
            db.claim("w", "you", None, std::time::Duration::ZERO).unwrap(),
            Claim::Held { owner, .. } if owner == "me"
        ));
        let count = |sql: &str| -> i64 {
            db.block(async {
                let mut rows = db.conn.query(sql, ()).await.unwrap();
                get(&rows.next().await.unwrap().unwrap(), 0).unwrap()
            })
        };
        db.block(db.conn.execute(
            "UPDATE workflows SET status = 'quarantined' WHERE id = 'w'",
            (),
        ))
        .unwrap();
        assert_eq!(
            count("SELECT COUNT(*) FROM workflows WHERE status = 'quarantined'"),
            1
        );
        // The four indexes v5 made again, and v9's by template.
        assert_eq!(
            count(
                "SELECT COUNT(*) FROM sqlite_schema WHERE tbl_name = 'workflows' AND type = 'index' AND sql IS NOT NULL"
            ),
            5
        );
        // The status CHECK holds (on any connection but the writer's, which
        // skips CHECKs: decision 0040).
        let lost = "UPDATE workflows SET status = 'lost'";
        let other = db.block(async { another_connection(&path).await.execute(lost, ()).await });
        assert!(other.is_err());
    }
}
