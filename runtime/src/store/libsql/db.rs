//! One libSQL connection and its prepared statements, used only from the
//! store thread. libSQL's local calls complete without yielding, so each
//! method drives its future to the end on a current-thread runtime.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::path::Path;

use libsql::{Connection, Row, Rows, Statement, Value};

mod catalog;
mod columns;
mod delegated;
mod leases;
mod migrate;
mod registry;
mod retention;
mod schedules;
mod slots;
mod vault;

use self::columns::{get, log_entry, workflow_row};
use self::migrate::migrate;
use crate::store::blobs;
use crate::store::listing::{self, Dialect};

use super::super::{
    DecisionFilter, DecisionRow, DecisionStatus, Durability, InboxMessage, Listing, LogEntry,
    Source, StepRow, StoreError, StoreResult, WorkflowFilter, WorkflowRow, folded,
};

/// Prepared statements of the write path.
struct Writes {
    begin: Statement,
    end: Statement,
    savepoint: Statement,
    release: Statement,
    rollback_to: Statement,
    add_source: Statement,
    add_blob: Statement,
    create: Statement,
    rollback: Statement,
    advance_and_update: Statement,
    update_workflow: Statement,
    set_timer: Statement,
    clear_timer: Statement,
    ask: Statement,
    settle: Statement,
    take_inbox: Statement,
    see_agent: Statement,
    take_lease: Statement,
    release_lease: Statement,
}

/// The writer's page cache, in KiB (decision 0037).
const CACHE_KIB: u32 = 4000;

/// At most this many rows go in one multi-row INSERT.
const ROWS_PER_INSERT: usize = 32;

/// A table written with multi-row INSERTs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Table {
    Events,
    Steps,
}

impl Table {
    /// The INSERT of `rows` rows.
    fn insert_sql(self, rows: usize) -> String {
        let (head, columns, tail) = match self {
            Table::Events => (
                // OR FAIL: a multi-row INSERT that may abort keeps a statement
                // journal; a failed insert is undone anyway, with the batch
                // or back to its commit's savepoint.
                "INSERT OR FAIL INTO events (workflow_id, seq, at, kind, event_type, step_id, \
                 version, payload) VALUES ",
                8,
                "",
            ),
            Table::Steps => (
                "INSERT INTO step_state (workflow_id, step_id, status, attempt, output, error, \
                 started_at, completed_at, duration_ms) VALUES ",
                9,
                STEP_UPSERT,
            ),
        };
        let row = format!("({})", vec!["?"; columns].join(", "));
        format!("{head}{}{tail}", vec![row; rows].join(", "))
    }
}

/// How a step row meets the row it replaces: the first start stays, and the
/// duration runs from it.
const STEP_UPSERT: &str = " ON CONFLICT (workflow_id, step_id) DO UPDATE SET \
    status = excluded.status, attempt = excluded.attempt, \
    output = excluded.output, error = excluded.error, \
    started_at = COALESCE(step_state.started_at, excluded.started_at), \
    completed_at = excluded.completed_at, \
    duration_ms = CASE WHEN excluded.completed_at IS NULL THEN NULL ELSE \
    CAST(ROUND((julianday(excluded.completed_at) - julianday(COALESCE(\
    step_state.started_at, excluded.started_at, excluded.completed_at))) \
    * 86400000) AS INTEGER) END";

/// The connection.
pub struct Db {
    rt: tokio::runtime::Runtime,
    conn: Connection,
    writes: Writes,
    batches: RefCell<HashMap<(Table, usize), Statement>>,
    /// Prepared reads, by SQL text (preparing one costs more than running it).
    reads: RefCell<HashMap<String, Statement>>,
    /// Sources known to be stored (they are never deleted), and those the
    /// open transaction wrote, known once it is committed.
    sources: RefCell<SourcesSeen>,
}

/// The source hashes a [`Db`] has seen stored.
#[derive(Default)]
struct SourcesSeen {
    stored: HashSet<String>,
    writing: Vec<String>,
}

