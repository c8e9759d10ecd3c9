//! Retention on PostgreSQL (spec/store.md, "Retention"): the libSQL
//! store's statements, with the run's row locked while it is pruned so a
//! commit from another daemon cannot land halfway.

use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::{PostgresStore, backend};
use crate::store::blobs;
use crate::store::listing::{self, Dialect};
use crate::store::{
    Expiry, Prune, PrunedFilter, PrunedRow, StoreError, StoreResult, WorkflowStatus,
};

/// The finished runs an expiry lets go: `$1` ended before, `$2` kept per
/// template, `$3` at most.
const EXPIRED: &str = "SELECT id FROM (\
     SELECT id, COALESCE(completed_at, updated_at) AS ended, \
     row_number() OVER (PARTITION BY COALESCE(template_name, name) \
     ORDER BY COALESCE(completed_at, updated_at) DESC, id DESC) AS newest \
     FROM workflows WHERE status IN ('completed', 'failed', 'cancelled')) AS finished \
     WHERE ended < $1 OR newest > $2 ORDER BY ended, id LIMIT $3";

/// Locks run `$1` if it has ended.
const LOCK_ENDED: &str = "SELECT id FROM workflows \
     WHERE id = $1 AND status IN ('completed', 'failed', 'cancelled') FOR UPDATE";

/// A run's tombstone (`$1` the run, `$2` when, `$3` its export).
const TOMBSTONE: &str = "INSERT INTO pruned_runs (id, name, template_name, template_version, \
     status, agent_id, parent_workflow_id, created_at, completed_at, pruned_at, export) \
     SELECT id, name, template_name, template_version, status, agent_id, parent_workflow_id, \
     created_at, completed_at, $2, $3 FROM workflows WHERE id = $1 \
     ON CONFLICT (id) DO UPDATE SET pruned_at = excluded.pruned_at, export = excluded.export";

/// The texts of a run that may refer to large values.
const REFERRING: &str = "SELECT payload FROM events WHERE workflow_id = $1 AND strpos(payload, $2) > 0 \
     UNION ALL SELECT output FROM step_state WHERE workflow_id = $1 AND strpos(output, $2) > 0 \
     UNION ALL SELECT error FROM step_state WHERE workflow_id = $1 AND strpos(error, $2) > 0 \
     UNION ALL SELECT COALESCE(output, '') || COALESCE(error, '') || COALESCE(context, '') \
     FROM workflows WHERE id = $1";

/// What is kept of a run, by table and the column naming the run; the
/// workflow row last.
const RUN_TABLES: &[(&str, &str)] = &[
    ("events", "workflow_id"),
    ("step_state", "workflow_id"),
    ("pending_decisions", "workflow_id"),
    ("timers", "workflow_id"),
    ("inbox", "workflow_id"),
    ("transcripts", "workflow_id"),
    ("workflows", "id"),
];

/// Deletes large value `$1` unless a row still refers to it; answers its
/// value when it does.
const UNREFERRED_BLOB: &str = "DELETE FROM blobs WHERE hash = $1 \
     AND NOT EXISTS (SELECT 1 FROM events WHERE strpos(payload, $1) > 0) \
     AND NOT EXISTS (SELECT 1 FROM step_state WHERE strpos(output, $1) > 0 OR strpos(error, $1) > 0) \
     AND NOT EXISTS (SELECT 1 FROM workflows WHERE strpos(output, $1) > 0 \
         OR strpos(error, $1) > 0 OR strpos(context, $1) > 0) \
     AND NOT EXISTS (SELECT 1 FROM blobs b WHERE strpos(b.value, $1) > 0) \
     RETURNING value";

impl PostgresStore {
    /// The finished runs `expiry` lets go, oldest first.
    pub(super) async fn expired_runs(&self, expiry: &Expiry) -> StoreResult<Vec<String>> {
        let keep = expiry.keep_last.map(i64::from);
        let limit = i64::from(expiry.limit);
        let params: [&(dyn ToSql + Sync); 3] = [&expiry.ended_before, &keep, &limit];
        self.query(EXPIRED, &params, |row| row.try_get(0).map_err(backend))
            .await
    }

    /// Deletes the ended runs of `runs` in one transaction, leaving their
    /// tombstones, then the large values only they referred to.
    pub(super) async fn prune_runs(&self, runs: &[Prune], at: &str) -> StoreResult<Vec<String>> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let mut deleted = Vec::new();
        let mut blobs_seen: Vec<String> = Vec::new();
        for prune in runs {
            let id = prune.id.as_str();
            if tx
                .query_opt(LOCK_ENDED, &[&id])
                .await
                .map_err(backend)?
                .is_none()
            {
                continue;
            }
            tx.execute(TOMBSTONE, &[&id, &at, &prune.export])
                .await
                .map_err(backend)?;
            for row in tx
                .query(REFERRING, &[&id, &blobs::KEY])
                .await
                .map_err(backend)?
            {
                if let Some(text) = row.try_get::<_, Option<String>>(0).map_err(backend)? {
                    blobs::add_references(&text, &mut blobs_seen);
                }
            }
            for (table, column) in RUN_TABLES {
                let sql = format!("DELETE FROM {table} WHERE {column} = $1");
                tx.execute(&sql, &[&id]).await.map_err(backend)?;
            }
            deleted.push(prune.id.clone());
        }
        // Outer values first: a value inside another is referred to by it
        // until it goes.
        let mut next = 0;
        while let Some(hash) = blobs_seen.get(next).cloned() {
            next += 1;
            if let Some(row) = tx
                .query_opt(UNREFERRED_BLOB, &[&hash])
                .await
                .map_err(backend)?
            {
                let value: String = row.try_get(0).map_err(backend)?;
                blobs::add_references(&value, &mut blobs_seen);
            }
        }
        tx.commit().await.map_err(backend)?;
        Ok(deleted)
    }

    /// Deletes the tombstones of runs pruned before `before`.
    pub(super) async fn forget_pruned_runs(&self, before: &str) -> StoreResult<u64> {
        self.execute("DELETE FROM pruned_runs WHERE pruned_at < $1", &[&before])
            .await
    }

    /// The tombstones `filter` names, most recently pruned first.
    pub(super) async fn pruned_runs(&self, filter: &PrunedFilter) -> StoreResult<Vec<PrunedRow>> {
        let query = listing::pruned(Dialect::Postgres, filter);
        self.listed(query.paged(filter.limit, filter.offset), pruned_row)
            .await
    }
}

fn pruned_row(row: &Row) -> StoreResult<PrunedRow> {
    let get_text = |i: usize| row.try_get::<_, String>(i).map_err(backend);
    let get_opt = |i: usize| row.try_get::<_, Option<String>>(i).map_err(backend);
    let status = get_text(4)?;
    Ok(PrunedRow {
        id: get_text(0)?,
        name: get_text(1)?,
        template_name: get_opt(2)?,
        template_version: row.try_get(3).map_err(backend)?,
        status: WorkflowStatus::parse(&status)
            .ok_or_else(|| StoreError::Backend(format!("a pruned run's status is `{status}`")))?,
        agent_id: get_opt(5)?,
        parent_workflow_id: get_opt(6)?,
        created_at: get_text(7)?,
        completed_at: get_opt(8)?,
        pruned_at: get_text(9)?,
        export: get_opt(10)?,
    })
}
