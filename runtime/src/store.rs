//! The event store: where runs live.
//!
//! [`EventStore`] is the contract; [`libsql::LibsqlStore`] (an embedded
//! file, the default) and [`memory::MemoryStore`] (tests) implement it. The
//! log of a workflow is its sequence of [`LogEntry`]s; every other table
//! (workflow status, step state, timers, decisions) is derived from it and
//! written in the same [`Commit`], so they never disagree. The contract fits
//! a shared SQL server too: appends are compare-and-set on the last sequence
//! number, and ownership is a lease row, so nothing assumes one writer.
//! `spec/events.md` documents the schema.

pub mod blobs;
mod catalog;
pub mod commit;
mod delegated;
mod entry;
mod flow;
#[cfg(any(feature = "libsql", feature = "postgres"))]
mod folded;
#[cfg(feature = "libsql")]
pub mod libsql;
#[cfg(any(feature = "libsql", feature = "postgres"))]
mod listing;
pub mod memory;
mod notice;
#[cfg(feature = "postgres")]
pub mod postgres;
mod registry;
mod retention;
#[cfg(feature = "libsql")]
mod schema;
#[cfg(any(feature = "libsql", feature = "postgres"))]
mod slots;
mod status;

/// The schema version this build writes (see `spec/events.md`).
#[cfg(feature = "libsql")]
pub use schema::LATEST as SCHEMA_VERSION;

pub use delegated::{SessionTurn, Sessions, Transcript, Transcripts, WorktreeLease, Worktrees};
pub use entry::{EntryKind, EventName, LogEntry, NewEntry};
pub use flow::{Admission, Admitted, Debounced, PendingStart, RateCall, Rated, Slots, Standing};
pub use notice::Notice;
pub use registry::{AgentEval, AgentRelease, Published, Registry, SkillText};
pub use retention::{Expiry, Prune, PrunedFilter, PrunedRow};
pub use status::{DecisionStatus, WorkflowStatus};

pub use catalog::{
    DecisionFilter, EventFilter, FoundEntry, Listing, ScheduleAdvance, ScheduleRow, SecretRow,
    StoreHealth, TemplateDraft, TemplateFilter, TemplateRow, VaultHeader,
};

use std::future::Future;
use std::time::Duration;

pub use opcode_vm::StepStatus;
use std::pin::Pin;

/// A boxed future, so the trait stays object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What store calls return.
pub type StoreResult<T> = Result<T, StoreError>;

/// Why a store call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// No such workflow.
    #[error("workflow `{0}` not found")]
    NotFound(String),
    /// A workflow with this id exists already.
    #[error("workflow `{0}` already exists")]
    Exists(String),
    /// Someone else appended first: the writer's view is stale.
    #[error("workflow `{id}` moved on: expected its log to end at {expected}, it ends at {actual}")]
    Conflict {
        /// The workflow.
        id: String,
        /// The sequence the writer appended after.
        expected: u64,
        /// The log's real last sequence.
        actual: u64,
    },
    /// The writer's lease on the workflow moved on (another process took
    /// it over): the writer must stop writing it.
    #[error("workflow `{0}` is owned by another writer now: this writer's lease moved on")]
    Fenced(String),
    /// The run was created from what its writer took for the latest
    /// version of its template, and a newer one exists.
    #[error("template `{0}` has a newer version")]
    Outdated(String),
    /// The database was written by a newer build.
    #[error("the database has schema version {found}; this build knows versions up to {known}")]
    Schema {
        /// The version found.
        found: i64,
        /// The newest version this build knows.
        known: i64,
    },
    /// The database failed.
    #[error("the store failed: {0}")]
    Backend(String),
    /// The store has shut down.
    #[error("the store is closed")]
    Closed,
}

/// How hard a commit is made durable (SQLite's `synchronous`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// WAL with `synchronous=NORMAL`: a commit survives a crash of the
    /// process; the last commits before a power loss or OS crash may be lost
    /// (never corrupted).
    #[default]
    Normal,
    /// `synchronous=FULL`: every commit is fsynced before it returns, so it
    /// survives power loss too.
    Full,
}

impl Durability {
    /// The setting's name (`normal`, `full`).
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Normal => "normal",
            Durability::Full => "full",
        }
    }
}

