//! What the daemon keeps beside the log: templates, agents, and the filters
//! of `opcode.query`.

use super::{DecisionStatus, LogEntry, PrunedFilter, WorkflowFilter};

/// A template to register; the store gives it the next version.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TemplateDraft {
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The workflow source (wrapper JSON text, as compiled).
    pub definition: String,
    /// `input_schema`, as JSON text.
    pub input_schema: Option<String>,
    /// `output_schema`, as JSON text.
    pub output_schema: Option<String>,
    /// `triggers`, as JSON text.
    pub triggers: String,
    /// The agent that defined it.
    pub agent_id: Option<String>,
    /// When (RFC 3339).
    pub at: String,
}

/// A stored template version.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TemplateRow {
    /// Its name.
    pub name: String,
    /// Its version: 1, 2, 3… per name.
    pub version: i64,
    /// What it does.
    pub description: String,
    /// The workflow source.
    pub definition: String,
    /// `input_schema`, as JSON text.
    pub input_schema: Option<String>,
    /// `output_schema`, as JSON text.
    pub output_schema: Option<String>,
    /// `triggers`, as JSON text.
    pub triggers: String,
    /// The agent that defined it.
    pub agent_id: Option<String>,
    /// When it was defined.
    pub created_at: String,
}

/// Which templates to list: by name, then newest version first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TemplateFilter {
    /// Only this name.
    pub name: Option<String>,
    /// Only those defined by this agent.
    pub agent_id: Option<String>,
    /// Only the newest version of each name.
    pub latest_only: bool,
    /// At most this many.
    pub limit: Option<u32>,
    /// After skipping this many.
    pub offset: u32,
}

/// Which log entries to find, across workflows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventFilter {
    /// Only this workflow's (then in log order; else newest first).
    pub workflow_id: Option<String>,
    /// Only this `event_type`.
    pub event_type: Option<String>,
    /// Only this step instance's.
    pub step_id: Option<String>,
    /// Only entries at or after this time (RFC 3339).
    pub since: Option<String>,
    /// At most this many.
    pub limit: Option<u32>,
    /// After skipping this many.
    pub offset: u32,
}

/// Which decisions to list, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DecisionFilter {
    /// Only this workflow's.
    pub workflow_id: Option<String>,
    /// Only those of this status.
    pub status: Option<DecisionStatus>,
    /// Only those this agent may answer: meant for it, or for anyone.
    pub agent_id: Option<String>,
    /// At most this many.
    pub limit: Option<u32>,
    /// After skipping this many.
    pub offset: u32,
}

/// A log entry with its workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundEntry {
    /// The workflow.
    pub workflow_id: String,
    /// The entry.
    pub entry: LogEntry,
}

/// A scheduled job: a template run on a cron schedule.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScheduleRow {
    /// Its id.
    pub id: String,
    /// The template it runs.
    pub template_name: String,
    /// A fixed version (`None`: the newest at each run).
    pub template_version: Option<i64>,
    /// The cron expression.
    pub cron: String,
    /// The IANA timezone its fields are read in.
    pub timezone: String,
    /// The run params, JSON text.
    pub params: String,
    /// The agent runs are started as.
    pub agent_id: Option<String>,
    /// Does it fire?
    pub enabled: bool,
    /// `run_once` or `skip`: what happens to fire times missed while down.
    pub missed: String,
    /// The last fire time (RFC 3339).
    pub last_run_at: Option<String>,
    /// The next fire time (RFC 3339).
    pub next_run_at: Option<String>,
    /// The last run's status: its workflow's (`completed`, `failed`…), or
    /// `skipped` / `error: …` when nothing ran.
    pub last_run_status: Option<String>,
    /// The last run's workflow.
    pub last_workflow_id: Option<String>,
    /// `cli` or `trigger` (a template's `triggers.cron`).
    pub origin: String,
    /// When it was created.
    pub created_at: String,
}

/// A scheduled job's move to its next fire time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleAdvance {
    /// The job.
    pub id: String,
    /// The `next_run_at` the caller saw; nothing changes if it moved.
    pub expected_next: Option<String>,
    /// The new `next_run_at`.
    pub next_run_at: Option<String>,
    /// The fire time just handled, if one was.
    pub last_run_at: Option<String>,
    /// The workflow started for it, if one was.
    pub last_workflow_id: Option<String>,
    /// The status to record, if any.
    pub last_run_status: Option<String>,
}

