//! The VM's state types: run and step statuses, frames, instances, waits.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::effect::{DecisionRequest, Dispatch, InstRef, TimerPurpose};
use crate::error::{ActionError, StepError};
use crate::event::{EffectId, TimerId};
use crate::instr::BlockId;

/// A run's status (opcode's workflow states).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Not started.
    Pending,
    /// Working.
    Active,
    /// Waiting for decisions or signals (or suspended by its deadline).
    Suspended,
    /// Finished successfully.
    Completed,
    /// Finished with an error.
    Failed,
    /// Stopped on request.
    Cancelled,
}

impl RunStatus {
    /// Has the run ended?
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        )
    }

    /// The spelling used in results and the database.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Active => "active",
            RunStatus::Suspended => "suspended",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }
}

/// A step instance's status (opcode's step states).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Created, not yet started.
    #[default]
    Pending,
    /// Working.
    Running,
    /// Waiting for its retry backoff.
    Retrying,
    /// Waiting for a decision or a signal.
    Suspended,
    /// Finished with an output.
    Completed,
    /// Finished with an error (possibly handled by `on_error`).
    Failed,
    /// Not run: its guard was false, or its decision was cancelled.
    Skipped,
    /// Stopped before it finished: the run failed or was cancelled, or
    /// its branch lost a race.
    Cancelled,
}

impl StepStatus {
    /// Has the instance finished?
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            StepStatus::Completed
                | StepStatus::Failed
                | StepStatus::Skipped
                | StepStatus::Cancelled
        )
    }

    /// The spelling used in results and the database.
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Pending => "pending",
            StepStatus::Running => "running",
            StepStatus::Retrying => "retrying",
            StepStatus::Suspended => "suspended",
            StepStatus::Completed => "completed",
            StepStatus::Failed => "failed",
            StepStatus::Skipped => "skipped",
            StepStatus::Cancelled => "cancelled",
        }
    }

    /// What a `step_skipped` record's `reason` left the step as: stopped
    /// (`cancelled`, `race_lost`) is cancelled; not run (`guard`,
    /// `decision_cancelled`) is skipped.
    pub fn of_skip(reason: &str) -> StepStatus {
        match reason {
            "cancelled" | "race_lost" => StepStatus::Cancelled,
            _ => StepStatus::Skipped,
        }
    }

    /// The status spelled `text` (as [`StepStatus::as_str`] spells it).
    pub fn parse(text: &str) -> Option<StepStatus> {
        [
            StepStatus::Pending,
            StepStatus::Running,
            StepStatus::Retrying,
            StepStatus::Suspended,
            StepStatus::Completed,
            StepStatus::Failed,
            StepStatus::Skipped,
            StepStatus::Cancelled,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }
}

/// A step instance as reported to callers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepView {
    /// Its name (`fetch`, `hash[2]`).
    pub name: String,
    /// The instance.
    pub inst: InstRef,
    /// Its status.
    pub status: StepStatus,
    /// Attempts started.
    pub attempt: u32,
    /// Its output (null until completed).
    pub output: Value,
    /// Its error, if it failed.
    pub error: Option<ActionError>,
}

/// Index of a frame in the VM's frame list.
pub type FrameId = usize;

/// Who started a frame, and is told when it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// The run itself (the top level, or a hook).
    Run,
    /// A flow step instance; `slot` is the branch index for parallel steps.
    Step {
        /// The flow step instance.
        inst: InstRef,
        /// The branch index (parallel), else 0.
        slot: u32,
    },
}

/// How a frame ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameState {
    /// Steps are still running or waiting.
    Running,
    /// Every step finished.
    Done,
    /// A step failed unhandled.
    Failed,
    /// Stopped from outside.
    Cancelled,
}

/// A running instance of a block.
#[derive(Debug, Clone)]
pub struct Frame {
    /// The block.
    pub block: BlockId,
    /// The loop indices of the steps in it.
    pub iters: Vec<u32>,
    /// Who started it.
    pub owner: Owner,
    /// The body frame of the innermost loop around it (itself for a body).
    pub innermost_loop: Option<FrameId>,
    /// For a loop body: the item and index of this iteration.
    pub loop_var: Option<(Value, u32)>,
    /// Per position: dependencies not yet finished.
    pub waiting: Vec<u32>,
    /// Per position: has the step been started?
    pub started: Vec<bool>,
    /// Scheduled steps not yet finished.
    pub unfinished: u32,
    /// Its state.
    pub state: FrameState,
}

