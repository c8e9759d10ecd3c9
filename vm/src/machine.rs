//! The resumable VM: a deterministic state machine.
//!
//! [`Vm::apply`] takes one [`Event`] (with the time it happened) and returns
//! the [`Effect`]s it causes: actions to dispatch, timers, decisions, and
//! records of what changed. It reads no clock, does no I/O and uses no
//! randomness, so applying the same events to a fresh VM always rebuilds
//! the same state: that is how a run resumes after a crash. After replay,
//! [`Vm::pending`] lists the effects still awaiting an answer, which the
//! runtime performs again.
//!
//! # Model
//!
//! A run executes *frames*: an instance of a block (the top level, a branch
//! taken, one loop iteration, one parallel branch, a hook). A frame starts
//! each of its steps when the step's dependencies in the frame have
//! finished, in level order. A step *instance* (a step in one loop
//! iteration) runs its code: an optional guard, then one body instruction
//! that either completes at once or waits for an answer (an action result, a
//! timer, a decision, a signal, or child frames). When a frame's steps have
//! all finished, it reports to its owner (the flow step that started it, or
//! the run). An unhandled failure fails the frame, which fails its owner's
//! attempt, so a flow step's `retry` and `on_error` cover its contents.

mod admission;
mod asks;
mod failure;
mod flow;
mod frames;
mod scope;
mod state;
mod steps;
mod waits;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use serde_json::{Map, Value};

use self::state::{Frame, Inflight, Instance, PendingDecision, Phase, Timer};
pub use self::state::{RunStatus, StepStatus, StepView};
use crate::codes;
use crate::effect::{Effect, InstRef, Record, SecretSite, TimerPurpose};
use crate::error::{ActionError, Rejected, StepError};
use crate::event::{EffectId, Event, RunMeta, TimerId};
use crate::host::Host;
use crate::plan::Plan;
use crate::policy::OnTimeout;

/// A run of a Program.
#[derive(Debug, Clone)]
pub struct Vm {
    plan: Arc<Plan>,
    status: RunStatus,
    /// Time of the event being applied (milliseconds since the epoch).
    now: u64,
    started_at: u64,
    meta: RunMeta,
    inputs: Value,
    /// Where the inputs hold secrets a parent passed by reference.
    input_secrets: Vec<SecretSite>,
    context: Value,
    /// The `workflow` namespace.
    workflow: Value,
    frames: Vec<Frame>,
    /// Instances of steps outside loops, by step.
    top: Vec<Option<Instance>>,
    /// Instances of steps inside loops.
    nested: HashMap<InstRef, Instance>,
    inflight: BTreeMap<EffectId, Inflight>,
    timers: BTreeMap<TimerId, Timer>,
    decisions: BTreeMap<String, PendingDecision>,
    /// Steps waiting for signals, in the order they started waiting.
    waiters: Vec<(InstRef, String)>,
    /// Signals nobody waited for yet.
    mailbox: VecDeque<(String, Value)>,
    next_id: u64,
    /// Bytes of JSON of the action outputs the run has taken in, bounded
    /// by [`RunMeta::max_output_bytes`].
    output_bytes: u64,
    phase: Phase,
    run_timer: Option<TimerId>,
    /// The run's request for a slot of its concurrency key, if its
    /// program has one.
    admission: Option<Arc<crate::effect::AdmitRequest>>,
    /// Does it wait for that slot?
    admitting: bool,
    /// Suspended by the deadline: no step starts until [`Event::Resume`].
    halted: bool,
    output: Option<Value>,
    error: Option<StepError>,
    out: Vec<Effect>,
}

impl Vm {
    /// A run of `plan`'s program that has not started.
    pub fn new(plan: Arc<Plan>) -> Vm {
        let steps = plan.program.steps.len();
        Vm {
            plan,
            status: RunStatus::Pending,
            now: 0,
            started_at: 0,
            meta: RunMeta::default(),
            inputs: Value::Null,
            input_secrets: Vec::new(),
            context: Value::Object(Map::new()),
            workflow: Value::Null,
            frames: Vec::new(),
            top: (0..steps).map(|_| None).collect(),
            nested: HashMap::new(),
            inflight: BTreeMap::new(),
            timers: BTreeMap::new(),
            decisions: BTreeMap::new(),
            waiters: Vec::new(),
            mailbox: VecDeque::new(),
            next_id: 1,
            output_bytes: 0,
            phase: Phase::Steps,
            run_timer: None,
            admission: None,
            admitting: false,
            halted: false,
            output: None,
            error: None,
            out: Vec::new(),
        }
    }