/// A workflow's source and compiled program. Runs of one template share
/// one row: it is keyed by the SHA-256 of the source.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Source {
    /// SHA-256 of `definition`, hex (the Program header's `source_hash`).
    pub hash: String,
    /// The source (JSON text).
    pub definition: String,
    /// The compiled Program (a cache: the definition is recompiled when the
    /// Program's format is not this build's).
    pub program: Vec<u8>,
}

/// A workflow to create.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewWorkflow {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its source and program (stored once per distinct source).
    pub source: Source,
    /// The inputs (JSON text).
    pub inputs: String,
    /// The agent that started it.
    pub agent_id: Option<String>,
    /// The parent run.
    pub parent_id: Option<String>,
    /// The template it came from.
    pub template_name: Option<String>,
    /// The template version.
    pub template_version: Option<i64>,
    /// Created from the latest version of its template: the creating
    /// commit is refused ([`StoreError::Outdated`]) if a newer one exists,
    /// so a writer may take "the latest" from a cache.
    pub template_latest: bool,
    /// The directory relative paths of its actions resolve against.
    pub base_dir: Option<String>,
    /// When (RFC 3339).
    pub created_at: String,
}

/// A workflow with its step instances and pending decisions, read at once.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkflowState {
    /// The workflow.
    pub workflow: WorkflowRow,
    /// Its step instances.
    pub steps: Vec<StepRow>,
    /// Its decisions still pending.
    pub pending_decisions: Vec<DecisionRow>,
}

/// A workflow as stored.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkflowRow {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// The hash of its source (see [`EventStore::source`]).
    pub source_hash: String,
    /// Its status.
    pub status: WorkflowStatus,
    /// The inputs (JSON text).
    pub inputs: String,
    /// The output (JSON text), once completed.
    pub output: Option<String>,
    /// Why it failed (JSON text).
    pub error: Option<String>,
    /// The `context` namespace (JSON text).
    pub context: Option<String>,
    /// The agent that started it.
    pub agent_id: Option<String>,
    /// The parent run.
    pub parent_id: Option<String>,
    /// The template it came from.
    pub template_name: Option<String>,
    /// The template version.
    pub template_version: Option<i64>,
    /// Where relative paths resolve.
    pub base_dir: Option<String>,
    /// The last sequence number of its log.
    pub last_seq: u64,
    /// Created (RFC 3339).
    pub created_at: String,
    /// Started.
    pub started_at: Option<String>,
    /// Ended.
    pub completed_at: Option<String>,
    /// Last changed.
    pub updated_at: String,
}

/// The derived state of a workflow after a commit.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkflowUpdate {
    /// The status.
    pub status: WorkflowStatus,
    /// The output (JSON text).
    pub output: Option<String>,
    /// The error (JSON text).
    pub error: Option<String>,
    /// The context, when it changed (JSON text).
    pub context: Option<String>,
    /// Set when the run started in this commit.
    pub started_at: Option<String>,
    /// Set when the run ended in this commit.
    pub completed_at: Option<String>,
    /// Now.
    pub updated_at: String,
}

/// How much of each step row a read of a run's state needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepDetail {
    /// Every column, outputs and errors included.
    Whole,
    /// The instance name and status; a store may leave the rest empty (a
    /// caller that shows the counts of steps by status, not the steps).
    StatusOnly,
}

/// The state of one step instance.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StepRow {
    /// The instance name (`fetch`, `review[2]`).
    pub step_id: String,
    /// Its status.
    pub status: StepStatus,
    /// Attempts started.
    pub attempt: u32,
    /// Output (JSON text).
    pub output: Option<String>,
    /// Error (JSON text).
    pub error: Option<String>,
    /// First started (kept from the first write).
    pub started_at: Option<String>,
    /// Ended.
    pub completed_at: Option<String>,
    /// Milliseconds from start to end.
    pub duration_ms: Option<i64>,
}

/// A durable timer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerRow {
    /// The VM's timer id.
    pub timer_id: u64,
    /// When it fires (RFC 3339).
    pub due_at: String,
    /// Why (`retry`, `decision_timeout`…).
    pub purpose: String,
    /// The step instance.
    pub step_id: Option<String>,
}

