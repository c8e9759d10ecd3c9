//! Answers to what steps wait for: action results, wait timers, signals and
//! decisions.

use serde_json::{Map, Value};

use super::Vm;
use super::state::{StepStatus, Wait};
use super::steps::signal_output;
use crate::codes;
use crate::effect::{Effect, InstRef};
use crate::error::{ActionError, Rejected};
use crate::event::{EffectId, Resolution, TimerId};
use crate::host::Host;

impl Vm {
    /// A dispatched action finished.
    pub(super) fn action_finished(
        &mut self,
        effect: EffectId,
        result: &Result<Value, ActionError>,
        host: &dyn Host,
    ) {
        let Some(flight) = self.drop_flight(effect) else {
            return;
        };
        let key = flight.dispatch.inst.clone();
        if !self
            .inst(&key)
            .is_some_and(|i| i.wait == Wait::Action(effect))
        {
            return;
        }
        match result {
            Ok(output) => {
                let updates = (flight.dispatch.action == "workflow.context")
                    .then(|| flight.dispatch.params.get("data"))
                    .flatten();
                let taken = self
                    .take_in(output)
                    .and_then(|()| updates.map_or(Ok(()), |data| self.take_in(data)));
                if let Err(error) = taken {
                    self.set_wait(&key, Wait::Nothing);
                    self.fail_attempt(&key, error, host);
                    return;
                }
                if updates.is_some() {
                    self.update_context(&flight.dispatch.params);
                }
                self.complete(&key, output.clone(), host);
            }
            Err(error) => {
                self.set_wait(&key, Wait::Nothing);
                self.fail_attempt(&key, error.clone(), host);
            }
        }
    }

    /// Counts `output` against the run's budget of output bytes
    /// ([`RunMeta::max_output_bytes`](crate::event::RunMeta)): R0130
    /// (`run_outputs`) when taking it in would pass the budget; it is then
    /// not kept, and the attempt fails.
    fn take_in(&mut self, output: &Value) -> Result<(), ActionError> {
        let max = self.max_output_bytes();
        let room = max.saturating_sub(self.output_bytes);
        let bytes = crate::limits::json_bytes(output, room);
        if bytes > room {
            let total = self.output_bytes.saturating_add(bytes);
            let message = format!(
                "the run's action outputs would hold over {max} bytes (limits.run_outputs); \
                 this output is not kept"
            );
            return Err(crate::limits::exceeded("run_outputs", total, max, message));
        }
        self.output_bytes += bytes;
        Ok(())
    }

    /// The run's budget of output bytes.
    fn max_output_bytes(&self) -> u64 {
        self.meta
            .max_output_bytes
            .unwrap_or(crate::limits::RUN_OUTPUT_BYTES)
    }

    /// Refuses a signal the run's budget of output bytes has no room for
    /// (R0130, `run_outputs`): a signal's name and payload stay in the
    /// run's log and, until a step waits for it, in its state.
    pub(super) fn check_signal(&self, name: &str, payload: &Value) -> Result<(), Rejected> {
        let max = self.max_output_bytes();
        let room = max.saturating_sub(self.output_bytes);
        let bytes = signal_bytes(name, payload, room);
        if bytes <= room {
            return Ok(());
        }
        Err(Rejected::new(
            codes::R0130,
            format!(
                "the run has no room for this signal: its outputs and signals would hold over \
                 {max} bytes (limits.run_outputs)"
            ),
        ))
    }

    /// `workflow.context` with `action: update` merges `data` into the
    /// context namespace (deterministically: the params are in the log).
    fn update_context(&mut self, params: &Value) {
        if params.get("action").and_then(Value::as_str) != Some("update") {
            return;
        }
        let Some(Value::Object(data)) = params.get("data") else {
            return;
        };
        if !self.context.is_object() {
            self.context = Value::Object(Map::new());
        }
        if let Value::Object(context) = &mut self.context {
            for (k, v) in data {
                context.insert(k.clone(), v.clone());
            }
        }
        if let Some(notes) = params.get("agent_notes").filter(|n| n.is_string())
            && let Value::Object(context) = &mut self.context
        {
            context.insert("notes".into(), notes.clone());
        }
    }