    /// The plan this VM runs.
    pub fn plan(&self) -> &Arc<Plan> {
        &self.plan
    }

    /// Applies one event that happened at `at` (milliseconds since the
    /// epoch) and returns the effects it causes. A rejected event changes
    /// nothing and must not be logged.
    pub fn apply(
        &mut self,
        at: u64,
        event: &Event,
        host: &dyn Host,
    ) -> Result<Vec<Effect>, Rejected> {
        let mut out = Vec::new();
        self.apply_into(at, event, host, &mut out)?;
        Ok(out)
    }

    /// Like [`Vm::apply`], appending the effects to `out` (no allocation
    /// when `out` has room).
    pub fn apply_into(
        &mut self,
        at: u64,
        event: &Event,
        host: &dyn Host,
        out: &mut Vec<Effect>,
    ) -> Result<(), Rejected> {
        self.check(event)?;
        self.now = self.now.max(at);
        std::mem::swap(&mut self.out, out);
        let before = self.status;
        let mark = self.out.len();
        match event {
            Event::Started {
                inputs,
                meta,
                secrets,
            } => self.start(inputs, meta, secrets, host),
            Event::ActionFinished { effect, result } => self.action_finished(*effect, result, host),
            Event::ActionAsked(ask) => self.action_asked(ask),
            Event::DecisionResolved {
                decision,
                resolution,
            } => {
                self.decision_resolved(decision, resolution, host);
            }
            Event::DecisionCancelled { decision } => self.decision_cancelled(decision, host),
            Event::TimerFired { timer } => self.timer_fired(*timer, host),
            Event::Signal { name, payload } => self.signal(name, payload, host),
            Event::Cancel { reason } => self.cancel_run(reason),
            Event::Resume => self.resume(host),
            Event::Admitted { refused } => self.admitted(refused.as_deref(), host),
        }
        let answered = matches!(
            event,
            Event::DecisionResolved { .. }
                | Event::DecisionCancelled { .. }
                | Event::Signal { .. }
                | Event::Admitted { .. }
        );
        self.settle(before, mark, answered);
        std::mem::swap(&mut self.out, out);
        Ok(())
    }

    /// Refuses events that do not fit the current state.
    fn check(&self, event: &Event) -> Result<(), Rejected> {
        let reject = |message: String| Err(Rejected::new(codes::R0114, message));
        match event {
            Event::Started { .. } if self.status != RunStatus::Pending => {
                reject("the run has already started".into())
            }
            Event::Started { .. } => Ok(()),
            _ if self.status == RunStatus::Pending => reject("the run has not started".into()),
            _ if self.status.is_terminal() => reject(format!(
                "the run has already ended ({})",
                self.status.as_str()
            )),
            Event::ActionFinished { effect, .. } if !self.inflight.contains_key(effect) => {
                reject(format!("no action {effect} is in flight"))
            }
            Event::ActionAsked(ask) if !self.inflight.contains_key(&ask.effect) => {
                reject(format!("no action {} is in flight", ask.effect))
            }
            Event::ActionAsked(ask) => match ask.problem() {
                Some(problem) => reject(problem),
                None => Ok(()),
            },
            Event::TimerFired { timer } if !self.timers.contains_key(timer) => {
                reject(format!("no timer {timer} is running"))
            }
            Event::DecisionResolved {
                decision,
                resolution,
            } => self.check_resolution(decision, resolution),
            Event::DecisionCancelled { decision } if !self.decisions.contains_key(decision) => {
                reject(format!("no decision `{decision}` is pending"))
            }
            Event::Signal { name, payload } => self.check_signal(name, payload),
            Event::Admitted { .. } if !self.admitting => {
                reject("the run does not wait for a slot of its concurrency key".into())
            }
            Event::Resume if !self.halted => {
                reject("the run is not suspended by its deadline; nothing to resume".into())
            }
            _ => Ok(()),
        }
    }