/// What a running instance waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wait {
    /// Nothing (finished, or between instructions).
    Nothing,
    /// An action result.
    Action(EffectId),
    /// Its retry backoff.
    Retry(TimerId),
    /// A wait step's duration.
    Sleep(TimerId),
    /// A signal (with the timeout timer, if any).
    Signal(Option<TimerId>),
    /// A decision, by id.
    Decision(String),
    /// Child frames (flow steps).
    Children,
    /// Its fallback step, running in its place.
    Fallback(InstRef),
}

/// Per-kind state of a flow step.
#[derive(Debug, Clone)]
pub enum Flow {
    /// A condition: the branch taken.
    Branch {
        /// The key (or `default`).
        key: String,
        /// The frame running it.
        frame: FrameId,
    },
    /// A loop.
    Loop(LoopState),
    /// A parallel step.
    Fork(ForkState),
}

/// A loop in progress.
#[derive(Debug, Clone)]
pub struct LoopState {
    /// `for_each` items (none for `while`/`until`).
    pub items: Option<Vec<Value>>,
    /// The iteration running (or next).
    pub index: u32,
    /// The last output of each finished iteration.
    pub results: Vec<Value>,
    /// Was the item list cut by `max_iter`?
    pub truncated: bool,
    /// The current iteration's frame.
    pub frame: Option<FrameId>,
}

/// A parallel step in progress.
#[derive(Debug, Clone)]
pub struct ForkState {
    /// Each branch's frame, once started.
    pub frames: Vec<Option<FrameId>>,
    /// Each finished branch's last output.
    pub outputs: Vec<Option<Value>>,
    /// Branches started so far.
    pub started: u32,
    /// Branches running now.
    pub running: u32,
    /// Branches that failed.
    pub failed: u32,
    /// The first failure.
    pub first_error: Option<StepError>,
}

/// One step instance.
#[derive(Debug, Clone)]
pub struct Instance {
    /// Its status.
    pub status: StepStatus,
    /// Attempts started (never reset: keys stay unique across re-runs).
    pub attempt: u32,
    /// The frame it runs in.
    pub frame: FrameId,
    /// The instruction being executed.
    pub pc: u32,
    /// Its output.
    pub output: Value,
    /// Its last error.
    pub error: Option<ActionError>,
    /// What it waits for.
    pub wait: Wait,
    /// Flow step state.
    pub flow: Option<Box<Flow>>,
    /// The attempt's deadline timer.
    pub deadline: Option<TimerId>,
    /// When this instance is a fallback: the instance it stands in for.
    pub stands_in_for: Option<InstRef>,
}

/// An action in flight.
#[derive(Debug, Clone)]
pub struct Inflight {
    /// The dispatch, kept to re-issue it after a replay.
    pub dispatch: Arc<Dispatch>,
    /// The questions it asked, by key: the decision each opened, and its
    /// answer once given (kept for a re-run of the dispatch that asks again).
    pub asks: BTreeMap<String, Asked>,
}

/// A question an action in flight asked.
#[derive(Debug, Clone)]
pub struct Asked {
    /// The decision it opened.
    pub decision: String,
    /// The answer, once given.
    pub answer: Option<String>,
}

/// A running timer.
#[derive(Debug, Clone)]
pub struct Timer {
    /// Why.
    pub purpose: TimerPurpose,
    /// The instance it belongs to.
    pub inst: Option<InstRef>,
    /// When it fires.
    pub due: u64,
}

/// A decision waiting for an answer.
#[derive(Debug, Clone)]
pub struct PendingDecision {
    /// The request as issued.
    pub request: Arc<DecisionRequest>,
    /// Its timeout timer.
    pub timer: Option<TimerId>,
    /// For a question an action asked: the dispatch and the question's key
    /// (its answer goes to the action, the step keeps running).
    pub asked_by: Option<(EffectId, String)>,
}

/// Where the run is.
#[derive(Debug, Clone, PartialEq)]
pub enum Phase {
    /// Running the steps.
    Steps,
    /// Running `on_complete`; the output is ready.
    CompleteHook(Value),
    /// Running `on_error`.
    ErrorHook(StepError),
    /// Finished.
    Done,
}
