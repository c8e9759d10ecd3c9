//! The shared PostgreSQL store: several daemons on one database
//! (`spec/scale-out.md`). The same contract as the libSQL store, with what
//! a shared server adds: leases expire by the database's clock (`now()`),
//! a commit's fence is checked under the row's lock, and every commit and
//! message is announced with `NOTIFY` so other daemons wake at once (a
//! hint: they also poll).

mod catalog;
mod commit;
mod committer;
mod connect;
mod delegated;
mod listen;
mod registry;
mod retention;
mod rows;
mod schema;
mod slots;

use std::time::Duration;

use deadpool_postgres::{Object, Pool};
use tokio::sync::broadcast;
use tokio_postgres::types::ToSql;

pub use self::schema::LATEST as SCHEMA_VERSION;

use self::connect::Target;
use self::rows::{WORKFLOW_COLUMNS, log_entry, step_row, workflow_row};
use super::listing::{self, Dialect};
use super::{
    Backlog, BoxFuture, Catalog, Claim, Commit, DecisionFilter, DecisionRow, DecisionStatus,
    InboxMessage, LogEntry, Notice, RunLog, Source, StepRow, StoreError, StoreResult,
    WorkflowFilter, WorkflowRow, folded,
};

/// The channel commits and messages are announced on.
const CHANNEL: &str = "opcode";

/// A store on a PostgreSQL database.
pub struct PostgresStore {
    pool: Pool,
    committer: committer::Committer,
    notices: broadcast::Sender<Notice>,
    _listener: listen::Listener,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").finish_non_exhaustive()
    }
}

/// A parameter list.
type Params<'a> = Vec<&'a (dyn ToSql + Sync)>;

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://USER@HOST:PORT/DB`,
    /// `postgresql://…` too), migrates it and starts listening for other
    /// writers' notices. Fails if the database cannot be reached.
    pub async fn connect(url: &str) -> StoreResult<PostgresStore> {
        let target = Target::parse(url)?;
        let pool = target.pool()?;
        connect::migrate(&pool).await?;
        let (notices, _) = broadcast::channel(1024);
        let listener = listen::Listener::start(target, notices.clone()).await?;
        Ok(PostgresStore {
            committer: committer::Committer::start(&pool),
            pool,
            notices,
            _listener: listener,
        })
    }

    /// A connection from the pool.
    async fn client(&self) -> StoreResult<Object> {
        self.pool.get().await.map_err(pool_error)
    }

    /// The rows of `sql`, each mapped by `map`.
    /// The rows of a listing's query, each read by `map`.
    async fn listed<T>(
        &self,
        query: listing::Query<'_>,
        map: impl Fn(&tokio_postgres::Row) -> StoreResult<T>,
    ) -> StoreResult<Vec<T>> {
        let params: Params<'_> = query
            .params
            .iter()
            .map(|p| p as &(dyn ToSql + Sync))
            .collect();
        self.query(&query.sql, &params, map).await
    }

    async fn query<T>(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        map: impl Fn(&tokio_postgres::Row) -> StoreResult<T>,
    ) -> StoreResult<Vec<T>> {
        let client = self.client().await?;
        let statement = client.prepare_cached(sql).await.map_err(backend)?;
        let rows = client.query(&statement, params).await.map_err(backend)?;
        rows.iter().map(map).collect()
    }

    /// How many rows `sql` changed.
    async fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> StoreResult<u64> {
        let client = self.client().await?;
        let statement = client.prepare_cached(sql).await.map_err(backend)?;
        client.execute(&statement, params).await.map_err(backend)
    }
}

/// A database error as the store reports it (the server's message, when
/// there is one).
#[expect(clippy::needless_pass_by_value, reason = "the shape `map_err` takes")]
fn backend(e: tokio_postgres::Error) -> StoreError {
    match e.as_db_error() {
        Some(db) => StoreError::Backend(format!("PostgreSQL: {}", db.message())),
        None => StoreError::Backend(format!("PostgreSQL: {e}")),
    }
}

fn pool_error(e: deadpool_postgres::PoolError) -> StoreError {
    match e {
        deadpool_postgres::PoolError::Backend(e) => backend(e),
        other => StoreError::Backend(format!("PostgreSQL: {other}")),
    }
}