    fn start(&mut self, inputs: &Value, meta: &RunMeta, secrets: &[SecretSite], host: &dyn Host) {
        self.started_at = self.now;
        self.meta = meta.clone();
        self.inputs = inputs.clone();
        self.input_secrets = secrets.to_vec();
        if let Some(c) = self.plan.program.run.context {
            self.context = self.plan.program.consts[c as usize].clone();
        }
        self.workflow = self.workflow_namespace();
        self.status = RunStatus::Active;
        self.record(Record::RunStarted);
        if self.ask_admission() {
            return;
        }
        self.begin(host);
    }

    /// Starts the steps (and the run's deadline).
    fn begin(&mut self, host: &dyn Host) {
        if let Some(ms) = self.plan.program.run.timeout_ms {
            self.run_timer = Some(self.start_timer(ms, TimerPurpose::RunTimeout, None));
        }
        let root = self.new_frame(0, Vec::new(), state::Owner::Run, None);
        self.phase = Phase::Steps;
        self.start_frame(root, host);
    }

    /// The `workflow` namespace: facts about the run.
    fn workflow_namespace(&self) -> Value {
        let meta = &self.meta;
        let mut map = Map::new();
        map.insert("run_id".into(), meta.run_id.clone().into());
        map.insert("id".into(), meta.run_id.clone().into());
        let name = if meta.name.is_empty() {
            self.plan.program.header.name.clone()
        } else {
            meta.name.clone()
        };
        map.insert("name".into(), name.into());
        let opt = |v: &Option<String>| v.clone().map_or(Value::Null, Value::String);
        map.insert("template_name".into(), opt(&meta.template_name));
        map.insert("template_version".into(), opt(&meta.template_version));
        map.insert("agent_id".into(), opt(&meta.agent_id));
        map.insert("parent_id".into(), opt(&meta.parent_id));
        map.insert("workspace".into(), opt(&meta.workspace));
        map.insert("session_id".into(), opt(&meta.session_id));
        map.insert("started_at".into(), rfc3339(self.started_at).into());
        map.insert("error".into(), Value::Null);
        Value::Object(map)
    }

    /// Emits an effect.
    fn emit(&mut self, effect: Effect) {
        self.out.push(effect);
    }

    /// Emits a record.
    fn record(&mut self, record: Record) {
        self.out.push(Effect::Record(record));
    }

    fn fresh_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Starts a timer of `ms` from now.
    fn start_timer(&mut self, ms: u64, purpose: TimerPurpose, inst: Option<InstRef>) -> TimerId {
        let timer = self.fresh_id();
        let due = self.now.saturating_add(ms);
        self.timers.insert(
            timer,
            Timer {
                purpose: purpose.clone(),
                inst: inst.clone(),
                due,
            },
        );
        self.emit(Effect::StartTimer {
            timer,
            due,
            purpose,
            inst,
        });
        timer
    }

    fn cancel_timer(&mut self, timer: TimerId) {
        if self.timers.remove(&timer).is_some() {
            self.emit(Effect::CancelTimer { timer });
        }
    }

    fn timer_fired(&mut self, timer: TimerId, host: &dyn Host) {
        let Some(t) = self.timers.remove(&timer) else {
            return;
        };
        match (t.purpose, t.inst) {
            (TimerPurpose::RunTimeout, _) => self.run_timed_out(host),
            (TimerPurpose::Retry, Some(inst)) => self.retry_now(&inst, host),
            (TimerPurpose::Sleep, Some(inst)) => self.sleep_done(&inst, host),
            (TimerPurpose::StepTimeout, Some(inst)) => self.step_timed_out(&inst, host),
            (TimerPurpose::SignalTimeout, Some(inst)) => self.signal_timed_out(&inst, host),
            (TimerPurpose::DecisionTimeout, Some(inst)) => {
                self.decision_timed_out(timer, &inst, host);
            }
            _ => {}
        }
    }