    /// A wait step's duration passed.
    pub(super) fn sleep_done(&mut self, key: &InstRef, host: &dyn Host) {
        let Some(Some(ms)) = self.plan.program.steps.get(key.step as usize).map(|s| {
            let pc = s.code.end.saturating_sub(1) as usize;
            match self.plan.program.code.get(pc) {
                Some(crate::instr::Instr::Sleep { ms }) => Some(*ms),
                _ => None,
            }
        }) else {
            return;
        };
        let mut out = Map::new();
        out.insert("waited".into(), ms.into());
        self.complete(key, Value::Object(out), host);
    }

    /// A signal arrived: the earliest matching waiter takes it, or it is kept.
    pub(super) fn signal(&mut self, name: &str, payload: &Value, host: &dyn Host) {
        let room = u64::MAX - self.output_bytes;
        self.output_bytes += signal_bytes(name, payload, room);
        let found = self
            .waiters
            .iter()
            .position(|(k, wanted)| wanted == name || self.instance_name(k) == name);
        let Some(i) = found else {
            self.mailbox.push_back((name.to_owned(), payload.clone()));
            return;
        };
        let (key, wanted) = self.waiters.remove(i);
        if let Some(Wait::Signal(Some(timer))) = self.inst(&key).map(|i| i.wait.clone()) {
            self.cancel_timer(timer);
        }
        if let Some(inst) = self.inst_mut(&key) {
            inst.status = StepStatus::Running;
        }
        self.complete(&key, signal_output(&wanted, payload.clone()), host);
    }

    /// A signal wait gave up.
    pub(super) fn signal_timed_out(&mut self, key: &InstRef, host: &dyn Host) {
        let Some(pos) = self.waiters.iter().position(|(k, _)| k == key) else {
            return;
        };
        let (_, name) = self.waiters.remove(pos);
        let mut out = Map::new();
        out.insert("signal".into(), name.into());
        out.insert("timed_out".into(), true.into());
        self.complete(key, Value::Object(out), host);
    }

    /// Validates a resolution against the pending decision.
    pub(super) fn check_resolution(
        &self,
        id: &str,
        resolution: &Resolution,
    ) -> Result<(), Rejected> {
        let reject = |message: String| Err(Rejected::new(codes::R0114, message));
        let Some(pending) = self.decisions.get(id) else {
            let ids: Vec<&str> = self.decisions.keys().map(String::as_str).collect();
            return reject(if ids.is_empty() {
                format!("no decision `{id}` is pending (none is)")
            } else {
                format!("no decision `{id}` is pending; pending: {}", ids.join(", "))
            });
        };
        let request = &pending.request;
        if let Some(target) = &request.target_agent {
            let by = resolution.resolved_by.as_deref().unwrap_or_default();
            if by.is_empty() {
                return reject(format!(
                    "decision `{id}` is for agent `{target}`, and the answer names no agent: answer with agent_id `{target}`"
                ));
            }
            if by != target && by != "system" {
                return reject(format!(
                    "decision `{id}` is for agent `{target}`, not `{by}`"
                ));
            }
        }
        if resolution.choice.is_empty() {
            return reject(format!("decision `{id}` needs a non-empty choice"));
        }
        if !request.options.is_empty() && !request.options.iter().any(|o| o.id == resolution.choice)
        {
            let ids: Vec<&str> = request.options.iter().map(|o| o.id.as_str()).collect();
            return reject(format!(
                "`{}` is not an option of decision `{id}`; options: {}",
                resolution.choice,
                ids.join(", ")
            ));
        }
        Ok(())
    }