/// How the vault's key is derived, and a value sealed with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VaultHeader {
    /// The random per-install PBKDF2 salt.
    pub salt: Vec<u8>,
    /// PBKDF2 iterations.
    pub iterations: u32,
    /// A known text sealed with the key: opening it proves the passphrase.
    pub check: Vec<u8>,
    /// When the vault was created.
    pub created_at: String,
}

/// A sealed secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRow {
    /// Its name.
    pub name: String,
    /// Nonce, ciphertext and tag.
    pub sealed: Vec<u8>,
    /// When it was first set.
    pub created_at: String,
    /// When it was last set.
    pub updated_at: String,
}

/// A listing of `opcode.query`, whose rows [`super::Catalog::count`]
/// counts (its page ignored): what lets a page say how many there are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listing {
    /// [`super::EventStore::workflows`].
    Workflows(WorkflowFilter),
    /// [`super::Catalog::templates`].
    Templates(TemplateFilter),
    /// [`super::Catalog::find_entries`].
    Entries(EventFilter),
    /// [`super::Catalog::pruned`].
    Pruned(PrunedFilter),
    /// [`super::Catalog::decision_page`].
    Decisions(DecisionFilter),
}

/// The query counting the rows of a listing's query (`SELECT columns
/// FROM … [ORDER BY …]`): the same rows, without reading their columns
/// (a column may be a subquery with a `FROM` of its own) or ordering them,
/// so that an index can answer it. (The SQL stores use it.)
#[cfg(any(feature = "libsql", feature = "postgres"))]
pub(crate) fn count_query(listing: &str) -> String {
    let from = outer(listing, " FROM ").map_or(listing, |at| &listing[at..]);
    let rows = from.rfind(" ORDER BY ").map_or(from, |at| &from[..at]);
    format!("SELECT COUNT(*){rows}")
}

/// Where `word` first occurs in `sql` outside parentheses.
#[cfg(any(feature = "libsql", feature = "postgres"))]
fn outer(sql: &str, word: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (at, c) in sql.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 && sql[at..].starts_with(word) => return Some(at),
            _ => {}
        }
    }
    None
}

/// What `opcode doctor` asks a store about itself.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoreHealth {
    /// The schema version the database is at.
    pub schema_version: i64,
    /// The journal mode (`wal` for a libSQL file; `None` for a server).
    pub journal_mode: Option<String>,
    /// How commits are synced (`normal`, `full`; `None` for a server,
    /// whose durability is its own).
    pub synchronous: Option<String>,
    /// When the newest run was created (RFC 3339), if there is one.
    pub newest_run_at: Option<String>,
    /// The store's clock now (RFC 3339): a server's, or this process's.
    pub clock: String,
}

#[cfg(all(test, any(feature = "libsql", feature = "postgres")))]
mod tests {
    use super::count_query;

    #[test]
    fn a_count_reads_no_columns_and_keeps_no_order() {
        assert_eq!(
            count_query(
                "SELECT id, name FROM workflows WHERE status = ?1 ORDER BY created_at DESC, id"
            ),
            "SELECT COUNT(*) FROM workflows WHERE status = ?1"
        );
        assert_eq!(
            count_query(
                "SELECT name FROM workflow_templates t WHERE TRUE AND version = (SELECT MAX(version) \
                 FROM workflow_templates u WHERE u.name = t.name) ORDER BY name, version DESC"
            ),
            "SELECT COUNT(*) FROM workflow_templates t WHERE TRUE AND version = (SELECT MAX(version) \
             FROM workflow_templates u WHERE u.name = t.name)"
        );
        assert_eq!(
            count_query(
                "SELECT id, (SELECT max(seq) FROM events WHERE workflow_id = workflows.id) \
                 FROM workflows WHERE status = ?1 ORDER BY created_at DESC"
            ),
            "SELECT COUNT(*) FROM workflows WHERE status = ?1"
        );
    }
}