/// At most this many reads stay prepared (queries with literal pages vary).
const KEPT_READS: usize = 64;

/// Maps a libSQL error.
fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

/// A workflow's last sequence, as SQL over its `workflows` row: its log's
/// last entry, or the row's `last_seq` while it has none (created without
/// entries). The column alone lags a running run: an append that changes no
/// derived state does not write the row (decision 0041).
macro_rules! last_seq_sql {
    () => {
        "COALESCE((SELECT max(seq) FROM events WHERE events.workflow_id = workflows.id), \
         workflows.last_seq)"
    };
}

// After the macro, which it uses.
mod write;

const WORKFLOW_COLUMNS: &str = concat!(
    "id, name, source_hash, status, input_params, output, error, context, agent_id, \
     parent_workflow_id, template_name, template_version, base_dir, ",
    last_seq_sql!(),
    ", created_at, started_at, completed_at, updated_at"
);

impl Db {
    /// Opens (creating if needed) the database at `path` and migrates it.
    /// A new database is made readable by its owner only (0600; SQLite
    /// gives its WAL and shared-memory files the database's mode): it holds
    /// every run's inputs and outputs.
    pub fn open(path: &Path, durability: Durability) -> StoreResult<Db> {
        create_private(path).map_err(backend)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(backend)?;
        let conn = rt.block_on(async {
            let db = libsql::Builder::new_local(path)
                .build()
                .await
                .map_err(backend)?;
            db.connect().map_err(backend)
        })?;
        let synchronous = match durability {
            Durability::Normal => "NORMAL",
            Durability::Full => "FULL",
        };
        rt.block_on(async {
            for pragma in [
                "PRAGMA journal_mode = WAL".to_owned(),
                format!("PRAGMA synchronous = {synchronous}"),
                "PRAGMA busy_timeout = 5000".to_owned(),
                "PRAGMA temp_store = MEMORY".to_owned(),
                // Small: a b-tree split parks a page at the lock page's number
                // for a moment, and the commit then walks the whole cache to
                // drop it (pcache1Truncate); the OS caches the file anyway.
                format!("PRAGMA cache_size = -{CACHE_KIB}"),
                // The checkpointer thread does this, off the commit path.
                "PRAGMA wal_autocheckpoint = 0".to_owned(),
                // A WAL grown by a burst shrinks back when it starts over.
                format!(
                    "PRAGMA journal_size_limit = {}",
                    super::checkpoint::WAL_LIMIT_BYTES
                ),
            ] {
                super::checkpoint::pragma(&conn, &pragma).await?;
            }
            migrate(&conn).await?;
            // The schema's `CHECK (x IN (...))` constraints cost an ephemeral
            // b-tree (a pager of its own) at every statement that writes such
            // a table; this writer writes only values of the store's own
            // enums, so it skips them (decision 0040). Set after the
            // migrations, before any write is prepared.
            super::checkpoint::pragma(&conn, "PRAGMA ignore_check_constraints = ON").await
        })?;
        let writes = rt.block_on(prepare(&conn))?;
        Ok(Db {
            rt,
            conn,
            writes,
            batches: RefCell::new(HashMap::new()),
            reads: RefCell::new(HashMap::new()),
            sources: RefCell::new(SourcesSeen::default()),
        })
    }

    fn block<T>(&self, f: impl Future<Output = T>) -> T {
        self.rt.block_on(f)
    }

    /// Copies into the database what the WAL holds beyond the checkpointer's
    /// last pass. Run by the writer between batches, so nothing is written
    /// meanwhile and the next commit starts the WAL over. Answers whether
    /// it copied everything: it cannot while the checkpointer is in a pass
    /// of its own (or a reader holds an old snapshot), and must try again.
    pub fn finish_checkpoint(&self) -> bool {
        match self.block(super::checkpoint::checkpoint(&self.conn)) {
            Ok(pass) => pass.complete(),
            Err(e) => {
                tracing::warn!(error = %e, "finishing a WAL checkpoint failed; will retry");
                false
            }
        }
    }

