//! Running a step instance's code: the guard, then the body instruction.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::Vm;
use super::state::{FrameId, Instance, StepStatus, Wait};
use crate::codes;
use crate::effect::{DecisionRequest, Dispatch, Effect, InstRef, Record, TimerPurpose};
use crate::error::ActionError;
use crate::host::Host;
use crate::instr::{Instr, StepId, TemplateId};
use crate::machine::state::PendingDecision;

impl Vm {
    /// Starts step `step` in frame `f`.
    pub(super) fn start_step(&mut self, f: FrameId, step: StepId, host: &dyn Host) {
        let key = InstRef {
            step,
            iters: self.frames[f].iters.clone(),
        };
        self.create_instance(&key, f, None);
        let carried = self.meta.carried.get(&self.instance_name(&key)).cloned();
        match carried {
            Some(output) => self.complete_carried(&key, output, host),
            None => self.begin_attempt(&key, true, host),
        }
    }

    /// Creates (or re-creates, keeping the attempt count) an instance.
    pub(super) fn create_instance(
        &mut self,
        key: &InstRef,
        f: FrameId,
        stands_in_for: Option<InstRef>,
    ) {
        let attempt = self.inst(key).map_or(0, |i| i.attempt);
        self.put_inst(
            key.clone(),
            Instance {
                status: StepStatus::Pending,
                attempt,
                frame: f,
                pc: 0,
                output: Value::Null,
                error: None,
                wait: Wait::Nothing,
                flow: None,
                deadline: None,
                stands_in_for,
            },
        );
    }

    /// Starts an attempt: from the guard (first attempt), or from the body (a retry).
    pub(super) fn begin_attempt(&mut self, key: &InstRef, with_guard: bool, host: &dyn Host) {
        let info = &self.plan.program.steps[key.step as usize];
        let (start, timeout) = (info.code.start, info.timeout_ms);
        let first_is_guard = self.plan.program.code[start as usize].is_guard();
        let pc = if !with_guard && first_is_guard {
            start + 1
        } else {
            start
        };
        let Some(inst) = self.inst_mut(key) else {
            return;
        };
        inst.attempt += 1;
        inst.status = StepStatus::Running;
        inst.error = None;
        inst.wait = Wait::Nothing;
        inst.flow = None;
        inst.pc = pc;
        let attempt = inst.attempt;
        self.record(Record::StepStarted {
            inst: key.clone(),
            attempt,
        });
        if let Some(ms) = timeout {
            let timer = self.start_timer(ms, TimerPurpose::StepTimeout, Some(key.clone()));
            if let Some(inst) = self.inst_mut(key) {
                inst.deadline = Some(timer);
            }
        }
        self.run_code(key, host);
    }

    /// Executes instructions from the instance's `pc` until one waits or the step ends.
    fn run_code(&mut self, key: &InstRef, host: &dyn Host) {
        loop {
            let Some(pc) = self.inst(key).map(|i| i.pc) else {
                return;
            };
            let plan = self.plan.clone();
            let Some(instr) = plan.program.code.get(pc as usize) else {
                return;
            };
            match instr {
                Instr::Guard { expr } => match self.eval(*expr, key, None, host) {
                    Ok(Value::Bool(true)) => {
                        if let Some(inst) = self.inst_mut(key) {
                            inst.pc += 1;
                        }
                    }
                    Ok(Value::Bool(false)) => return self.skip(key, "guard", host),
                    Ok(other) => {
                        let message =
                            format!("the guard must give true or false, not {}", kind_of(&other));
                        return self.fail_attempt(key, expression_error(message), host);
                    }
                    Err(error) => return self.fail_attempt(key, error, host),
                },
                Instr::Call {
                    action,
                    params,
                    scope,
                } => return self.call(key, action, *params, *scope, host),
                Instr::Branch { expr, table } => return self.branch(key, *expr, *table, host),
                Instr::ForEach { over, max_iter, .. } => {
                    return self.for_each(key, *over, *max_iter, host);
                }
                Instr::Repeat { .. } => return self.loop_next(key, host),
                Instr::Fork { .. } => return self.fork(key, host),
                Instr::Sleep { ms } => {
                    let timer = self.start_timer(*ms, TimerPurpose::Sleep, Some(key.clone()));
                    self.set_wait(key, Wait::Sleep(timer));
                    return;
                }
                Instr::AwaitSignal { name, timeout_ms } => {
                    return self.await_signal(key, name, *timeout_ms, host);
                }
                Instr::Decide { decision } => return self.decide(key, *decision, host),
            }
        }
    }

