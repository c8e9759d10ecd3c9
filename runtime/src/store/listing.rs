//! The queries of listings (`opcode.query`, the panel), written once for
//! both SQL backends: each builder takes the [`Dialect`] and gives a
//! [`Query`], its SQL and its parameters (all text), unpaged; a backend
//! pages it ([`Query::paged`]) or counts it (`catalog::count_query`).

use std::borrow::Cow;
use std::fmt::Write as _;

use super::catalog::count_query;
use super::folded::{self, FOLDED};
use super::{
    DecisionFilter, DecisionStatus, EventFilter, Listing, PrunedFilter, TemplateFilter,
    WorkflowFilter,
};

/// The columns of a template row, in the order backends read them.
pub const TEMPLATE_COLUMNS: &str = "name, version, description, definition, input_schema, \
     output_schema, triggers, agent_id, created_at";

/// The columns of a pruned run's tombstone, in the order backends read them.
pub const PRUNED_COLUMNS: &str = "id, name, template_name, template_version, status, agent_id, \
     parent_workflow_id, created_at, completed_at, pruned_at, export";

/// The columns of a log entry across runs (`log_entries`, decision 0050).
const ENTRY_COLUMNS: &str = "workflow_id, seq, at, kind, event_type, step_id, version, payload";

/// The columns of a decision.
const DECISION_COLUMNS: &str = "workflow_id, id, step_id, prompt, context, options, fallback, \
     target_agent_id, timeout_at, status, resolution, resolved_by, created_at, resolved_at";

/// Where SQLite's and PostgreSQL's SQL differ in a listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// libSQL: `?N` parameters, `instr`.
    Sqlite,
    /// PostgreSQL: `$N` parameters, `strpos`.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Postgres,
}

impl Dialect {
    /// Parameter `n` (from 1).
    fn param(self, n: usize) -> String {
        match self {
            Dialect::Sqlite => format!("?{n}"),
            Dialect::Postgres => format!("${n}"),
        }
    }

    /// Every entry the rows of `source` (the columns of `events`) keep,
    /// as the view `log_entries` unfolds them (its migration has the same
    /// SQL).
    fn unfolded(self, source: &str) -> String {
        let single = format!(
            "SELECT {ENTRY_COLUMNS} FROM {source} WHERE event_type <> 'entries' UNION ALL "
        );
        let folded = match self {
            Dialect::Sqlite => format!(
                "SELECT e.workflow_id, e.seq - json_array_length(e.payload) + 1 + j.key, e.at, \
                 j.value ->> 'kind', j.value ->> 'event_type', j.value ->> 'step_id', \
                 j.value ->> 'version', j.value -> 'payload' \
                 FROM {source} AS e, json_each(e.payload) AS j WHERE e.event_type = 'entries'"
            ),
            Dialect::Postgres => format!(
                "SELECT e.workflow_id, e.seq - json_array_length(e.payload::json) + j.ord, e.at, \
                 j.value ->> 'kind', j.value ->> 'event_type', j.value ->> 'step_id', \
                 (j.value ->> 'version')::integer, (j.value -> 'payload')::text \
                 FROM {source} AS e CROSS JOIN LATERAL json_array_elements(e.payload::json) \
                 WITH ORDINALITY AS j (value, ord) WHERE e.event_type = 'entries'"
            ),
        };
        single + &folded
    }

    /// Whether `column` holds the text of parameter `n`.
    fn contains(self, column: &str, n: usize) -> String {
        self.contains_param(column, &self.param(n))
    }

    /// Whether `column` holds the text of `param` (`?N`/`$N`).
    fn contains_param(self, column: &str, param: &str) -> String {
        match self {
            Dialect::Sqlite => format!("instr({column}, {param}) > 0"),
            Dialect::Postgres => format!("strpos({column}, {param}) > 0"),
        }
    }
}

/// A listing's query and its parameters, `?N`/`$N` in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query<'f> {
    /// The SQL.
    pub sql: String,
    /// Its parameters.
    pub params: Vec<Cow<'f, str>>,
    dialect: Dialect,
}