    fn run_timed_out(&mut self, host: &dyn Host) {
        self.run_timer = None;
        let action = self.plan.program.run.on_timeout.unwrap_or(OnTimeout::Fail);
        self.record(Record::RunTimedOut {
            action: action.as_str().to_owned(),
        });
        match action {
            OnTimeout::Fail => {
                let running = self.running_leaves();
                let message = match running.as_slice() {
                    [] => "the workflow timed out".to_owned(),
                    [one] => format!("the workflow timed out while step `{one}` was running"),
                    many => format!(
                        "the workflow timed out while steps {} were running",
                        many.iter()
                            .map(|s| format!("`{s}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                };
                let error = ActionError::new(codes::R0105, "TIMEOUT_ERROR", message, false);
                self.fail_run(
                    StepError {
                        step: running.into_iter().next().unwrap_or_default(),
                        error,
                    },
                    host,
                );
            }
            OnTimeout::Cancel => self.cancel_run("the workflow timed out"),
            OnTimeout::Suspend => self.halt(),
        }
    }

    fn resume(&mut self, host: &dyn Host) {
        self.halted = false;
        if let Some(ms) = self.plan.program.run.timeout_ms {
            self.run_timer = Some(self.start_timer(ms, TimerPurpose::RunTimeout, None));
        }
        self.restart_halted(host);
    }

    /// Works out the run's status after an event and records a change:
    /// a suspended run that an event moved on (a step ran, completed or was
    /// skipped) resumed, before what it did (the effects from `mark` on),
    /// even when it suspends again straight away (a reasoning step after
    /// a reasoning step), or ends because of an answer (`answered`).
    fn settle(&mut self, before: RunStatus, mark: usize, answered: bool) {
        let moved_on = |out: &[Effect]| out[mark..].iter().any(|e| matches!(e, Effect::Record(_)));
        if self.status.is_terminal() || self.status == RunStatus::Pending {
            // A suspended run that an answer finished resumed first; one
            // cancelled or timed out did not.
            if before == RunStatus::Suspended
                && answered
                && matches!(self.status, RunStatus::Completed | RunStatus::Failed)
                && moved_on(&self.out)
            {
                self.out.insert(mark, Effect::Record(Record::RunResumed));
            }
            return;
        }
        let busy = !self.inflight.is_empty()
            || self
                .timers
                .values()
                .any(|t| matches!(t.purpose, TimerPurpose::Retry | TimerPurpose::Sleep));
        // A run waiting for a slot of its concurrency key stays active: it
        // asks nobody anything, and a caller waiting on it waits on.
        let waiting = !self.decisions.is_empty() || !self.waiters.is_empty();
        self.status = if !busy && (waiting || self.halted) {
            RunStatus::Suspended
        } else {
            RunStatus::Active
        };
        match (before, self.status) {
            (RunStatus::Active, RunStatus::Suspended) => self.record(Record::RunSuspended),
            (RunStatus::Suspended, RunStatus::Active) => {
                self.out.insert(mark, Effect::Record(Record::RunResumed));
            }
            (RunStatus::Suspended, RunStatus::Suspended) if moved_on(&self.out) => {
                self.out.insert(mark, Effect::Record(Record::RunResumed));
                self.record(Record::RunSuspended);
            }
            _ => {}
        }
    }

    // ----- queries -----

    /// The run's status.
    pub fn status(&self) -> RunStatus {
        self.status
    }

    /// Bytes of JSON of the action outputs the run has taken in (what
    /// [`RunMeta::max_output_bytes`] bounds); a replay counts the same.
    pub fn output_bytes(&self) -> u64 {
        self.output_bytes
    }

    /// When the run started (milliseconds since the epoch, its `run_started`).
    pub fn started_at(&self) -> u64 {
        self.started_at
    }

    /// The key of the run's concurrency slot, if its program has one.
    pub fn concurrency_key(&self) -> Option<&str> {
        self.admission.as_deref().map(|a| a.key.as_str())
    }

    /// The run's output, once it completed.
    pub fn output(&self) -> Option<&Value> {
        self.output.as_ref()
    }

    /// Why the run failed.
    pub fn error(&self) -> Option<&StepError> {
        self.error.as_ref()
    }

    /// Facts about the run, fixed when it started.
    pub fn meta(&self) -> &RunMeta {
        &self.meta
    }

    /// The run's inputs.
    pub fn inputs(&self) -> &Value {
        &self.inputs
    }

    /// Where the inputs hold secrets passed by reference.
    pub fn input_secrets(&self) -> &[SecretSite] {
        &self.input_secrets
    }

    /// The `context` namespace.
    pub fn context(&self) -> &Value {
        &self.context
    }

    /// The name of a step instance: the step id, with loop indices in
    /// brackets (`hash`, `hash[2]`, `hash[1,0]`).
    pub fn instance_name(&self, inst: &InstRef) -> String {
        self.plan.instance_name(inst)
    }

    /// The step instances started and not finished that hold no other
    /// (a loop, parallel or condition step runs while its steps do), in
    /// step order.
    fn running_leaves(&self) -> Vec<String> {
        self.steps()
            .into_iter()
            .filter(|view| !view.status.is_finished() && view.status != StepStatus::Pending)
            .filter(|view| {
                self.plan
                    .program
                    .steps
                    .get(view.inst.step as usize)
                    .is_some_and(|step| {
                        !matches!(
                            step.kind,
                            crate::program::StepKind::Loop
                                | crate::program::StepKind::Parallel
                                | crate::program::StepKind::Condition
                        )
                    })
            })
            .map(|view| view.name)
            .collect()
    }

    /// Every step instance that has started, in step order.
    pub fn steps(&self) -> Vec<StepView> {
        let mut views: Vec<StepView> = Vec::new();
        for (step, inst) in self.top.iter().enumerate() {
            if let Some(inst) = inst {
                views.push(self.view(
                    &InstRef {
                        step: step as u32,
                        iters: Vec::new(),
                    },
                    inst,
                ));
            }
        }
        let mut nested: Vec<(&InstRef, &Instance)> = self.nested.iter().collect();
        nested.sort_by(|a, b| a.0.cmp(b.0));
        for (key, inst) in nested {
            views.push(self.view(key, inst));
        }
        views
    }

    /// One step instance, if it has started.
    pub fn step(&self, key: &InstRef) -> Option<StepView> {
        self.inst(key).map(|inst| self.view(key, inst))
    }

    /// Is the run suspended by its deadline (`on_timeout: suspend`), waiting
    /// for [`Event::Resume`]?
    pub fn halted(&self) -> bool {
        self.halted && !self.status.is_terminal()
    }

    fn view(&self, key: &InstRef, inst: &Instance) -> StepView {
        StepView {
            name: self.instance_name(key),
            inst: key.clone(),
            status: inst.status,
            attempt: inst.attempt,
            output: inst.output.clone(),
            error: inst.error.clone(),
        }
    }

    /// The effects still awaiting an answer: after replaying a log, the
    /// runtime performs these again (actions with the same idempotency key).
    pub fn pending(&self) -> Vec<Effect> {
        let mut out = Vec::new();
        for flight in self.inflight.values() {
            out.push(Effect::Dispatch(Arc::clone(&flight.dispatch)));
        }
        for (&timer, t) in &self.timers {
            out.push(Effect::StartTimer {
                timer,
                due: t.due,
                purpose: t.purpose.clone(),
                inst: t.inst.clone(),
            });
        }
        for d in self.decisions.values() {
            out.push(Effect::RequestDecision(Arc::clone(&d.request)));
        }
        for (inst, name) in &self.waiters {
            out.push(Effect::AwaitSignal {
                inst: inst.clone(),
                name: name.clone(),
            });
        }
        if let Some(request) = self.admission.as_ref().filter(|_| self.admitting) {
            out.push(Effect::Admit(Arc::clone(request)));
        }
        out
    }

    /// The pending decisions, by id.
    pub fn pending_decisions(&self) -> impl Iterator<Item = &crate::effect::DecisionRequest> {
        self.decisions.values().map(|d| d.request.as_ref())
    }

    /// The signal names the run waits for.
    pub fn awaited_signals(&self) -> Vec<String> {
        self.waiters.iter().map(|(_, name)| name.clone()).collect()
    }
}

/// Milliseconds since the epoch as RFC 3339 UTC text, the one time format
/// of results and expressions (formatting reads no clock).
fn rfc3339(ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_millis(at).to_string()
}