    pub(super) fn set_wait(&mut self, key: &InstRef, wait: Wait) {
        if let Some(inst) = self.inst_mut(key) {
            inst.wait = wait;
        }
    }

    /// Dispatches an action.
    fn call(
        &mut self,
        key: &InstRef,
        action: &str,
        params: u32,
        scope: Option<u32>,
        host: &dyn Host,
    ) {
        let f = self.inst(key).map_or(0, |i| i.frame);
        let mut secrets = Vec::new();
        let rendered = self.render(params, f, &key.iters, Some(&mut secrets));
        let params = match rendered {
            Ok(v) => v,
            Err(error) => return self.fail_attempt(key, error, host),
        };
        let scope = scope.map(|expr| self.scope_value(expr, f, &key.iters));
        let info = &self.plan.program.steps[key.step as usize];
        let isolation = info
            .isolation
            .map(|c| self.plan.program.consts[c as usize].clone());
        let timeout_ms = info.timeout_ms;
        let rate = info
            .rate_limit
            .as_ref()
            .map(|limit| self.rate_of(limit, &info.id));
        let attempt = self.inst(key).map_or(1, |i| i.attempt);
        let effect = self.fresh_id();
        let dispatch = Arc::new(Dispatch {
            effect,
            inst: key.clone(),
            attempt,
            action: action.to_owned(),
            params,
            secrets,
            timeout_ms,
            scope,
            isolation,
            rate,
        });
        self.inflight.insert(
            effect,
            super::state::Inflight {
                dispatch: Arc::clone(&dispatch),
                asks: std::collections::BTreeMap::new(),
            },
        );
        self.set_wait(key, Wait::Action(effect));
        self.emit(Effect::Dispatch(dispatch));
        let _ = host;
    }

    /// Waits for a signal, or takes one already in the mailbox.
    fn await_signal(
        &mut self,
        key: &InstRef,
        name: &str,
        timeout_ms: Option<u64>,
        host: &dyn Host,
    ) {
        let id = self.instance_name(key);
        if let Some(i) = self.mailbox.iter().position(|(n, _)| n == name || *n == id)
            && let Some((_, payload)) = self.mailbox.remove(i)
        {
            return self.complete(key, signal_output(name, payload), host);
        }
        let timer = timeout_ms
            .map(|ms| self.start_timer(ms, TimerPurpose::SignalTimeout, Some(key.clone())));
        self.waiters.push((key.clone(), name.to_owned()));
        if let Some(inst) = self.inst_mut(key) {
            inst.status = StepStatus::Suspended;
            inst.wait = Wait::Signal(timer);
        }
        self.record(Record::StepSuspended { inst: key.clone() });
        self.emit(Effect::AwaitSignal {
            inst: key.clone(),
            name: name.to_owned(),
        });
    }

