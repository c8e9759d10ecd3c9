//! One scheduling round: the events applied together, and everything they
//! write (one [`Commit`]) and do (the effects, performed after the commit).

use std::collections::HashSet;

use opcode_vm::effect::{DecisionRequest, Dispatch, Effect};
use opcode_vm::event::{EffectId, Event};
use opcode_vm::{InstRef, Plan, Vm};
use serde_json::Value;
use tokio::sync::oneshot;

use super::ExecError;
use super::step_rows::StepRows;
use crate::log::{self, stamp};
use crate::store::{
    Commit, DecisionChange, DecisionRow, DecisionStatus, NewEntry, StepRow, TimerChange, TimerRow,
    WorkflowUpdate,
};

/// Where to send the answer to a delivered event.
pub type Reply = oneshot::Sender<Result<(), ExecError>>;

/// The round being built.
pub struct Round {
    /// The time of every event in the round (milliseconds).
    pub at_ms: u64,
    /// The same as log text.
    pub at: String,
    /// Entries to append.
    pub entries: Vec<NewEntry>,
    timers: Vec<TimerChange>,
    decisions: Vec<DecisionChange>,
    /// Inbox messages consumed.
    pub inbox_taken: Vec<i64>,
    /// Answers to send once the commit is durable.
    pub replies: Vec<(Reply, Result<(), ExecError>)>,
    /// Effects to perform once the commit is durable.
    pub perform: Vec<Effect>,
    /// Did the run start in this round?
    pub started: bool,
    /// Did an action ask a question that opened a decision?
    pub asked: bool,
}

impl Round {
    /// An empty round at `at_ms`.
    pub fn new(at_ms: u64) -> Round {
        Round {
            at_ms,
            at: stamp(at_ms),
            entries: Vec::new(),
            timers: Vec::new(),
            decisions: Vec::new(),
            inbox_taken: Vec::new(),
            replies: Vec::new(),
            perform: Vec::new(),
            started: false,
            asked: false,
        }
    }