    /// The first row of `sql`, mapped by `map`.
    async fn query_one<T>(
        &self,
        sql: &str,
        params: Vec<Value>,
        map: impl Fn(&Row) -> StoreResult<T>,
    ) -> StoreResult<Option<T>> {
        Ok(self.read(sql, params, map, Some(1)).await?.pop())
    }

    /// The rows of `sql`, each mapped by `map`.
    async fn query_all<T>(
        &self,
        sql: &str,
        params: Vec<Value>,
        map: impl Fn(&Row) -> StoreResult<T>,
    ) -> StoreResult<Vec<T>> {
        self.read(sql, params, map, None).await
    }

    /// The rows of `sql` (at most `most`), each mapped by `map` while the
    /// statement is on it, through a statement prepared once.
    async fn read<T>(
        &self,
        sql: &str,
        params: Vec<Value>,
        map: impl Fn(&Row) -> StoreResult<T>,
        most: Option<usize>,
    ) -> StoreResult<Vec<T>> {
        let cached = self.reads.borrow_mut().remove(sql);
        let stmt = match cached {
            Some(stmt) => stmt,
            None => self.conn.prepare(sql).await.map_err(backend)?,
        };
        let mut out = Vec::new();
        let read = async {
            let mut rows: Rows = stmt.query(params).await.map_err(backend)?;
            while most.is_none_or(|most| out.len() < most)
                && let Some(row) = rows.next().await.map_err(backend)?
            {
                out.push(map(&row)?);
            }
            Ok::<(), StoreError>(())
        }
        .await;
        stmt.reset();
        let mut reads = self.reads.borrow_mut();
        if reads.len() >= KEPT_READS {
            reads.clear();
        }
        reads.insert(sql.to_owned(), stmt);
        read.map(|()| out)
    }

    /// A workflow.
    pub fn workflow(&self, id: &str) -> StoreResult<Option<WorkflowRow>> {
        let sql = format!("SELECT {WORKFLOW_COLUMNS} FROM workflows WHERE id = ?1");
        let row =
            self.block(async { self.query_one(&sql, vec![id.into()], workflow_row).await })?;
        row.map(|row| self.resolved_row(row)).transpose()
    }

    /// A large value's JSON, by hash.
    pub fn blob(&self, hash: &str) -> StoreResult<Option<String>> {
        self.block(self.blob_of(hash.to_owned()))
    }

    async fn blob_of(&self, hash: String) -> StoreResult<Option<String>> {
        self.query_one(
            "SELECT value FROM blobs WHERE hash = ?1",
            vec![hash.into()],
            |row| get(row, 0),
        )
        .await
    }

    /// `text` with its large values put back ([`blobs`]).
    fn resolved(&self, text: String) -> StoreResult<String> {
        if !blobs::has_references(&text) {
            return Ok(text);
        }
        self.block(blobs::resolve_text(text, |hash| self.blob_of(hash)))
    }

    fn resolved_opt(&self, text: Option<String>) -> StoreResult<Option<String>> {
        text.map(|t| self.resolved(t)).transpose()
    }

    /// A workflow row with its large values put back.
    fn resolved_row(&self, mut row: WorkflowRow) -> StoreResult<WorkflowRow> {
        row.output = self.resolved_opt(row.output.take())?;
        row.error = self.resolved_opt(row.error.take())?;
        row.context = self.resolved_opt(row.context.take())?;
        Ok(row)
    }

    /// A source.
    pub fn source(&self, hash: &str) -> StoreResult<Option<Source>> {
        self.block(async {
            self.query_one(
                "SELECT hash, definition, program FROM sources WHERE hash = ?1",
                vec![hash.into()],
                |row| {
                    Ok(Source {
                        hash: get(row, 0)?,
                        definition: get(row, 1)?,
                        program: get(row, 2)?,
                    })
                },
            )
            .await
        })
    }

