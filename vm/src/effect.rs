//! The VM's outputs: what it asks the runtime to do ([`Effect`]) and what it
//! reports happened ([`Record`]).
//!
//! Effects are commands; the events that answer them come back through
//! [`crate::Vm::apply`]. Records are derived facts (a step started, completed,
//! failed…): the runtime logs them for people and tools, but replay never
//! needs them, because applying the same events reproduces them.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ActionError, StepError};
use crate::event::{EffectId, TimerId};
use crate::instr::StepId;
use crate::program::DecisionOption;

pub use crate::secret::{SecretPart, SecretSite};

/// One instance of a step: the step, and the loop iteration indices it runs
/// in (outermost first; empty outside loops).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct InstRef {
    /// The step.
    pub step: StepId,
    /// Loop indices, outermost first.
    pub iters: Vec<u32>,
}

/// An action to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dispatch {
    /// The id its result must carry.
    pub effect: EffectId,
    /// The step instance.
    pub inst: InstRef,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// The action's full name.
    pub action: String,
    /// Resolved parameters (secrets are still absent; see `secrets`).
    pub params: Value,
    /// Where secrets must be written into `params` before running.
    pub secrets: Vec<SecretSite>,
    /// The attempt's deadline, milliseconds (the VM also keeps a timer).
    pub timeout_ms: Option<u64>,
    /// The CEL variables, for actions that evaluate expressions.
    pub scope: Option<Value>,
    /// The step's isolation settings.
    pub isolation: Option<Value>,
    /// The window its call must fit in, if the step has a rate limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
}

/// A call's rate limit, its key made (spec/flow-control.md, "Rate limits").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rate {
    /// The key; none: the call's target (`key: "host"`), which only the
    /// runtime knows.
    pub key: Option<String>,
    /// Calls a window.
    pub limit: u32,
    /// The window, milliseconds.
    pub per_ms: u64,
}

/// A decision to ask for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRequest {
    /// The decision id (the step instance's name, such as `review` or `review[2]`).
    pub id: String,
    /// The step instance.
    pub inst: InstRef,
    /// The question.
    pub prompt: Option<String>,
    /// The choices (empty: free-form).
    pub options: Vec<DecisionOption>,
    /// `data_inject`, rendered.
    pub data: Value,
    /// When it times out (milliseconds since the epoch).
    pub timeout_at: Option<u64>,
    /// The choice taken at the timeout.
    pub fallback: Option<String>,
    /// The only agent allowed to decide.
    pub target_agent: Option<String>,
}

/// What a timer is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimerPurpose {
    /// The backoff before a retry.
    Retry,
    /// A step attempt's deadline.
    StepTimeout,
    /// A wait step's duration.
    Sleep,
    /// The longest wait for a signal.
    SignalTimeout,
    /// A decision's timeout.
    DecisionTimeout,
    /// The run's deadline.
    RunTimeout,
}

impl TimerPurpose {
    /// The purpose's name (`retry`, `decision_timeout`…).
    pub fn as_str(&self) -> &'static str {
        match self {
            TimerPurpose::Retry => "retry",
            TimerPurpose::StepTimeout => "step_timeout",
            TimerPurpose::Sleep => "sleep",
            TimerPurpose::SignalTimeout => "signal_timeout",
            TimerPurpose::DecisionTimeout => "decision_timeout",
            TimerPurpose::RunTimeout => "run_timeout",
        }
    }
}

/// A command for the runtime.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Effect {
    /// Run an action; answer with [`crate::Event::ActionFinished`]
    /// (shared: the VM keeps the same dispatch to re-issue it after a replay).
    Dispatch(Arc<Dispatch>),
    /// The action's result is no longer wanted: stop it if possible.
    CancelDispatch {
        /// The dispatch.
        effect: EffectId,
    },
    /// Fire [`crate::Event::TimerFired`] at `due` (milliseconds since the epoch).
    StartTimer {
        /// The timer.
        timer: TimerId,
        /// When.
        due: u64,
        /// Why (for people).
        purpose: TimerPurpose,
        /// The step it belongs to, if any.
        inst: Option<InstRef>,
    },
    /// The timer is no longer wanted.
    CancelTimer {
        /// The timer.
        timer: TimerId,
    },
    /// Ask for a decision; answer with [`crate::Event::DecisionResolved`].
    RequestDecision(Arc<DecisionRequest>),
    /// The decision is no longer wanted.
    CancelDecision {
        /// The decision id.
        id: String,
    },
    /// Give the action in flight that asked a question
    /// ([`crate::Event::ActionAsked`]) its answer.
    AnswerAction {
        /// The dispatch that asked.
        effect: EffectId,
        /// The question's key.
        key: String,
        /// The option chosen.
        choice: String,
    },
    /// A step waits for a named signal.
    AwaitSignal {
        /// The step instance.
        inst: InstRef,
        /// The signal name.
        name: String,
    },
    /// The run waits for a slot of its concurrency key (spec/flow-control.md);
    /// answer with [`crate::Event::Admitted`] once it holds one, or refused.
    Admit(Arc<AdmitRequest>),
    /// Something happened worth logging.
    Record(Record),
}