/// A decision the run asks for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DecisionRow {
    /// The decision id (the step instance name).
    pub id: String,
    /// The workflow.
    pub workflow_id: String,
    /// The reasoning step's id.
    pub step_id: String,
    /// The question.
    pub prompt: String,
    /// The options (JSON array).
    pub options: String,
    /// Data for the decider (JSON).
    pub context: String,
    /// The option chosen on timeout.
    pub fallback: Option<String>,
    /// Who should decide.
    pub target_agent: Option<String>,
    /// When it times out (RFC 3339).
    pub timeout_at: Option<String>,
    /// Its status.
    pub status: DecisionStatus,
    /// The resolution (JSON).
    pub resolution: Option<String>,
    /// Who resolved it.
    pub resolved_by: Option<String>,
    /// When it was asked (RFC 3339).
    pub created_at: String,
    /// When it stopped pending.
    pub resolved_at: Option<String>,
}

/// A change to the decisions table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecisionChange {
    /// A new pending decision.
    Ask(Box<DecisionRow>),
    /// A pending decision ends.
    Settle {
        /// The decision id.
        id: String,
        /// `Resolved`, `TimedOut` or `Cancelled`.
        status: DecisionStatus,
        /// The resolution (JSON).
        resolution: Option<String>,
        /// Who.
        resolved_by: Option<String>,
        /// When.
        at: String,
    },
}

/// A change to the timers table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimerChange {
    /// A timer starts.
    Set(TimerRow),
    /// A timer fired or was cancelled.
    Clear(u64),
}

/// One large value kept by hash ([`blobs`] outlines them): the hash
/// of its text, and the text (which may itself hold references to the
/// large values inside it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// `sha256:` and the hex digest of `text`.
    pub hash: String,
    /// The value's JSON.
    pub text: String,
}

/// Everything one scheduling round of one workflow writes, atomically.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Commit {
    /// The workflow.
    pub workflow_id: String,
    /// Create the workflow first.
    pub create: Option<NewWorkflow>,
    /// The log's last sequence the writer saw; the entries get the next ones.
    pub after_seq: u64,
    /// Entries to append.
    pub entries: Vec<NewEntry>,
    /// Large values the commit's JSON refers to ([`blobs`]), kept
    /// once each by hash.
    pub blobs: Vec<Blob>,
    /// The workflow's derived state.
    pub update: Option<WorkflowUpdate>,
    /// Step instances that changed.
    pub steps: Vec<StepRow>,
    /// Timers that started or ended.
    pub timers: Vec<TimerChange>,
    /// Decisions asked or settled.
    pub decisions: Vec<DecisionChange>,
    /// Inbox messages this commit consumed.
    pub inbox_taken: Vec<i64>,
    /// A lease taken or given up with this commit, saving a write of its own.
    pub lease: Option<LeaseChange>,
    /// The lease the writer holds: the commit is refused
    /// ([`StoreError::Fenced`]) unless the workflow's lease is still it.
    pub fence: Option<Fence>,
}

/// A lease as its holder knows it: who, and which grant. Every grant to a
/// writer that did not hold the lease has the next epoch, so a writer that
/// lost its lease while paused cannot write, even after the lease was
/// given up again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// The owner.
    pub owner: String,
    /// The grant.
    pub epoch: u64,
}

/// A lease change that rides along with a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseChange {
    /// The creator of a new workflow owns it for `ttl` by the store's
    /// clock, at epoch 1. Only valid with `create`, which already
    /// guarantees nobody else runs it.
    Take {
        /// The owner.
        owner: String,
        /// For how long.
        ttl: Duration,
    },
    /// The owner gives the workflow up.
    Release {
        /// The owner.
        owner: String,
    },
}

/// Which workflows to list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkflowFilter {
    /// Only these statuses (all when empty).
    pub statuses: Vec<WorkflowStatus>,
    /// Only those started by this agent.
    pub agent_id: Option<String>,
    /// Only runs of this template.
    pub template_name: Option<String>,
    /// Only children of this workflow.
    pub parent_id: Option<String>,
    /// Only those created at or after this time (RFC 3339).
    pub since: Option<String>,
    /// Only those created before this time (RFC 3339).
    pub until: Option<String>,
    /// Only those whose id contains this text.
    pub id_contains: Option<String>,
    /// At most this many, newest first (all when `None`).
    pub limit: Option<u32>,
    /// After skipping this many.
    pub offset: u32,
}