    /// Workflows, newest first.
    pub fn workflows(&self, filter: &WorkflowFilter) -> StoreResult<Vec<WorkflowRow>> {
        let (sql, params) = listed(
            listing::workflows(Dialect::Sqlite, WORKFLOW_COLUMNS, filter)
                .paged(filter.limit, filter.offset),
        );
        let rows = self.block(self.query_all(&sql, params, workflow_row))?;
        rows.into_iter().map(|row| self.resolved_row(row)).collect()
    }

    /// How many rows `listing` has, unpaged.
    pub fn count(&self, listing: &Listing) -> StoreResult<u64> {
        let (sql, params) = listed(listing::count(Dialect::Sqlite, WORKFLOW_COLUMNS, listing));
        let counted = self.block(self.query_one(&sql, params, |row| get::<i64>(row, 0)))?;
        Ok(counted.unwrap_or(0) as u64)
    }

    /// Log entries after `after_seq`.
    pub fn entries(
        &self,
        id: &str,
        after_seq: u64,
        inputs_only: bool,
    ) -> StoreResult<Vec<LogEntry>> {
        let filter = if inputs_only {
            " AND kind = 'input'"
        } else {
            ""
        };
        let sql = format!(
            "SELECT seq, at, kind, event_type, step_id, version, payload FROM events \
             WHERE workflow_id = ?1 AND seq > ?2{filter} ORDER BY seq"
        );
        let rows = self.block(
            self.query_all(&sql, vec![id.into(), seq(after_seq)], |row| {
                log_entry(row, 0)
            }),
        )?;
        folded::unfold_all(rows, after_seq, inputs_only)?
            .into_iter()
            .map(|mut e| {
                e.payload = self.resolved(std::mem::take(&mut e.payload))?;
                Ok(e)
            })
            .collect()
    }

    /// A workflow's step instances, their names and statuses only.
    pub fn step_statuses(&self, id: &str) -> StoreResult<Vec<StepRow>> {
        let sql = "SELECT step_id, status FROM step_state WHERE workflow_id = ?1 \
                   ORDER BY started_at, step_id";
        self.block(self.query_all(sql, vec![id.into()], |row| {
            Ok(StepRow {
                step_id: get(row, 0)?,
                status: get(row, 1)?,
                ..StepRow::default()
            })
        }))
    }

    /// A workflow's step instances, whole (their outputs and errors read
    /// back from blobs).
    pub fn steps(&self, id: &str) -> StoreResult<Vec<StepRow>> {
        let sql = "SELECT step_id, status, attempt, output, error, started_at, completed_at, \
                   duration_ms FROM step_state WHERE workflow_id = ?1 ORDER BY started_at, step_id";
        let steps = self.block(self.query_all(sql, vec![id.into()], |row| {
            Ok(StepRow {
                step_id: get(row, 0)?,
                status: get(row, 1)?,
                attempt: get::<i64>(row, 2)? as u32,
                output: get(row, 3)?,
                error: get(row, 4)?,
                started_at: get(row, 5)?,
                completed_at: get(row, 6)?,
                duration_ms: get(row, 7)?,
            })
        }))?;
        steps
            .into_iter()
            .map(|mut s| {
                s.output = self.resolved_opt(s.output.take())?;
                s.error = self.resolved_opt(s.error.take())?;
                Ok(s)
            })
            .collect()
    }

    /// Decisions.
    pub fn decisions(
        &self,
        workflow_id: Option<&str>,
        status: Option<DecisionStatus>,
    ) -> StoreResult<Vec<DecisionRow>> {
        self.decision_page(&DecisionFilter {
            workflow_id: workflow_id.map(str::to_owned),
            status,
            ..DecisionFilter::default()
        })
    }