/// A run's request for a slot of its concurrency key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdmitRequest {
    /// The key: the template's concurrency key, as the run's inputs made it.
    pub key: String,
    /// Runs of the key holding a slot at once.
    pub limit: u32,
    /// What the run does at the limit.
    pub on_limit: crate::policy::OnLimit,
    /// The run's priority: waiting runs of a key are admitted lowest first.
    pub priority: u8,
}

/// A fact about the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
pub enum Record {
    /// The run started.
    RunStarted,
    /// A step attempt started.
    StepStarted {
        /// The instance.
        inst: InstRef,
        /// 1 for the first attempt.
        attempt: u32,
    },
    /// A step completed.
    StepCompleted {
        /// The instance.
        inst: InstRef,
        /// Its output.
        output: Value,
        /// The run whose output it kept instead of running
        /// ([`crate::event::RunMeta::carried`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        carried_from: Option<String>,
    },
    /// A step was skipped: its guard was false, or it was cancelled.
    StepSkipped {
        /// The instance.
        inst: InstRef,
        /// `guard`, `cancelled`, `race_lost`, `decision_cancelled`.
        reason: String,
    },
    /// A step failed (for good, or handled by `on_error`).
    StepFailed {
        /// The instance.
        inst: InstRef,
        /// Why.
        error: Box<ActionError>,
        /// Did `on_error` handle it (`ignore`, `fallback_step`)?
        handled: bool,
    },
    /// An attempt failed and the step will retry.
    StepRetrying {
        /// The instance.
        inst: InstRef,
        /// The attempt that failed.
        attempt: u32,
        /// The backoff before the next attempt.
        delay_ms: u64,
        /// Why it failed.
        error: Box<ActionError>,
    },
    /// A step waits for a decision or a signal.
    StepSuspended {
        /// The instance.
        inst: InstRef,
    },
    /// A question an action asked again (its dispatch ran again after a
    /// crash) got the answer given before, without a new decision.
    DecisionReplayed {
        /// The step instance whose action asked.
        inst: InstRef,
        /// The decision that was answered.
        decision: String,
        /// The answer.
        choice: String,
    },
    /// A condition picked a branch.
    ConditionEvaluated {
        /// The instance.
        inst: InstRef,
        /// The key (or `default`).
        branch: String,
        /// The expression's value.
        value: Value,
    },
    /// A loop iteration starts.
    LoopIteration {
        /// The loop instance.
        inst: InstRef,
        /// 0-based.
        index: u32,
    },
    /// A fallback step runs in place of a failed one.
    FallbackStarted {
        /// The failed instance.
        inst: InstRef,
        /// The fallback step.
        fallback: StepId,
    },
    /// The run waits for decisions or signals (or was suspended by its deadline).
    RunSuspended,
    /// The run is active again.
    RunResumed,
    /// The run's deadline passed.
    RunTimedOut {
        /// What happens: `fail`, `suspend` or `cancel`.
        action: String,
    },
    /// A hook failed; the run's status is unchanged.
    HookFailed {
        /// Why.
        error: Box<StepError>,
    },
    /// The run completed.
    RunCompleted {
        /// Its output.
        output: Value,
    },
    /// The run failed.
    RunFailed {
        /// Why.
        error: Box<StepError>,
    },
    /// The run was cancelled.
    RunCancelled {
        /// Why.
        reason: String,
    },
}

impl Record {
    /// opcode's event name for this record (what `opcode.query` filters on).
    pub fn event_type(&self) -> &'static str {
        match self {
            Record::RunStarted => "workflow_started",
            Record::StepStarted { .. } => "step_started",
            Record::StepCompleted { .. } => "step_completed",
            Record::StepSkipped { .. } => "step_skipped",
            Record::StepFailed { handled: true, .. } => "step_ignored",
            Record::StepFailed { .. } => "step_failed",
            Record::StepRetrying { .. } => "step_retrying",
            Record::StepSuspended { .. } => "step_suspended",
            Record::DecisionReplayed { .. } => "decision_replayed",
            Record::ConditionEvaluated { .. } => "condition_evaluated",
            Record::LoopIteration { .. } => "loop_iter_started",
            Record::FallbackStarted { .. } => "step_fallback",
            Record::RunSuspended => "workflow_suspended",
            Record::RunResumed => "workflow_resumed",
            Record::RunTimedOut { .. } => "workflow_timed_out",
            Record::HookFailed { .. } => "hook_failed",
            Record::RunCompleted { .. } => "workflow_completed",
            Record::RunFailed { .. } => "workflow_failed",
            Record::RunCancelled { .. } => "workflow_cancelled",
        }
    }

    /// The step instance the record is about, if any.
    pub fn inst(&self) -> Option<&InstRef> {
        match self {
            Record::StepStarted { inst, .. }
            | Record::StepCompleted { inst, .. }
            | Record::StepSkipped { inst, .. }
            | Record::StepFailed { inst, .. }
            | Record::StepRetrying { inst, .. }
            | Record::StepSuspended { inst }
            | Record::DecisionReplayed { inst, .. }
            | Record::ConditionEvaluated { inst, .. }
            | Record::LoopIteration { inst, .. }
            | Record::FallbackStarted { inst, .. } => Some(inst),
            _ => None,
        }
    }
}
