//! The VM's inputs: what happened outside it.
//!
//! The event log of a run is a sequence of these, each with the time it
//! happened (`at`, milliseconds since the Unix epoch, stamped by the
//! runtime: the VM reads no clock). Replaying the sequence through a fresh
//! [`crate::Vm`] rebuilds the run exactly; the VM's outputs
//! ([`crate::Effect`]) are derived and need not be stored to resume.
//!
//! Commands the VM issued are linked to the notifications that answer them
//! by ids the VM assigns deterministically: [`EffectId`] for actions,
//! [`TimerId`] for timers, the decision id (the step's instance name) for
//! decisions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ActionError;
use crate::program::DecisionOption;
use crate::secret::SecretSite;

/// Schema version of [`Event`] records (bump when a variant changes shape,
/// and keep decoding the old one).
pub const EVENT_VERSION: u16 = 1;

/// Id of an action dispatch, assigned by the VM.
pub type EffectId = u64;

/// Id of a timer, assigned by the VM.
pub type TimerId = u64;

/// Facts about a run, fixed when it starts.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RunMeta {
    /// The workflow (run) id.
    pub run_id: String,
    /// The workflow's name.
    #[serde(default)]
    pub name: String,
    /// The template it was started from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_name: Option<String>,
    /// The template version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_version: Option<String>,
    /// The agent that started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// The parent run, for sub-workflows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// The directory the run works in (its actions' relative paths and
    /// sandboxed processes), when the runtime gives it one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// Iterations one loop instance may make (default
    /// [`crate::limits::LOOP_ITERATIONS`]); fixed when the run starts, so
    /// that its replay takes the same path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_loop_iterations: Option<u64>,
    /// Step instances the run's loops may make in all (default
    /// [`crate::limits::STEP_INSTANCES`]); fixed when the run starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_step_instances: Option<u64>,
    /// Its priority, 0 (first) to 9 (last); default
    /// [`crate::limits::PRIORITY`] (spec/flow-control.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    /// Bytes of JSON the run's action outputs may add up to (default
    /// [`crate::limits::RUN_OUTPUT_BYTES`]); fixed when the run starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_bytes: Option<u64>,
    /// The conversation the run belongs to: delegated agents' steps of
    /// runs in one session get its earlier turns (spec/agents.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The failed run this one re-runs from its failed step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun_of: Option<String>,
    /// The outputs that run's completed steps gave, by instance name
    /// (`fetch`, `review[2]`): those instances complete at once with them
    /// instead of running again.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub carried: BTreeMap<String, Value>,
}

impl RunMeta {
    /// The run's priority (0 first, 9 last).
    pub fn priority(&self) -> u8 {
        self.priority
            .unwrap_or(crate::limits::PRIORITY)
            .min(crate::limits::PRIORITY_LAST)
    }
}

/// A question an action in flight asks ([`Event::ActionAsked`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ask {
    /// The dispatch that asks.
    pub effect: EffectId,
    /// What identifies the question within its dispatch: the same question
    /// asked again (by a re-run of the dispatch after a crash) has the same
    /// key and gets the answer already given. Letters, digits, `_` and
    /// `-`, at most [`Ask::MAX_KEY`] of them.
    pub key: String,
    /// The question, for people.
    pub prompt: String,
    /// The possible answers (at least one).
    pub options: Vec<DecisionOption>,
    /// What the decider is shown besides the prompt.
    #[serde(default)]
    pub data: Value,
    /// How long the question waits for an answer, in milliseconds.
    pub timeout_ms: u64,
    /// The option taken when nobody answers in time, or the question is
    /// cancelled.
    pub default: String,
}

impl Ask {
    /// The longest key.
    pub const MAX_KEY: usize = 64;

    /// The id of the decision the question opens on step instance
    /// `instance` (`fix.ask.<key>`): a reasoning step's decision is named
    /// by its instance alone, which has no dot ([`asking_step`]).
    pub fn decision_id(&self, instance: &str) -> String {
        format!("{instance}.ask.{}", self.key)
    }