impl<'f> Query<'f> {
    /// `SELECT columns FROM table`, every row.
    fn select(dialect: Dialect, columns: &str, table: &str) -> Query<'f> {
        Query {
            sql: format!("SELECT {columns} FROM {table} WHERE TRUE"),
            params: Vec::new(),
            dialect,
        }
    }

    /// The next parameter, `value`.
    fn param(&mut self, value: impl Into<Cow<'f, str>>) -> String {
        self.params.push(value.into());
        self.dialect.param(self.params.len())
    }

    /// Only rows whose `column` meets `op value`, when a value is given.
    fn and(&mut self, column: &str, op: &str, value: Option<&'f str>) {
        if let Some(value) = value {
            let param = self.param(value);
            let _ = write!(self.sql, " AND {column} {op} {param}");
        }
    }

    /// Only rows that meet `condition`, which reads the parameter given.
    fn and_where(&mut self, value: &'f str, condition: impl FnOnce(Dialect, usize) -> String) {
        self.params.push(value.into());
        let condition = condition(self.dialect, self.params.len());
        let _ = write!(self.sql, " AND {condition}");
    }

    /// In this order.
    fn ordered(mut self, by: &str) -> Query<'f> {
        let _ = write!(self.sql, " ORDER BY {by}");
        self
    }

    /// How many rows the query gives (one with a `WITH` counts its
    /// result; others count from their own `FROM`, so their indexes serve).
    fn counted(mut self) -> Query<'f> {
        self.sql = if self.sql.starts_with("WITH ") {
            let rows = self
                .sql
                .rfind(" ORDER BY ")
                .map_or(self.sql.as_str(), |at| &self.sql[..at]);
            format!("SELECT COUNT(*) FROM ({rows}) AS listed")
        } else {
            count_query(&self.sql)
        };
        self
    }

    /// At most `limit` rows after the first `offset` (SQLite needs a
    /// `LIMIT` to take an `OFFSET`).
    pub fn paged(mut self, limit: Option<u32>, offset: u32) -> Query<'f> {
        match (limit, offset, self.dialect) {
            (None, 0, _) => {}
            (None, offset, Dialect::Sqlite) => {
                let _ = write!(self.sql, " LIMIT -1 OFFSET {offset}");
            }
            (None, offset, Dialect::Postgres) => {
                let _ = write!(self.sql, " OFFSET {offset}");
            }
            (Some(limit), offset, _) => {
                let _ = write!(self.sql, " LIMIT {limit} OFFSET {offset}");
            }
        }
        self
    }
}

/// The query of `listing`, unpaged; `workflow_columns` as the backend
/// reads a workflow row.
fn of<'f>(d: Dialect, workflow_columns: &str, listing: &'f Listing) -> Query<'f> {
    match listing {
        Listing::Workflows(filter) => workflows(d, workflow_columns, filter),
        Listing::Templates(filter) => templates(d, filter),
        Listing::Entries(filter) => entries(d, filter),
        Listing::Pruned(filter) => pruned(d, filter),
        Listing::Decisions(filter) => decisions(d, filter),
    }
}

/// Workflows newest first; `columns` as the backend reads a row.
pub fn workflows<'f>(d: Dialect, columns: &str, filter: &'f WorkflowFilter) -> Query<'f> {
    let mut q = Query::select(d, columns, "workflows");
    if !filter.statuses.is_empty() {
        let marks: Vec<String> = filter
            .statuses
            .iter()
            .map(|s| q.param(s.as_str()))
            .collect();
        let _ = write!(q.sql, " AND status IN ({})", marks.join(", "));
    }
    q.and("agent_id", "=", filter.agent_id.as_deref());
    q.and("template_name", "=", filter.template_name.as_deref());
    q.and("parent_workflow_id", "=", filter.parent_id.as_deref());
    q.and("created_at", ">=", filter.since.as_deref());
    q.and("created_at", "<", filter.until.as_deref());
    if let Some(part) = &filter.id_contains {
        q.and_where(part, |d, n| d.contains("id", n));
    }
    q.ordered("created_at DESC, id")
}

/// Templates by name, newest version first.
pub fn templates(d: Dialect, filter: &TemplateFilter) -> Query<'_> {
    let mut q = Query::select(d, TEMPLATE_COLUMNS, "workflow_templates t");
    q.and("name", "=", filter.name.as_deref());
    q.and("agent_id", "=", filter.agent_id.as_deref());
    if filter.latest_only {
        q.sql.push_str(
            " AND version = (SELECT MAX(version) FROM workflow_templates u \
             WHERE u.name = t.name)",
        );
    }
    q.ordered("name, version DESC")
}

/// Log entries: one workflow's in log order (every entry unfolded:
/// `log_entries`), else newest first ([`across_runs`]).
pub fn entries(d: Dialect, filter: &EventFilter) -> Query<'_> {
    let Some(id) = filter.workflow_id.as_deref() else {
        return across_runs(d, filter, None);
    };
    let mut q = Query::select(d, ENTRY_COLUMNS, "log_entries");
    q.and("workflow_id", "=", Some(id));
    q.and("event_type", "=", filter.event_type.as_deref());
    q.and("step_id", "=", filter.step_id.as_deref());
    q.and("at", ">=", filter.since.as_deref());
    q.ordered("seq")
}

/// The page of log entries `filter` asks for (see [`entries`]). A page of
/// the newest entries of every run, filtered by time at most, unfolds only
/// the newest `offset + limit` rows: each holds one entry or more, all of
/// its time (decision 0050).
pub fn entries_page(d: Dialect, filter: &EventFilter) -> Query<'_> {
    let by_time_only =
        filter.workflow_id.is_none() && filter.event_type.is_none() && filter.step_id.is_none();
    let query = match (by_time_only, filter.limit) {
        (true, Some(limit)) => {
            across_runs(d, filter, Some(u64::from(filter.offset) + u64::from(limit)))
        }
        _ => entries(d, filter),
    };
    query.paged(filter.limit, filter.offset)
}