    /// Is there nothing to write?
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.inbox_taken.is_empty()
    }

    /// Does the run now wait on other runs or on an answer to a question
    /// its action asked? It rests, held: a run's view reads its running
    /// steps to name what holds it (`summary`).
    pub fn holds(&self) -> bool {
        self.asked
            || self.perform.iter().any(
                |e| matches!(e, Effect::Dispatch(d) if opcode_stdlib::exec::only_waits(&d.action)),
            )
    }

    /// Does the round answer a caller's input (a reply it waits for, a
    /// message from the inbox)?
    pub fn answers(&self) -> bool {
        !self.replies.is_empty() || !self.inbox_taken.is_empty()
    }

    /// Logs an applied input and what it settles by itself.
    pub fn applied(&mut self, event: &Event, step_id: Option<String>) {
        self.entries.push(log::input(&self.at, event, step_id));
        match event {
            Event::Started { .. } => self.started = true,
            Event::TimerFired { timer } => self.timers.push(TimerChange::Clear(*timer)),
            Event::DecisionResolved {
                decision,
                resolution,
            } => self.decisions.push(DecisionChange::Settle {
                id: decision.clone(),
                status: DecisionStatus::Resolved,
                resolution: serde_json::to_string(resolution).ok(),
                resolved_by: resolution.resolved_by.clone(),
                at: self.at.clone(),
            }),
            _ => {}
        }
    }

    /// Takes the effects of one applied event; the step instances they
    /// change are noted in `rows`.
    pub fn absorb(
        &mut self,
        effects: &mut Vec<Effect>,
        cause: &Event,
        plan: &Plan,
        rows: &mut StepRows,
    ) {
        for (n, effect) in effects.iter().enumerate() {
            let Effect::Record(record) = effect else {
                continue;
            };
            rows.note(record, &self.at);
            let call = match record {
                opcode_vm::Record::StepStarted { inst, .. } => {
                    attempt_call(&effects[n + 1..], inst)
                }
                _ => None,
            };
            self.entries.push(log::record(&self.at, record, plan, call));
        }
        for effect in effects.drain(..) {
            match effect {
                // Recorded above; a signal wait needs no row of its own.
                Effect::Record(_) | Effect::AwaitSignal { .. } => {}
                Effect::StartTimer {
                    timer,
                    due,
                    ref purpose,
                    ref inst,
                } => {
                    self.timers.push(TimerChange::Set(TimerRow {
                        timer_id: timer,
                        due_at: stamp(due),
                        purpose: purpose.as_str().to_owned(),
                        step_id: inst.as_ref().map(|i| plan.instance_name(i)),
                    }));
                    self.perform.push(effect);
                }
                Effect::CancelTimer { timer } => {
                    self.timers.push(TimerChange::Clear(timer));
                    self.perform.push(effect);
                }
                Effect::RequestDecision(ref request) => {
                    self.asked |= matches!(cause, Event::ActionAsked(_));
                    self.decisions.push(DecisionChange::Ask(Box::new(
                        self.decision_row(request, plan),
                    )));
                    self.perform.push(effect);
                }
                Effect::CancelDecision { ref id } => {
                    let status = if matches!(cause, Event::TimerFired { .. }) {
                        DecisionStatus::TimedOut
                    } else {
                        DecisionStatus::Cancelled
                    };
                    self.decisions.push(DecisionChange::Settle {
                        id: id.clone(),
                        status,
                        resolution: None,
                        resolved_by: Some("system".into()),
                        at: self.at.clone(),
                    });
                }
                Effect::Dispatch(_)
                | Effect::Admit(_)
                | Effect::CancelDispatch { .. }
                | Effect::AnswerAction { .. } => self.perform.push(effect),
            }
        }
    }

    /// Drops the dispatches cancelled before they were performed, with
    /// their cancels: such an action is never started.
    pub fn drop_cancelled_dispatches(&mut self) {
        let cancelled: HashSet<EffectId> = self
            .perform
            .iter()
            .filter_map(|e| match e {
                Effect::CancelDispatch { effect } => Some(*effect),
                _ => None,
            })
            .collect();
        if cancelled.is_empty() {
            return;
        }
        let unstarted: HashSet<EffectId> = self
            .perform
            .iter()
            .filter_map(|e| match e {
                Effect::Dispatch(d) if cancelled.contains(&d.effect) => Some(d.effect),
                _ => None,
            })
            .collect();
        self.perform.retain(|e| match e {
            Effect::Dispatch(d) => !unstarted.contains(&d.effect),
            Effect::CancelDispatch { effect } => !unstarted.contains(effect),
            _ => true,
        });
    }

    fn decision_row(&self, request: &DecisionRequest, plan: &Plan) -> DecisionRow {
        DecisionRow {
            id: request.id.clone(),
            step_id: plan.id(request.inst.step).to_owned(),
            prompt: request.prompt.clone().unwrap_or_default(),
            options: serde_json::to_string(&request.options).unwrap_or_else(|_| "[]".into()),
            context: request.data.to_string(),
            fallback: request.fallback.clone(),
            target_agent: request.target_agent.clone(),
            timeout_at: request.timeout_at.map(stamp),
            status: DecisionStatus::Pending,
            created_at: self.at.clone(),
            ..DecisionRow::default()
        }
    }

    /// The commit: entries after `after_seq`, the step rows written with
    /// it, and the workflow's state when `update` asks for it.
    pub fn commit(
        &mut self,
        workflow_id: &str,
        after_seq: u64,
        steps: Vec<StepRow>,
        update: Option<WorkflowUpdate>,
    ) -> Commit {
        Commit {
            workflow_id: workflow_id.to_owned(),
            create: None,
            after_seq,
            entries: std::mem::take(&mut self.entries),
            blobs: Vec::new(),
            update,
            steps,
            timers: std::mem::take(&mut self.timers),
            decisions: std::mem::take(&mut self.decisions),
            inbox_taken: std::mem::take(&mut self.inbox_taken),
            lease: None,
            fence: None,
        }
    }
}

/// The workflow's derived state after a round.
pub fn workflow_update(
    vm: &Vm,
    at: &str,
    started: bool,
    context: Option<&Value>,
) -> WorkflowUpdate {
    let status = vm.status();
    WorkflowUpdate {
        status: status.into(),
        output: vm.output().map(Value::to_string),
        error: vm.error().and_then(|e| serde_json::to_string(e).ok()),
        context: context.map(Value::to_string),
        started_at: started.then(|| at.to_owned()),
        completed_at: status.is_terminal().then(|| at.to_owned()),
        updated_at: at.to_owned(),
    }
}

/// The dispatch of the attempt whose start is just before `after`: the VM
/// runs a step's code right after starting it, so the dispatch comes
/// before the next step's start (looked for no further).
fn attempt_call<'a>(after: &'a [Effect], inst: &InstRef) -> Option<&'a Dispatch> {
    after
        .iter()
        .take_while(|e| !matches!(e, Effect::Record(opcode_vm::Record::StepStarted { .. })))
        .find_map(|e| match e {
            Effect::Dispatch(d) if d.inst == *inst => Some(d.as_ref()),
            _ => None,
        })
}