/// An agent that started workflows or called the tools.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AgentRow {
    /// Its id.
    pub id: String,
    /// First seen (RFC 3339).
    pub created_at: String,
    /// Last seen (RFC 3339).
    pub last_seen_at: String,
}

/// A message waiting for a workflow's owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxMessage {
    /// Its id (consume it with [`Commit::inbox_taken`]).
    pub id: i64,
    /// The workflow.
    pub workflow_id: String,
    /// The event (JSON text of an [`opcode_vm::Event`]).
    pub event: String,
    /// When it was sent.
    pub created_at: String,
}

/// Work no process is doing, for autoscalers (`/metrics`): runs no live
/// lease holds, timers due, and who holds the leases.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Backlog {
    /// Runs pending or active whose lease is free or lapsed.
    pub runnable: u64,
    /// Timers due now or earlier, not yet fired.
    pub timers_due: u64,
    /// How long the oldest of these has waited, in seconds (0 when none):
    /// a run since its lease lapsed (or it last changed), a timer since due.
    pub oldest_seconds: f64,
    /// Live leases, by owner.
    pub leases: Vec<(String, u64)>,
}

/// The answer to a lease claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The caller owns the workflow until the lease expires.
    Granted {
        /// The grant's epoch (what the caller's commits carry in their
        /// [`Fence`]); 0 for a workflow that does not exist.
        epoch: u64,
    },
    /// Someone else does.
    Held {
        /// The owner.
        owner: String,
        /// Until when (RFC 3339).
        expires_at: String,
    },
}

/// The event store: what the executor runs workflows on ([`RunLog`]) and
/// what the tools and the panel keep beside it ([`Catalog`]). A backend
/// implements both; `spec/store.md` is the contract.
///
/// Every timestamp argument and column is RFC 3339 UTC with milliseconds
/// (`2026-11-29T10:30:00.000Z`), so text order is time order.
pub trait EventStore:
    RunLog + Catalog + Slots + Sessions + Transcripts + Worktrees + Registry
{
}

impl<T: RunLog + Catalog + Slots + Sessions + Transcripts + Worktrees + Registry> EventStore for T {}

/// The runs: their logs with the derived rows, leases, timers and inboxes.
/// Several processes may share one: every write is checked against the
/// database as it is (appends compare and set the last sequence, leases
/// are rows with an expiry), never against what the caller saw.
pub trait RunLog: Send + Sync {
    /// Appends a commit: creates the workflow if asked, appends the
    /// entries after `after_seq` (failing with [`StoreError::Conflict`] if
    /// the log has moved), and applies the derived changes, all or nothing;
    /// what it writes is [`commit::plan`].
    fn commit(&self, commit: Commit) -> BoxFuture<'_, StoreResult<()>>;

    /// A workflow.
    fn workflow<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<WorkflowRow>>>;

    /// A source, by hash.
    fn source<'a>(&'a self, hash: &'a str) -> BoxFuture<'a, StoreResult<Option<Source>>>;

    /// A large value's JSON, by hash ([`blobs`]).
    fn blob<'a>(&'a self, hash: &'a str) -> BoxFuture<'a, StoreResult<Option<String>>>;

    /// Workflows, newest first.
    fn workflows(&self, filter: WorkflowFilter) -> BoxFuture<'_, StoreResult<Vec<WorkflowRow>>>;