/// Entries of every run, newest first, unfolding only the rows that can
/// hold them: a folded row is read only when its payload has the name and
/// step asked for (as [`folded::field`] writes them; a payload holding
/// that text elsewhere only costs its parse, the entries are filtered
/// exactly after); with `newest`, only that many newest rows.
fn across_runs(d: Dialect, filter: &EventFilter, newest: Option<u64>) -> Query<'_> {
    let mut q = Query {
        sql: String::from("WITH candidate AS (SELECT * FROM events WHERE TRUE"),
        params: Vec::new(),
        dialect: d,
    };
    for (column, value) in [
        ("event_type", filter.event_type.as_deref()),
        ("step_id", filter.step_id.as_deref()),
    ] {
        if let Some(value) = value {
            let alone = q.param(value);
            let folded = q.param(folded::field(column, value));
            let holds = d.contains_param("payload", &folded);
            let _ = write!(
                q.sql,
                " AND ({column} = {alone} OR (event_type = '{FOLDED}' AND {holds}))"
            );
        }
    }
    q.and("at", ">=", filter.since.as_deref());
    if let Some(rows) = newest {
        let _ = write!(
            q.sql,
            " ORDER BY at DESC, workflow_id, seq DESC LIMIT {rows}"
        );
    }
    let _ = write!(
        q.sql,
        "), unfolded AS ({}) SELECT {ENTRY_COLUMNS} FROM unfolded WHERE TRUE",
        d.unfolded("candidate")
    );
    q.and("event_type", "=", filter.event_type.as_deref());
    q.and("step_id", "=", filter.step_id.as_deref());
    q.ordered("at DESC, workflow_id, seq DESC")
}

/// The query counting the rows of `listing`. Every entry of every run is
/// counted from the runs' last sequences (a log is numbered from 1 without
/// gaps), without reading a payload.
pub fn count<'f>(d: Dialect, workflow_columns: &str, listing: &'f Listing) -> Query<'f> {
    match listing {
        Listing::Entries(EventFilter {
            workflow_id: None,
            event_type: None,
            step_id: None,
            since: None,
            ..
        }) => Query {
            sql: String::from(
                "SELECT CAST(COALESCE(SUM(last), 0) AS BIGINT) FROM \
                 (SELECT MAX(seq) AS last FROM events GROUP BY workflow_id) AS runs",
            ),
            params: Vec::new(),
            dialect: d,
        },
        _ => of(d, workflow_columns, listing).counted(),
    }
}

/// Pruned runs' tombstones, most recently pruned first.
pub fn pruned(d: Dialect, filter: &PrunedFilter) -> Query<'_> {
    let mut q = Query::select(d, PRUNED_COLUMNS, "pruned_runs");
    q.and("id", "=", filter.id.as_deref());
    q.and("template_name", "=", filter.template_name.as_deref());
    q.ordered("pruned_at DESC, id")
}

/// Decisions oldest first: only the filters given, so the key and the
/// status index serve.
pub fn decisions(d: Dialect, filter: &DecisionFilter) -> Query<'_> {
    let mut q = Query::select(d, DECISION_COLUMNS, "pending_decisions");
    q.and("workflow_id", "=", filter.workflow_id.as_deref());
    q.and("status", "=", filter.status.map(DecisionStatus::as_str));
    if let Some(agent) = &filter.agent_id {
        q.and_where(agent, |d, n| {
            format!(
                "(target_agent_id IS NULL OR target_agent_id = {})",
                d.param(n)
            )
        });
    }
    q.ordered("created_at, workflow_id, id")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::WorkflowStatus;

    #[test]
    fn one_builder_writes_both_dialects() {
        let filter = WorkflowFilter {
            statuses: vec![WorkflowStatus::Active, WorkflowStatus::Failed],
            agent_id: Some("a".into()),
            id_contains: Some("x".into()),
            ..WorkflowFilter::default()
        };
        let lite = workflows(Dialect::Sqlite, "id", &filter).paged(None, 5);
        assert_eq!(
            lite.sql,
            "SELECT id FROM workflows WHERE TRUE AND status IN (?1, ?2) AND agent_id = ?3 \
             AND instr(id, ?4) > 0 ORDER BY created_at DESC, id LIMIT -1 OFFSET 5"
        );
        assert_eq!(lite.params, ["active", "failed", "a", "x"]);
        let pg = workflows(Dialect::Postgres, "id", &filter).paged(Some(2), 0);
        assert_eq!(
            pg.sql,
            "SELECT id FROM workflows WHERE TRUE AND status IN ($1, $2) AND agent_id = $3 \
             AND strpos(id, $4) > 0 ORDER BY created_at DESC, id LIMIT 2 OFFSET 0"
        );
    }
}