    /// A page of the decisions `filter` names, oldest first.
    pub fn decision_page(&self, filter: &DecisionFilter) -> StoreResult<Vec<DecisionRow>> {
        let (sql, params) =
            listed(listing::decisions(Dialect::Sqlite, filter).paged(filter.limit, filter.offset));
        self.block(self.query_all(&sql, params, |row| {
            Ok(DecisionRow {
                workflow_id: get(row, 0)?,
                id: get(row, 1)?,
                step_id: get(row, 2)?,
                prompt: get(row, 3)?,
                context: get(row, 4)?,
                options: get(row, 5)?,
                fallback: get(row, 6)?,
                target_agent: get(row, 7)?,
                timeout_at: get(row, 8)?,
                status: get(row, 9)?,
                resolution: get(row, 10)?,
                resolved_by: get(row, 11)?,
                created_at: get(row, 12)?,
                resolved_at: get(row, 13)?,
            })
        }))
    }

    /// Earliest timer per workflow, soonest first.
    pub fn next_timers(&self, limit: u32) -> StoreResult<Vec<(String, String)>> {
        let sql = format!(
            "SELECT workflow_id, MIN(due_at) AS due FROM timers GROUP BY workflow_id \
             ORDER BY due LIMIT {limit}"
        );
        self.block(self.query_all(&sql, Vec::new(), |row| Ok((get(row, 0)?, get(row, 1)?))))
    }

    /// Leaves a message.
    pub fn send(&self, workflow_id: &str, event: &str, at: &str) -> StoreResult<i64> {
        self.block(async {
            self.conn
                .execute(
                    "INSERT INTO inbox (workflow_id, event, created_at) VALUES (?1, ?2, ?3)",
                    vec![Value::from(workflow_id), event.into(), at.into()],
                )
                .await
                .map_err(backend)?;
            Ok(self.conn.last_insert_rowid())
        })
    }

    /// Messages waiting.
    pub fn inbox(&self, workflow_id: Option<&str>) -> StoreResult<Vec<InboxMessage>> {
        let sql = "SELECT id, workflow_id, event, created_at FROM inbox \
                   WHERE (?1 IS NULL OR workflow_id = ?1) ORDER BY id";
        self.block(
            self.query_all(sql, vec![workflow_id.map(str::to_owned).into()], |row| {
                Ok(InboxMessage {
                    id: get(row, 0)?,
                    workflow_id: get(row, 1)?,
                    event: get(row, 2)?,
                    created_at: get(row, 3)?,
                })
            }),
        )
    }
}