    /// A workflow's log entries after `after_seq`, in order; only inputs
    /// when `inputs_only` (what replay needs).
    fn entries<'a>(
        &'a self,
        id: &'a str,
        after_seq: u64,
        inputs_only: bool,
    ) -> BoxFuture<'a, StoreResult<Vec<LogEntry>>>;

    /// A workflow, its step instances and its pending decisions, read
    /// together (what a status summary shows).
    fn state<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<WorkflowState>>> {
        Box::pin(async move {
            let (workflow, steps, decisions) = futures::join!(
                self.workflow(id),
                self.steps(id),
                self.decisions(Some(id), Some(DecisionStatus::Pending))
            );
            let Some(workflow) = workflow? else {
                return Ok(None);
            };
            Ok(Some(WorkflowState {
                workflow,
                steps: steps?,
                pending_decisions: decisions?,
            }))
        })
    }

    /// Writes `commit`, then reads the workflow's state as it left it (what
    /// a caller waiting for the run shows), its step rows as `detail` says.
    /// A store may queue both at once, so the read costs no second trip; a
    /// failed commit fails the whole.
    fn commit_and_state(
        &self,
        commit: Commit,
        // Whole rows are more than `StatusOnly` asks: a store may read them.
        _detail: StepDetail,
    ) -> BoxFuture<'_, StoreResult<Option<WorkflowState>>> {
        Box::pin(async move {
            let id = commit.workflow_id.clone();
            self.commit(commit).await?;
            self.state(&id).await
        })
    }

    /// A workflow's step instances, by name.
    fn steps<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Vec<StepRow>>>;

    /// Decisions, of one workflow or all, with one status or any.
    fn decisions<'a>(
        &'a self,
        workflow_id: Option<&'a str>,
        status: Option<DecisionStatus>,
    ) -> BoxFuture<'a, StoreResult<Vec<DecisionRow>>>;

    /// For each workflow with timers, its earliest due time; soonest first.
    fn next_timers(&self, limit: u32) -> BoxFuture<'_, StoreResult<Vec<(String, String)>>>;

    /// Leaves a message for a workflow's owner.
    fn send<'a>(
        &'a self,
        workflow_id: &'a str,
        event: String,
        at: String,
    ) -> BoxFuture<'a, StoreResult<i64>>;

    /// Messages waiting, for one workflow or all, oldest first.
    fn inbox<'a>(
        &'a self,
        workflow_id: Option<&'a str>,
    ) -> BoxFuture<'a, StoreResult<Vec<InboxMessage>>>;

    /// Claims a workflow for `owner` for `ttl`: granted when nobody holds
    /// it, the owner already does, or the lease expired. With `take_from`,
    /// also granted when that (dead) owner holds it. Expiry is judged by
    /// the store's clock (a shared database's `now()`), so writers with
    /// skewed clocks agree. A grant to an owner that did not hold the
    /// lease has the next epoch. The lease lives on the workflow's row: a
    /// workflow that does not exist is granted and nothing is held.
    fn claim<'a>(
        &'a self,
        id: &'a str,
        owner: &'a str,
        take_from: Option<&'a str>,
        ttl: Duration,
    ) -> BoxFuture<'a, StoreResult<Claim>>;

    /// Extends every lease of `owner` on a run that has not ended to `ttl`
    /// from now (the store's clock).
    fn renew<'a>(&'a self, owner: &'a str, ttl: Duration) -> BoxFuture<'a, StoreResult<()>>;

    /// Gives a workflow up.
    fn release<'a>(&'a self, id: &'a str, owner: &'a str) -> BoxFuture<'a, StoreResult<()>>;

    /// Up to `limit` runs that are pending or active and whose lease is
    /// free or expired (by the store's clock): runs whose owner died, for
    /// another process to take over. Fair across agents: each agent's
    /// oldest first, one agent at a time (see `spec/scale-out.md`).
    fn orphans(&self, limit: u32) -> BoxFuture<'_, StoreResult<Vec<String>>>;

    /// The work no process is doing, by the store's clock.
    fn backlog(&self) -> BoxFuture<'_, StoreResult<Backlog>>;

    /// What other writers of a shared store commit and send, as it happens
    /// (`None`: a store with one writer, which announces nothing). Notices
    /// are hints: one may be lost, so a listener also polls.
    fn notices(&self) -> Option<tokio::sync::broadcast::Receiver<Notice>> {
        None
    }
}

/// What the tools, the scheduler and the panel keep beside the runs:
/// templates, agents, schedules, the vault, and the queries over the logs.
pub trait Catalog: Send + Sync {
    /// Stores a template as the next version of its name (1 for a new one).
    fn define_template(&self, draft: TemplateDraft) -> BoxFuture<'_, StoreResult<TemplateRow>>;