    /// Why the question cannot be asked, if it cannot.
    pub fn problem(&self) -> Option<String> {
        let key_ok = !self.key.is_empty()
            && self.key.len() <= Ask::MAX_KEY
            && self
                .key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !key_ok {
            return Some(format!(
                "a question's key is 1 to {} letters, digits, `_` or `-`, not `{}`",
                Ask::MAX_KEY,
                self.key
            ));
        }
        if !self.options.iter().any(|o| o.id == self.default) {
            return Some(format!(
                "the question's default `{}` is not one of its options",
                self.default
            ));
        }
        None
    }
}

/// The step instance whose action asked the question that opened decision
/// `id` (`fix.ask.<key>` → `fix`), if it is such a decision.
pub fn asking_step(id: &str) -> Option<&str> {
    id.split_once(".ask.").map(|(step, _)| step)
}

/// How a decision was made.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Resolution {
    /// The option id, or free text for a free-form decision.
    pub choice: String,
    /// The decider's explanation.
    #[serde(default)]
    pub reasoning: Option<String>,
    /// Structured data sent with the decision.
    #[serde(default)]
    pub data: Option<Value>,
    /// Who decided: an agent id, or `system` for a timeout fallback.
    #[serde(default)]
    pub resolved_by: Option<String>,
}

/// Something that happened to a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// The run starts with these inputs (defaults already merged).
    Started {
        /// The run's inputs.
        inputs: Value,
        /// Facts about the run (boxed: the largest of the events).
        meta: Box<RunMeta>,
        /// Where, in the inputs, a parent passed secrets: each such string
        /// holds the secret's reference (`${{secrets.NAME}}`), and an
        /// action parameter that reads it is resolved at dispatch.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        secrets: Vec<SecretSite>,
    },
    /// A dispatched action finished.
    ActionFinished {
        /// The dispatch it answers.
        effect: EffectId,
        /// Its output, or why it failed.
        result: Result<Value, ActionError>,
    },
    /// An action in flight asks a question (a delegated agent's
    /// permission request) and waits for the answer; its step keeps
    /// running. The answer comes back as [`crate::Effect::AnswerAction`].
    ActionAsked(Box<Ask>),
    /// A pending decision was resolved.
    DecisionResolved {
        /// The decision id.
        decision: String,
        /// The resolution.
        resolution: Resolution,
    },
    /// A pending decision was cancelled: its step is skipped.
    DecisionCancelled {
        /// The decision id.
        decision: String,
    },
    /// A timer the VM started has fired.
    TimerFired {
        /// The timer.
        timer: TimerId,
    },
    /// A named signal was sent to the run.
    Signal {
        /// Its name.
        name: String,
        /// Its payload.
        #[serde(default)]
        payload: Value,
    },
    /// The run was cancelled.
    Cancel {
        /// Why.
        reason: String,
    },
    /// A run suspended by its deadline resumes (with a fresh deadline).
    Resume,
    /// The run waiting for a slot of its concurrency key holds one, or
    /// is refused one (`on_limit: refuse_newest`) and fails with R0135.
    Admitted {
        /// Why it was refused; none when it holds a slot.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refused: Option<String>,
    },
}

impl Event {
    /// The event's name in the log.
    pub fn name(&self) -> &'static str {
        match self {
            Event::Started { .. } => "run_started",
            Event::ActionFinished { result: Ok(_), .. } => "action_completed",
            Event::ActionFinished { result: Err(_), .. } => "action_failed",
            Event::ActionAsked(_) => "action_asked",
            Event::DecisionResolved { .. } => "decision_resolved",
            Event::DecisionCancelled { .. } => "decision_cancelled",
            Event::TimerFired { .. } => "timer_fired",
            Event::Signal { .. } => "signal_received",
            Event::Cancel { .. } => "cancel_requested",
            Event::Resume => "resume_requested",
            Event::Admitted { .. } => "run_admitted",
        }
    }
}
