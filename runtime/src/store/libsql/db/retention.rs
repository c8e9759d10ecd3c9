//! Retention on the libSQL connection (spec/store.md, "Retention").

use libsql::{Row, Value};

use super::{Db, backend, get, listed};
use crate::store::blobs;
use crate::store::listing::{self, Dialect};
use crate::store::{Expiry, Prune, PrunedFilter, PrunedRow, StoreResult};

/// The finished runs an expiry lets go: `?1` ended before, `?2` kept per
/// template, `?3` at most.
const EXPIRED: &str = "SELECT id FROM (\
     SELECT id, COALESCE(completed_at, updated_at) AS ended, \
     row_number() OVER (PARTITION BY COALESCE(template_name, name) \
     ORDER BY COALESCE(completed_at, updated_at) DESC, id DESC) AS newest \
     FROM workflows WHERE status IN ('completed', 'failed', 'cancelled')) AS finished \
     WHERE ended < ?1 OR newest > ?2 ORDER BY ended, id LIMIT ?3";

/// A run's tombstone, written if the run has ended (`?1` the run, `?2`
/// when, `?3` its export).
const TOMBSTONE: &str = "INSERT OR REPLACE INTO pruned_runs (id, name, template_name, \
     template_version, status, agent_id, parent_workflow_id, created_at, completed_at, \
     pruned_at, export) SELECT id, name, template_name, template_version, status, agent_id, \
     parent_workflow_id, created_at, completed_at, ?2, ?3 FROM workflows \
     WHERE id = ?1 AND status IN ('completed', 'failed', 'cancelled')";

/// The texts of a run that may refer to large values.
const REFERRING: &str = "SELECT payload FROM events WHERE workflow_id = ?1 AND instr(payload, ?2) > 0 \
     UNION ALL SELECT output FROM step_state WHERE workflow_id = ?1 AND instr(output, ?2) > 0 \
     UNION ALL SELECT error FROM step_state WHERE workflow_id = ?1 AND instr(error, ?2) > 0 \
     UNION ALL SELECT COALESCE(output, '') || COALESCE(error, '') || COALESCE(context, '') \
     FROM workflows WHERE id = ?1";

/// What is kept of a run, by table and the column naming the run; the
/// workflow row last.
const RUN_TABLES: &[(&str, &str)] = &[
    ("events", "workflow_id"),
    ("step_state", "workflow_id"),
    ("pending_decisions", "workflow_id"),
    ("timers", "workflow_id"),
    ("inbox", "workflow_id"),
    ("transcripts", "workflow_id"),
    ("workflow_context", "workflow_id"),
    ("workflows", "id"),
];

/// Deletes large value `?1` unless a row still refers to it.
const UNREFERRED_BLOB: &str = "DELETE FROM blobs WHERE hash = ?1 \
     AND NOT EXISTS (SELECT 1 FROM events WHERE instr(payload, ?1) > 0) \
     AND NOT EXISTS (SELECT 1 FROM step_state WHERE instr(output, ?1) > 0 OR instr(error, ?1) > 0) \
     AND NOT EXISTS (SELECT 1 FROM workflows WHERE instr(output, ?1) > 0 \
         OR instr(error, ?1) > 0 OR instr(context, ?1) > 0) \
     AND NOT EXISTS (SELECT 1 FROM blobs WHERE instr(value, ?1) > 0)";

impl Db {
    /// The finished runs `expiry` lets go, oldest first.
    pub fn expired(&self, expiry: &Expiry) -> StoreResult<Vec<String>> {
        let params: Vec<Value> = vec![
            expiry.ended_before.clone().into(),
            expiry.keep_last.map(i64::from).into(),
            i64::from(expiry.limit).into(),
        ];
        self.block(self.query_all(EXPIRED, params, |row| get::<String>(row, 0)))
    }

    /// Deletes the ended runs of `runs` in one transaction, leaving their
    /// tombstones, then the large values only they referred to.
    pub fn prune(&self, runs: &[Prune], at: &str) -> StoreResult<Vec<String>> {
        self.block(self.in_transaction(self.prune_open(runs, at)))
    }

    async fn prune_open(&self, runs: &[Prune], at: &str) -> StoreResult<Vec<String>> {
        let mut deleted = Vec::new();
        let mut blobs_seen: Vec<String> = Vec::new();
        for prune in runs {
            let id = prune.id.as_str();
            let params: Vec<Value> = vec![id.into(), at.into(), prune.export.clone().into()];
            if self
                .conn
                .execute(TOMBSTONE, params)
                .await
                .map_err(backend)?
                == 0
            {
                continue;
            }
            let texts = self
                .query_all(REFERRING, vec![id.into(), blobs::KEY.into()], |row| {
                    get::<Option<String>>(row, 0)
                })
                .await?;
            for text in texts.iter().flatten() {
                blobs::add_references(text, &mut blobs_seen);
            }
            for (table, column) in RUN_TABLES {
                let sql = format!("DELETE FROM {table} WHERE {column} = ?1");
                self.conn
                    .execute(&sql, vec![Value::from(id)])
                    .await
                    .map_err(backend)?;
            }
            deleted.push(prune.id.clone());
        }
        // Outer values first: a value inside another is referred to by it
        // until it goes.
        let mut next = 0;
        while let Some(hash) = blobs_seen.get(next).cloned() {
            next += 1;
            let value = self.blob_of(hash.clone()).await?;
            let gone = self
                .conn
                .execute(UNREFERRED_BLOB, vec![Value::from(hash)])
                .await
                .map_err(backend)?;
            if let (1, Some(value)) = (gone, value) {
                blobs::add_references(&value, &mut blobs_seen);
            }
        }
        Ok(deleted)
    }

    /// Deletes the tombstones of runs pruned before `before`.
    pub fn forget_pruned(&self, before: &str) -> StoreResult<u64> {
        self.execute(
            "DELETE FROM pruned_runs WHERE pruned_at < ?1",
            vec![before.into()],
        )
    }

    /// The tombstones `filter` names, most recently pruned first.
    pub fn pruned(&self, filter: &PrunedFilter) -> StoreResult<Vec<PrunedRow>> {
        let (sql, params) =
            listed(listing::pruned(Dialect::Sqlite, filter).paged(filter.limit, filter.offset));
        self.block(self.query_all(&sql, params, pruned_row))
    }
}

fn pruned_row(row: &Row) -> StoreResult<PrunedRow> {
    Ok(PrunedRow {
        id: get(row, 0)?,
        name: get(row, 1)?,
        template_name: get(row, 2)?,
        template_version: get(row, 3)?,
        status: get(row, 4)?,
        agent_id: get(row, 5)?,
        parent_workflow_id: get(row, 6)?,
        created_at: get(row, 7)?,
        completed_at: get(row, 8)?,
        pruned_at: get(row, 9)?,
        export: get(row, 10)?,
    })
}