async fn prepare(conn: &Connection) -> StoreResult<Writes> {
    let p = |sql: &'static str| async move { conn.prepare(sql).await.map_err(backend) };
    Ok(Writes {
        begin: p("BEGIN IMMEDIATE").await?,
        end: p("COMMIT").await?,
        savepoint: p("SAVEPOINT c").await?,
        release: p("RELEASE c").await?,
        rollback_to: p("ROLLBACK TO c").await?,
        add_source: p(
            "INSERT OR IGNORE INTO sources (hash, definition, program) VALUES (?1, ?2, ?3)",
        )
        .await?,
        add_blob: p("INSERT OR IGNORE INTO blobs (hash, value) VALUES (?1, ?2)").await?,
        create: p(
            "INSERT INTO workflows (id, name, source_hash, status, input_params, \
             agent_id, parent_workflow_id, template_name, template_version, base_dir, \
             last_seq, created_at, updated_at, output, error, context, started_at, \
             completed_at, lease_owner, lease_expires_at, lease_epoch) \
             VALUES (?1, ?2, ?3, COALESCE(?11, 'pending'), ?4, ?5, ?6, ?7, ?8, ?9, ?12, ?10, \
             COALESCE(?13, ?10), ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?19 IS NOT NULL) \
             ON CONFLICT (id) DO NOTHING",
        )
        .await?,
        rollback: p("ROLLBACK").await?,
        advance_and_update: p(concat!(
            "UPDATE workflows SET last_seq = ?3, status = ?4, output = ?5, error = ?6, \
             context = COALESCE(?7, context), started_at = COALESCE(started_at, ?8), \
             completed_at = COALESCE(?9, completed_at), updated_at = ?10 \
             WHERE id = ?1 AND ?2 = ",
            last_seq_sql!()
        ))
        .await?,
        update_workflow: p(
            "UPDATE workflows SET status = ?2, output = ?3, error = ?4, \
             context = COALESCE(?5, context), started_at = COALESCE(started_at, ?6), \
             completed_at = COALESCE(?7, completed_at), updated_at = ?8 WHERE id = ?1",
        )
        .await?,
        set_timer: p(
            "INSERT OR REPLACE INTO timers (workflow_id, timer_id, due_at, purpose, \
                      step_id) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .await?,
        clear_timer: p("DELETE FROM timers WHERE workflow_id = ?1 AND timer_id = ?2").await?,
        ask: p(
            "INSERT OR REPLACE INTO pending_decisions (workflow_id, id, step_id, prompt, \
                context, options, fallback, target_agent_id, timeout_at, status, created_at) \
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'pending', ?10)",
        )
        .await?,
        settle: p(
            "UPDATE pending_decisions SET status = ?3, resolution = ?4, resolved_by = ?5, \
                   resolved_at = ?6 WHERE workflow_id = ?1 AND id = ?2 AND status = 'pending'",
        )
        .await?,
        take_inbox: p("DELETE FROM inbox WHERE id = ?1").await?,
        see_agent: p(catalog::SEE_AGENT).await?,
        take_lease: p(
            "UPDATE workflows SET lease_owner = ?2, lease_expires_at = ?3, \
             lease_epoch = lease_epoch + (lease_owner IS NOT ?2) WHERE id = ?1",
        )
        .await?,
        release_lease: p(
            "UPDATE workflows SET lease_owner = NULL, lease_expires_at = NULL \
             WHERE id = ?1 AND lease_owner = ?2",
        )
        .await?,
    })
}

/// Executes a prepared statement and resets it for the next use.
async fn run(stmt: &Statement, params: Vec<Value>) -> StoreResult<usize> {
    let result = stmt.execute(params).await.map_err(backend);
    stmt.reset();
    result
}

/// A listing's query as libSQL takes it.
fn listed(query: listing::Query<'_>) -> (String, Vec<Value>) {
    let params = query
        .params
        .iter()
        .map(|p| Value::from(p.as_ref()))
        .collect();
    (query.sql, params)
}

/// Creates `path` empty with mode 0600 unless it exists.
fn create_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        made => made.map(drop),
    }
}

fn seq(n: u64) -> Value {
    Value::Integer(n as i64)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A connection of its own to the database at `path`, as another
    /// process would open it.
    pub(super) async fn another_connection(path: &Path) -> Connection {
        libsql::Builder::new_local(path)
            .build()
            .await
            .unwrap()
            .connect()
            .unwrap()
    }

    #[test]
    fn a_new_database_and_its_wal_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("private.db");
        let _db = Db::open(&path, Durability::Normal).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir.path().join("private.db-wal")), 0o600);
    }

    /// The writer skips the schema's CHECKs (decision 0040); another
    /// connection to the file still has them refuse a bad value.
    #[test]
    fn only_the_writer_skips_the_checks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checks.db");
        let db = Db::open(&path, Durability::Normal).unwrap();
        let pragma = "PRAGMA ignore_check_constraints";
        let skipped = db.block(db.query_one(pragma, vec![], |row| get::<i64>(row, 0)));
        assert_eq!(skipped.unwrap(), Some(1));
        let bad = "INSERT INTO events (workflow_id, seq, at, kind, event_type, version, payload) \
                   VALUES ('w', 1, 'a', 'bogus', 't', 1, '{}')";
        let other = db.block(async { another_connection(&path).await.execute(bad, ()).await });
        assert!(
            other
                .unwrap_err()
                .to_string()
                .contains("CHECK constraint failed")
        );
    }
}