    /// One version of a template, or its newest when `version` is `None`.
    fn template<'a>(
        &'a self,
        name: &'a str,
        version: Option<i64>,
    ) -> BoxFuture<'a, StoreResult<Option<TemplateRow>>>;

    /// Templates by name, newest version first.
    fn templates(&self, filter: TemplateFilter) -> BoxFuture<'_, StoreResult<Vec<TemplateRow>>>;

    /// Log entries across workflows.
    fn find_entries(&self, filter: EventFilter) -> BoxFuture<'_, StoreResult<Vec<FoundEntry>>>;

    /// How many rows `listing` has in all, whatever its limit and offset.
    fn count(&self, listing: Listing) -> BoxFuture<'_, StoreResult<u64>>;

    /// Records that an agent was seen at `at`, registering it if new.
    fn touch_agent<'a>(&'a self, id: &'a str, at: &'a str) -> BoxFuture<'a, StoreResult<()>>;

    /// The agents seen, most recently seen first.
    fn agents(&self) -> BoxFuture<'_, StoreResult<Vec<AgentRow>>>;

    /// How many workflows have each status (statuses with none are absent).
    fn workflow_counts(&self) -> BoxFuture<'_, StoreResult<Vec<(WorkflowStatus, u64)>>>;

    /// Creates or replaces a scheduled job.
    fn save_schedule(&self, job: ScheduleRow) -> BoxFuture<'_, StoreResult<()>>;

    /// Every scheduled job, oldest first.
    fn schedules(&self) -> BoxFuture<'_, StoreResult<Vec<ScheduleRow>>>;

    /// Deletes a scheduled job; false if there was none.
    fn delete_schedule<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<bool>>;

    /// Moves a job to its next fire time if its `next_run_at` is still the
    /// one expected (so two schedulers never handle one fire time twice);
    /// false if it had moved.
    fn advance_schedule(&self, advance: ScheduleAdvance) -> BoxFuture<'_, StoreResult<bool>>;

    /// Records the status of a job's last run, if that run is still `workflow_id`.
    fn set_schedule_status<'a>(
        &'a self,
        id: &'a str,
        workflow_id: &'a str,
        status: &'a str,
    ) -> BoxFuture<'a, StoreResult<()>>;

    /// The vault's header, if a vault was created.
    fn vault_header(&self) -> BoxFuture<'_, StoreResult<Option<VaultHeader>>>;

    /// Stores `header` unless a vault exists; returns the stored header.
    fn create_vault(&self, header: VaultHeader) -> BoxFuture<'_, StoreResult<VaultHeader>>;

    /// Creates or replaces a sealed secret (keeping its `created_at`).
    fn put_secret(&self, secret: SecretRow) -> BoxFuture<'_, StoreResult<()>>;

    /// Every sealed secret, by name.
    fn secrets(&self) -> BoxFuture<'_, StoreResult<Vec<SecretRow>>>;

    /// Deletes a secret; false if there was none.
    fn delete_secret<'a>(&'a self, name: &'a str) -> BoxFuture<'a, StoreResult<bool>>;

    /// The finished runs `expiry` lets go, oldest first (spec/store.md,
    /// "Retention").
    fn expired(&self, expiry: Expiry) -> BoxFuture<'_, StoreResult<Vec<String>>>;

    /// Deletes each of `runs` that has ended, with everything kept of it
    /// (entries, steps, decisions, timers, messages, and large values no
    /// other run refers to), leaving a [`PrunedRow`] pruned `at`; answers
    /// the ones deleted. A run that is not (or no longer) at an end stays.
    fn prune(&self, runs: Vec<Prune>, at: String) -> BoxFuture<'_, StoreResult<Vec<String>>>;

    /// The pruned runs `filter` names, most recently pruned first.
    fn pruned(&self, filter: PrunedFilter) -> BoxFuture<'_, StoreResult<Vec<PrunedRow>>>;

    /// A page of the decisions `filter` names, oldest first (what
    /// `opcode.query` lists; `count(Listing::Decisions)` counts them).
    fn decision_page(&self, filter: DecisionFilter)
    -> BoxFuture<'_, StoreResult<Vec<DecisionRow>>>;

    /// Deletes the tombstones of runs pruned before `before` (RFC 3339);
    /// answers how many.
    fn forget_pruned(&self, before: String) -> BoxFuture<'_, StoreResult<u64>>;

    /// The database's schema version, journal, sync setting and clock.
    fn health(&self) -> BoxFuture<'_, StoreResult<StoreHealth>>;
}