    /// Asks for a decision.
    fn decide(&mut self, key: &InstRef, decision: u32, host: &dyn Host) {
        let plan = self.plan.clone();
        let d = &plan.program.decisions[decision as usize];
        let f = self.inst(key).map_or(0, |i| i.frame);
        let mut data = Map::new();
        for (name, template) in &d.data_inject {
            match self.render(*template, f, &key.iters, None) {
                Ok(v) => {
                    data.insert(name.clone(), v);
                }
                Err(error) => return self.fail_attempt(key, error, host),
            }
        }
        let prompt = match self.decision_text(d.prompt_template, d.prompt.as_deref(), f, &key.iters)
        {
            Ok(prompt) => prompt,
            Err(error) => return self.fail_attempt(key, error, host),
        };
        let mut options = d.options.clone();
        for option in &mut options {
            let template = option.description_template.take();
            match self.decision_text(template, option.description.as_deref(), f, &key.iters) {
                Ok(description) => option.description = description,
                Err(error) => return self.fail_attempt(key, error, host),
            }
        }
        let id = self.instance_name(key);
        let timer = d
            .timeout_ms
            .map(|ms| self.start_timer(ms, TimerPurpose::DecisionTimeout, Some(key.clone())));
        let request = Arc::new(DecisionRequest {
            id: id.clone(),
            inst: key.clone(),
            prompt,
            options,
            data: Value::Object(data),
            timeout_at: d.timeout_ms.map(|ms| self.now.saturating_add(ms)),
            fallback: d.fallback.clone(),
            target_agent: d.target_agent.clone(),
        });
        self.decisions.insert(
            id.clone(),
            PendingDecision {
                request: Arc::clone(&request),
                timer,
                asked_by: None,
            },
        );
        if let Some(inst) = self.inst_mut(key) {
            inst.status = StepStatus::Suspended;
            inst.wait = Wait::Decision(id);
        }
        self.record(Record::StepSuspended { inst: key.clone() });
        self.emit(Effect::RequestDecision(request));
    }

    /// A decision's text: its template rendered for the reader, or as
    /// written when it reads no value.
    fn decision_text(
        &self,
        template: Option<TemplateId>,
        written: Option<&str>,
        f: FrameId,
        iters: &[u32],
    ) -> Result<Option<String>, ActionError> {
        match template {
            Some(t) => self.render(t, f, iters, None).map(|v| Some(as_text(v))),
            None => Ok(written.map(str::to_owned)),
        }
    }

    /// The step completed with `output`.
    pub(super) fn complete(&mut self, key: &InstRef, output: Value, host: &dyn Host) {
        self.completed(key, output, None, host);
    }

    /// The step completes at once with the output the re-run run's
    /// instance gave, without an attempt.
    fn complete_carried(&mut self, key: &InstRef, output: Value, host: &dyn Host) {
        let from = self.meta.rerun_of.clone();
        self.completed(key, output, from, host);
    }

    fn completed(
        &mut self,
        key: &InstRef,
        output: Value,
        carried_from: Option<String>,
        host: &dyn Host,
    ) {
        self.set_finished(key, StepStatus::Completed, output.clone());
        self.record(Record::StepCompleted {
            inst: key.clone(),
            output: output.clone(),
            carried_from,
        });
        self.after_finish(key, output, host);
    }

    /// The step was skipped.
    pub(super) fn skip(&mut self, key: &InstRef, reason: &str, host: &dyn Host) {
        self.set_finished(key, StepStatus::of_skip(reason), Value::Null);
        self.record(Record::StepSkipped {
            inst: key.clone(),
            reason: reason.to_owned(),
        });
        self.after_finish(key, Value::Null, host);
    }

    /// A finished step releases its frame, or, when it is a fallback, the
    /// step it stands in for (which takes its output).
    pub(super) fn after_finish(&mut self, key: &InstRef, output: Value, host: &dyn Host) {
        match self.inst(key).and_then(|i| i.stands_in_for.clone()) {
            Some(original) => {
                if let Some(inst) = self.inst_mut(&original) {
                    inst.output = output;
                    inst.wait = Wait::Nothing;
                }
                self.step_finished(&original, host);
            }
            None => self.step_finished(key, host),
        }
    }
}

/// A CEL evaluation error as an action error.
pub(super) fn expression_error(message: String) -> ActionError {
    ActionError::new(codes::R0103, "EXECUTION_ERROR", message, false)
}

/// The JSON kind of a value, for messages.
pub(super) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A wait step's output for a received signal.
pub(super) fn signal_output(name: &str, payload: Value) -> Value {
    let mut map = Map::new();
    map.insert("signal".into(), name.into());
    map.insert("payload".into(), payload);
    Value::Object(map)
}

/// A rendered value as the text a person reads: a string as it is, anything
/// else as compact JSON.
fn as_text(value: Value) -> String {
    match value {
        Value::String(s) => s,
        other => other.to_string(),
    }
}
