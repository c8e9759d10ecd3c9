//! The executor's public types: its configuration, its errors, a run to
//! start, and what waiters are told.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use opcode_stdlib::agents::AgentsConfig;
use opcode_stdlib::isolation::IsolationConfig;
use opcode_stdlib::limits::Limits;
use opcode_vm::Program;
use opcode_vm::effect::SecretSite;
use serde_json::Value;

use crate::breaker::BreakerConfig;
use crate::store::{LogEntry, StepDetail, StoreError, WorkflowState, WorkflowStatus};
use crate::workspace::Workspaces;

/// What to do, at start, with workflows a dead process left running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Recovery {
    /// Load them and carry on.
    #[default]
    Resume,
    /// Mark them suspended (`workflow_interrupted`) until someone resumes them.
    LeaveSuspended,
}

/// How the executor behaves.
#[derive(Debug, Clone)]
pub struct Config {
    /// How long a lease lasts without renewal.
    pub lease_ttl: Duration,
    /// Actions running at once, across all workflows.
    pub max_actions: usize,
    /// How long an action call waiting for a worker slot takes to rise
    /// one priority level (spec/flow-control.md, "Priority and fairness").
    pub priority_aging: Duration,
    /// What [`Executor::recover`] does.
    pub recovery: Recovery,
    /// Whether the background loop loads workflows it does not run yet
    /// (due timers, inbox messages): the daemon does, a one-shot `opcode
    /// run` does not.
    pub adopt: bool,
    /// Whether the background loop takes over runs whose lease lapsed
    /// (their owner died or froze): processes sharing one database do.
    pub take_over: bool,
    /// How often the background loop looks at timers and inboxes.
    pub poll: Duration,
    /// Where relative paths resolve for workflows that name no directory.
    pub base_dir: PathBuf,
    /// Isolation of the processes and paths actions use.
    pub isolation: IsolationConfig,
    /// Circuit breakers of the actions.
    pub breakers: BreakerConfig,
    /// Where runs work (none: relative paths resolve against `base_dir`).
    pub workspaces: Option<Workspaces>,
    /// The run-time bounds of spec/limits.md.
    pub limits: Limits,
    /// The delegated agents `agent.*` runs (spec/agents.md).
    pub agents: AgentsConfig,
    /// How long a running run's step rows may lag its log (decision 0042).
    pub step_rows_within: Duration,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            lease_ttl: Duration::from_secs(10),
            max_actions: 64,
            priority_aging: Duration::from_mins(1),
            recovery: Recovery::Resume,
            adopt: true,
            take_over: false,
            poll: Duration::from_millis(200),
            base_dir: PathBuf::from("."),
            isolation: IsolationConfig::default(),
            breakers: BreakerConfig::default(),
            workspaces: None,
            limits: Limits::default(),
            agents: AgentsConfig::default(),
            step_rows_within: Duration::from_millis(50),
        }
    }
}

/// Why an executor call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    /// No such workflow.
    #[error("workflow `{0}` not found")]
    NotFound(String),
    /// The workflow has ended.
    #[error("workflow `{id}` has already ended ({status})")]
    Ended {
        /// The workflow.
        id: String,
        /// How it ended.
        status: WorkflowStatus,
    },
    /// Another live process owns the workflow.
    #[error("workflow `{id}` is run by another process ({owner})")]
    Held {
        /// The workflow.
        id: String,
        /// The owner.
        owner: String,
    },
    /// The VM refused the event (its code and why).
    #[error("{}", .0.message)]
    Refused(opcode_vm::error::Rejected),
    /// The program cannot be loaded.
    #[error("{0}")]
    Program(String),
    /// The log cannot be replayed.
    #[error("workflow `{id}` cannot be replayed: {reason}")]
    Replay {
        /// The workflow.
        id: String,
        /// Why.
        reason: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run stopped before answering.
    #[error("workflow `{0}` stopped before answering")]
    Stopped(String),
    /// The run is quarantined: only resuming or cancelling it loads it.
    #[error(
        "workflow `{0}` is quarantined (each recovery ended the process): resume or cancel it by hand"
    )]
    Quarantined(String),
}

/// What became of a delivered event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// The run applied it (and it is in the log).
    Applied,
    /// Another process owns the run: the event waits in its inbox.
    Queued {
        /// The owner.
        owner: String,
    },
}

/// A run to start.
#[derive(Debug, Clone, Default)]
pub struct StartRequest {
    /// The id (a fresh UUID when `None`).
    pub id: Option<String>,
    /// The source text.
    pub definition: String,
    /// Its compiled program.
    pub program: Option<Program>,
    /// The inputs, defaults merged and validated.
    pub inputs: Value,
    /// The agent starting it.
    pub agent_id: Option<String>,
    /// The parent run.
    pub parent_id: Option<String>,
    /// The template it comes from.
    pub template_name: Option<String>,
    /// The template version.
    pub template_version: Option<i64>,
    /// That version was taken for the latest: the start fails with
    /// [`StoreError::Outdated`] if a newer one exists.
    pub template_latest: bool,
    /// Where relative paths resolve.
    pub base_dir: Option<PathBuf>,
    /// Where, in `inputs`, secrets are passed by reference (a child's).
    pub secrets: Vec<SecretSite>,
    /// The run's workspace (a child's is its parent's); none: a fresh one
    /// if the executor makes them ([`Config::workspaces`]).
    pub workspace: Option<PathBuf>,
    /// The caller shows the run's state once it settles: it is read with
    /// the commit that settles the run, its step rows as much as it says,
    /// and comes with [`Settled`].
    pub report_state: Option<StepDetail>,
    /// The session the run belongs to (a child's is its parent's).
    pub session_id: Option<String>,
    /// The failed run this one re-runs from its failed step, and the
    /// outputs of that run's completed steps, kept (`crate::rerun`).
    pub rerun: Option<(String, BTreeMap<String, Value>)>,
    /// Its priority, 0 (first) to 9 (last); `None`: its parent's, or 5.
    pub priority: Option<u8>,
    /// Cancelled before it starts, for this reason: the run is created and
    /// cancelled in its first round, so no step of it runs (a debounced
    /// run cancelled while its burst gathered, spec/flow-control.md).
    pub cancelled: Option<String>,
}

/// A change of a workflow's status, as broadcast to waiters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The workflow.
    pub id: String,
    /// Its status (none when it left before settling: see `error`).
    pub status: Option<WorkflowStatus>,
    /// Is it still loaded here?
    pub loaded: bool,
    /// Its state as its last commit left it, when that commit read it.
    pub state: Option<Arc<WorkflowState>>,
    /// Why it left before settling (a write the store refused).
    pub error: Option<ExecError>,
    /// An action of the run asked a question (spec/agents.md): the run
    /// waits for an answer though its status stays `active`.
    pub asking: bool,
}

/// How a waited-for run settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// Its status.
    pub status: WorkflowStatus,
    /// Its state, when the run read it as it settled (see
    /// [`StartRequest::report_state`]).
    pub state: Option<Arc<WorkflowState>>,
}

/// Log entries a commit appended to one workflow, as broadcast to the
/// panel and the AG-UI streams (the log stays the source of truth: a
/// receiver that lags re-reads the store).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// The workflow.
    pub workflow_id: String,
    /// Its status after the commit, when the commit changed the derived state.
    pub status: Option<WorkflowStatus>,
    /// The entries, in order.
    pub entries: Vec<LogEntry>,
}

/// What [`Executor::wait`] waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// The run ended, or waits for a decision or a signal and was unloaded.
    Settled,
    /// The run ended.
    Ended,
}