/// A lease's time to live, in seconds (what `make_interval` takes).
fn seconds(ttl: Duration) -> f64 {
    ttl.as_secs_f64()
}

impl PostgresStore {
    /// `text` with its large values put back ([`super::blobs`]).
    async fn resolved(&self, text: String) -> StoreResult<String> {
        super::blobs::resolve_text(text, |hash| async move { self.blob(&hash).await }).await
    }

    async fn resolved_opt(&self, text: Option<String>) -> StoreResult<Option<String>> {
        match text {
            Some(text) => Ok(Some(self.resolved(text).await?)),
            None => Ok(None),
        }
    }

    /// A workflow row with its large values put back.
    async fn resolved_row(&self, mut row: WorkflowRow) -> StoreResult<WorkflowRow> {
        row.output = self.resolved_opt(row.output.take()).await?;
        row.error = self.resolved_opt(row.error.take()).await?;
        row.context = self.resolved_opt(row.context.take()).await?;
        Ok(row)
    }
}

impl RunLog for PostgresStore {
    fn commit(&self, commit: Commit) -> BoxFuture<'_, StoreResult<()>> {
        Box::pin(self.committer.commit(commit))
    }

    fn workflow<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<WorkflowRow>>> {
        Box::pin(async move {
            let sql = format!("SELECT {WORKFLOW_COLUMNS} FROM workflows WHERE id = $1");
            match self.query(&sql, &[&id], workflow_row).await?.pop() {
                Some(row) => Ok(Some(self.resolved_row(row).await?)),
                None => Ok(None),
            }
        })
    }

    fn blob<'a>(&'a self, hash: &'a str) -> BoxFuture<'a, StoreResult<Option<String>>> {
        Box::pin(async move {
            let sql = "SELECT value FROM blobs WHERE hash = $1";
            let mut found = self
                .query(sql, &[&hash], |row| {
                    row.try_get::<_, String>(0).map_err(backend)
                })
                .await?;
            Ok(found.pop())
        })
    }

    fn source<'a>(&'a self, hash: &'a str) -> BoxFuture<'a, StoreResult<Option<Source>>> {
        Box::pin(async move {
            let sql = "SELECT hash, definition, program FROM sources WHERE hash = $1";
            let mut found = self
                .query(sql, &[&hash], |row| {
                    Ok(Source {
                        hash: row.try_get(0).map_err(backend)?,
                        definition: row.try_get(1).map_err(backend)?,
                        program: row.try_get(2).map_err(backend)?,
                    })
                })
                .await?;
            Ok(found.pop())
        })
    }

    fn workflows(&self, filter: WorkflowFilter) -> BoxFuture<'_, StoreResult<Vec<WorkflowRow>>> {
        Box::pin(async move {
            let query = listing::workflows(Dialect::Postgres, WORKFLOW_COLUMNS, &filter);
            let rows = self
                .listed(query.paged(filter.limit, filter.offset), workflow_row)
                .await?;
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                out.push(self.resolved_row(row).await?);
            }
            Ok(out)
        })
    }

    fn entries<'a>(
        &'a self,
        id: &'a str,
        after_seq: u64,
        inputs_only: bool,
    ) -> BoxFuture<'a, StoreResult<Vec<LogEntry>>> {
        Box::pin(async move {
            let filter = if inputs_only {
                " AND kind = 'input'"
            } else {
                ""
            };
            let sql = format!(
                "SELECT seq, at, kind, event_type, step_id, version, payload FROM events \
                 WHERE workflow_id = $1 AND seq > $2{filter} ORDER BY seq"
            );
            let after = after_seq as i64;
            let rows = self
                .query(&sql, &[&id, &after], |row| log_entry(row, 0))
                .await?;
            let mut entries = folded::unfold_all(rows, after_seq, inputs_only)?;
            for e in &mut entries {
                e.payload = self.resolved(std::mem::take(&mut e.payload)).await?;
            }
            Ok(entries)
        })
    }

    fn steps<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Vec<StepRow>>> {
        Box::pin(async move {
            let sql = "SELECT step_id, status, attempt, output, error, started_at, completed_at, \
                       duration_ms FROM step_state WHERE workflow_id = $1 \
                       ORDER BY started_at NULLS FIRST, step_id";
            let mut steps = self.query(sql, &[&id], step_row).await?;
            for s in &mut steps {
                s.output = self.resolved_opt(s.output.take()).await?;
                s.error = self.resolved_opt(s.error.take()).await?;
            }
            Ok(steps)
        })
    }

    fn decisions<'a>(
        &'a self,
        workflow_id: Option<&'a str>,
        status: Option<DecisionStatus>,
    ) -> BoxFuture<'a, StoreResult<Vec<DecisionRow>>> {
        Catalog::decision_page(
            self,
            DecisionFilter {
                workflow_id: workflow_id.map(str::to_owned),
                status,
                ..DecisionFilter::default()
            },
        )
    }

    fn next_timers(&self, limit: u32) -> BoxFuture<'_, StoreResult<Vec<(String, String)>>> {
        Box::pin(async move {
            let sql = format!(
                "SELECT workflow_id, MIN(due_at) AS due FROM timers GROUP BY workflow_id \
                 ORDER BY due LIMIT {limit}"
            );
            self.query(&sql, &[], |row| {
                Ok((
                    row.try_get(0).map_err(backend)?,
                    row.try_get(1).map_err(backend)?,
                ))
            })
            .await
        })
    }

    fn send<'a>(
        &'a self,
        workflow_id: &'a str,
        event: String,
        at: String,
    ) -> BoxFuture<'a, StoreResult<i64>> {
        Box::pin(async move {
            let sql = "WITH sent AS (INSERT INTO inbox (workflow_id, event, created_at) \
                       VALUES ($1, $2, $3) RETURNING id) \
                       SELECT id, pg_notify($4, $5) FROM sent";
            let notice = Notice::Mail(workflow_id.to_owned()).encode();
            let mut ids = self
                .query(
                    sql,
                    &[&workflow_id, &event, &at, &CHANNEL, &notice],
                    |row| row.try_get::<_, i64>(0).map_err(backend),
                )
                .await?;
            ids.pop()
                .ok_or_else(|| StoreError::Backend("the inbox insert returned no row".into()))
        })
    }

    fn inbox<'a>(
        &'a self,
        workflow_id: Option<&'a str>,
    ) -> BoxFuture<'a, StoreResult<Vec<InboxMessage>>> {
        Box::pin(async move {
            let sql = "SELECT id, workflow_id, event, created_at FROM inbox \
                       WHERE ($1::text IS NULL OR workflow_id = $1) ORDER BY id";
            self.query(sql, &[&workflow_id], |row| {
                Ok(InboxMessage {
                    id: row.try_get(0).map_err(backend)?,
                    workflow_id: row.try_get(1).map_err(backend)?,
                    event: row.try_get(2).map_err(backend)?,
                    created_at: row.try_get(3).map_err(backend)?,
                })
            })
            .await
        })
    }

    fn claim<'a>(
        &'a self,
        id: &'a str,
        owner: &'a str,
        take_from: Option<&'a str>,
        ttl: Duration,
    ) -> BoxFuture<'a, StoreResult<Claim>> {
        Box::pin(async move {
            let ttl = seconds(ttl);
            let granted = self
                .query(
                    "UPDATE workflows SET lease_owner = $2, \
                     lease_expires_at = now() + make_interval(secs => $3), \
                     lease_epoch = lease_epoch + \
                     CASE WHEN lease_owner IS DISTINCT FROM $2 THEN 1 ELSE 0 END \
                     WHERE id = $1 AND (lease_owner IS NULL OR lease_owner = $2 \
                     OR lease_expires_at < now() OR lease_owner = $4) RETURNING lease_epoch",
                    &[&id, &owner, &ttl, &take_from],
                    |row| row.try_get::<_, i64>(0).map_err(backend),
                )
                .await?;
            if let Some(epoch) = granted.first() {
                return Ok(Claim::Granted {
                    epoch: *epoch as u64,
                });
            }
            let held = self
                .query(
                    "SELECT lease_owner, to_char(lease_expires_at AT TIME ZONE 'UTC', \
                     'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') FROM workflows \
                     WHERE id = $1 AND lease_owner IS NOT NULL",
                    &[&id],
                    |row| {
                        Ok(Claim::Held {
                            owner: row.try_get(0).map_err(backend)?,
                            expires_at: row.try_get(1).map_err(backend)?,
                        })
                    },
                )
                .await?;
            Ok(held
                .into_iter()
                .next()
                .unwrap_or(Claim::Granted { epoch: 0 }))
        })
    }

    fn renew<'a>(&'a self, owner: &'a str, ttl: Duration) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            let ttl = seconds(ttl);
            // The rows are locked in the order of their ids' bytes (`C`,
            // whatever the database's collation), as a group of commits
            // locks them (`committer.rs`): in any other order a renewal and
            // a group each held a row the other waited for, and one of them
            // failed after PostgreSQL's deadlock timeout (decision 0052).
            self.execute(
                "UPDATE workflows SET lease_expires_at = now() + make_interval(secs => $2) \
                 WHERE lease_owner = $1 AND id IN (SELECT id FROM workflows WHERE lease_owner = $1 \
                 AND status IN ('pending', 'active', 'suspended') ORDER BY id COLLATE \"C\" FOR UPDATE)",
                &[&owner, &ttl],
            )
            .await
            .map(|_| ())
        })
    }

    fn backlog(&self) -> BoxFuture<'_, StoreResult<Backlog>> {
        Box::pin(async move {
            let sql = "WITH clock AS (SELECT now() AS now, to_char(now() AT TIME ZONE 'UTC', \
                       'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') AS text), \
                       runnable AS (SELECT COALESCE(lease_expires_at, updated_at::timestamptz) \
                       AS since FROM workflows, clock WHERE status IN ('pending', 'active') \
                       AND (lease_owner IS NULL OR lease_expires_at < clock.now)), \
                       due AS (SELECT due_at::timestamptz AS since FROM timers, clock \
                       WHERE due_at <= clock.text) \
                       SELECT (SELECT count(*) FROM runnable), (SELECT count(*) FROM due), \
                       COALESCE(extract(epoch FROM (SELECT now FROM clock) - LEAST(\
                       (SELECT min(since) FROM runnable), (SELECT min(since) FROM due)))::float8, 0)";
            let counts = self
                .query(sql, &[], |row| {
                    Ok((
                        row.try_get::<_, i64>(0).map_err(backend)?,
                        row.try_get::<_, i64>(1).map_err(backend)?,
                        row.try_get::<_, f64>(2).map_err(backend)?,
                    ))
                })
                .await?;
            let (runnable, timers_due, oldest) = counts.first().copied().unwrap_or_default();
            let leases = self
                .query(
                    "SELECT lease_owner, count(*) FROM workflows WHERE lease_owner IS NOT NULL \
                     AND lease_expires_at >= now() GROUP BY lease_owner ORDER BY lease_owner",
                    &[],
                    |row| {
                        Ok((
                            row.try_get(0).map_err(backend)?,
                            row.try_get::<_, i64>(1).map_err(backend)? as u64,
                        ))
                    },
                )
                .await?;
            Ok(Backlog {
                runnable: runnable as u64,
                timers_due: timers_due as u64,
                oldest_seconds: oldest.max(0.0),
                leases,
            })
        })
    }

    fn orphans(&self, limit: u32) -> BoxFuture<'_, StoreResult<Vec<String>>> {
        Box::pin(async move {
            let sql = format!(
                "SELECT id FROM (SELECT id, created_at, row_number() OVER \
                 (PARTITION BY agent_id ORDER BY created_at, id) AS turn FROM workflows \
                 WHERE status IN ('pending', 'active') \
                 AND (lease_owner IS NULL OR lease_expires_at < now())) AS o \
                 ORDER BY turn, created_at, id LIMIT {limit}"
            );
            self.query(&sql, &[], |row| row.try_get(0).map_err(backend))
                .await
        })
    }

    fn release<'a>(&'a self, id: &'a str, owner: &'a str) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            self.execute(
                "UPDATE workflows SET lease_owner = NULL, lease_expires_at = NULL \
                 WHERE id = $1 AND lease_owner = $2",
                &[&id, &owner],
            )
            .await
            .map(|_| ())
        })
    }

    fn notices(&self) -> Option<broadcast::Receiver<Notice>> {
        Some(self.notices.subscribe())
    }
}