    /// A decision was made: the reasoning step completes with the
    /// resolution (or the action that asked the question gets the answer).
    pub(super) fn decision_resolved(&mut self, id: &str, resolution: &Resolution, host: &dyn Host) {
        let Some(pending) = self.decisions.remove(id) else {
            return;
        };
        if let Some(t) = pending.timer {
            self.cancel_timer(t);
        }
        if let Some((effect, key)) = &pending.asked_by {
            return self.answer_action(*effect, key, &resolution.choice);
        }
        let key = pending.request.inst.clone();
        if let Some(inst) = self.inst_mut(&key) {
            inst.status = StepStatus::Running;
        }
        self.complete(&key, resolution_output(resolution), host);
    }

    /// A decision was cancelled: its step is skipped and the run goes on
    /// (a question an action asked is answered with its default).
    pub(super) fn decision_cancelled(&mut self, id: &str, host: &dyn Host) {
        let Some(pending) = self.decisions.remove(id) else {
            return;
        };
        if let Some(t) = pending.timer {
            self.cancel_timer(t);
        }
        self.emit(Effect::CancelDecision { id: id.to_owned() });
        if let Some((effect, key)) = &pending.asked_by {
            let choice = pending.request.fallback.clone().unwrap_or_default();
            return self.answer_action(*effect, key, &choice);
        }
        let key = pending.request.inst.clone();
        self.set_wait(&key, Wait::Nothing);
        self.skip(&key, "decision_cancelled", host);
    }

    /// A decision's timeout (`timer`) passed: take the fallback, or fail
    /// the step (a question an action asked is answered with its default).
    pub(super) fn decision_timed_out(&mut self, timer: TimerId, key: &InstRef, host: &dyn Host) {
        let id = self
            .decisions
            .iter()
            .find(|(_, d)| d.timer == Some(timer))
            .map_or_else(|| self.instance_name(key), |(id, _)| id.clone());
        let Some(pending) = self.decisions.remove(&id) else {
            return;
        };
        self.emit(Effect::CancelDecision { id: id.clone() });
        if let Some((effect, ask)) = &pending.asked_by {
            let choice = pending.request.fallback.clone().unwrap_or_default();
            return self.answer_action(*effect, ask, &choice);
        }
        if let Some(choice) = pending.request.fallback.clone() {
            let resolution = Resolution {
                choice,
                reasoning: Some("the decision timed out; the fallback was chosen".into()),
                data: None,
                resolved_by: Some("system".into()),
            };
            if let Some(inst) = self.inst_mut(key) {
                inst.status = StepStatus::Running;
            }
            self.complete(key, resolution_output(&resolution), host);
        } else {
            if let Some(inst) = self.inst_mut(key) {
                inst.status = StepStatus::Running;
                inst.wait = Wait::Nothing;
            }
            let error = ActionError::new(
                codes::R0104,
                "TIMEOUT_ERROR",
                format!("decision `{id}` timed out and has no fallback"),
                false,
            );
            self.fail_attempt(key, error, host);
        }
    }
}

/// A reasoning step's output: its resolution.
fn resolution_output(resolution: &Resolution) -> Value {
    let mut out = Map::new();
    out.insert("choice".into(), resolution.choice.clone().into());
    out.insert(
        "reasoning".into(),
        resolution
            .reasoning
            .clone()
            .map_or(Value::Null, Value::String),
    );
    out.insert(
        "data".into(),
        resolution.data.clone().unwrap_or(Value::Null),
    );
    out.insert(
        "resolved_by".into(),
        resolution
            .resolved_by
            .clone()
            .map_or(Value::Null, Value::String),
    );
    Value::Object(out)
}

/// What a signal counts against its run's budget of output bytes: its
/// name and its payload's JSON (counted no further than `room` and one).
fn signal_bytes(name: &str, payload: &Value, room: u64) -> u64 {
    (name.len() as u64).saturating_add(crate::limits::json_bytes(payload, room))
}
