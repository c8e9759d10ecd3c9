//! Failure and cancellation: retries with backoff, `on_error`, step
//! deadlines, stopping whatever an instance waits for, and the run
//! deadline's `suspend`.

use serde_json::Value;

use super::Vm;
use super::state::{FrameId, FrameState, StepStatus, Wait};
use crate::codes;
use crate::effect::{Effect, InstRef, Record, TimerPurpose};
use crate::error::{ActionError, StepError};
use crate::host::Host;
use crate::policy::{Backoff, Strategy};
use crate::program::RetryPolicy;

/// The policy `on_error: {strategy: retry}` uses when the step has none.
const DEFAULT_RETRY: RetryPolicy = RetryPolicy {
    max: 3,
    backoff: Backoff::Exponential,
    delay_ms: 1000,
    max_delay_ms: None,
    jitter: false,
};

impl Vm {
    /// An attempt failed: retry if the policy allows, else apply `on_error`.
    pub(super) fn fail_attempt(&mut self, key: &InstRef, error: ActionError, host: &dyn Host) {
        let Some(inst) = self.inst(key) else { return };
        if inst.status.is_finished() {
            return;
        }
        let attempt = inst.attempt;
        if let Some(d) = inst.deadline {
            self.cancel_timer(d);
        }
        if error.code == codes::R0136.id {
            return self.throttled(key, attempt, error);
        }
        let info = &self.plan.program.steps[key.step as usize];
        let on_error = info.on_error;
        let policy = info.retry.or_else(|| {
            on_error
                .filter(|p| p.strategy == Strategy::Retry)
                .map(|_| DEFAULT_RETRY)
        });
        if let Some(policy) = policy.filter(|p| error.retryable && attempt <= p.max) {
            let delay = retry_delay(&policy, attempt - 1, &self.idempotency_key(key, attempt));
            self.record(Record::StepRetrying {
                inst: key.clone(),
                attempt,
                delay_ms: delay,
                error: Box::new(error.clone()),
            });
            if let Some(inst) = self.inst_mut(key) {
                inst.error = Some(error);
                inst.deadline = None;
            }
            if delay == 0 {
                self.begin_attempt(key, false, host);
            } else {
                let timer = self.start_timer(delay, TimerPurpose::Retry, Some(key.clone()));
                if let Some(inst) = self.inst_mut(key) {
                    inst.status = StepStatus::Retrying;
                    inst.wait = Wait::Retry(timer);
                }
            }
            return;
        }
        self.handle_error(key, error, host);
    }

    /// The call was not made: its rate limit's window was full. The same
    /// attempt starts again when the window the runtime named ends
    /// (`details.until_ms`), by a durable timer; it counts as no retry.
    fn throttled(&mut self, key: &InstRef, attempt: u32, error: ActionError) {
        let until = error
            .details
            .as_ref()
            .and_then(|d| d.get("until_ms"))
            .and_then(Value::as_u64)
            .unwrap_or(self.now);
        let delay = until.saturating_sub(self.now).max(1);
        self.record(Record::StepRetrying {
            inst: key.clone(),
            attempt,
            delay_ms: delay,
            error: Box::new(error.clone()),
        });
        let timer = self.start_timer(delay, TimerPurpose::Retry, Some(key.clone()));
        if let Some(inst) = self.inst_mut(key) {
            // Its row says why it waits (R0136, until when).
            inst.error = Some(error);
            // The next start is this attempt again.
            inst.attempt = attempt.saturating_sub(1);
            inst.deadline = None;
            inst.status = StepStatus::Retrying;
            inst.wait = Wait::Retry(timer);
        }
    }

    /// The retry backoff passed.
    pub(super) fn retry_now(&mut self, key: &InstRef, host: &dyn Host) {
        if self
            .inst(key)
            .is_some_and(|i| i.status == StepStatus::Retrying)
        {
            self.begin_attempt(key, false, host);
        }
    }

    /// No retry left: `on_error` decides.
    fn handle_error(&mut self, key: &InstRef, error: ActionError, host: &dyn Host) {
        let strategy = self.plan.program.steps[key.step as usize].on_error;
        if let Some(inst) = self.inst_mut(key) {
            inst.error = Some(error.clone());
        }
        match strategy.map(|p| (p.strategy, p.fallback)) {
            Some((Strategy::Ignore, _)) => {
                self.set_finished(key, StepStatus::Completed, Value::Null);
                if let Some(inst) = self.inst_mut(key) {
                    inst.error = Some(error.clone());
                }
                self.record(Record::StepFailed {
                    inst: key.clone(),
                    error: Box::new(error),
                    handled: true,
                });
                self.after_finish(key, Value::Null, host);
            }
            Some((Strategy::FallbackStep, Some(fallback))) => {
                self.set_finished(key, StepStatus::Failed, Value::Null);
                if let Some(inst) = self.inst_mut(key) {
                    inst.error = Some(error.clone());
                }
                self.record(Record::StepFailed {
                    inst: key.clone(),
                    error: Box::new(error),
                    handled: true,
                });
                self.record(Record::FallbackStarted {
                    inst: key.clone(),
                    fallback,
                });
                let f = self.inst(key).map_or(0, |i| i.frame);
                let fallback_key = InstRef {
                    step: fallback,
                    iters: key.iters.clone(),
                };
                self.create_instance(&fallback_key, f, Some(key.clone()));
                self.set_wait(key, Wait::Fallback(fallback_key.clone()));
                self.begin_attempt(&fallback_key, true, host);
            }
            _ => {
                self.set_finished(key, StepStatus::Failed, Value::Null);
                if let Some(inst) = self.inst_mut(key) {
                    inst.error = Some(error.clone());
                }
                self.record(Record::StepFailed {
                    inst: key.clone(),
                    error: Box::new(error.clone()),
                    handled: false,
                });
                // A failed fallback fails in the place of the step it stood in for.
                let failing = self
                    .inst(key)
                    .and_then(|i| i.stands_in_for.clone())
                    .unwrap_or_else(|| key.clone());
                let step_error = StepError {
                    step: self.instance_name(key),
                    error,
                };
                self.step_failed_unhandled(&failing, step_error, host);
            }
        }
    }

    /// A step attempt's deadline passed.
    pub(super) fn step_timed_out(&mut self, key: &InstRef, host: &dyn Host) {
        if let Some(inst) = self.inst_mut(key) {
            inst.deadline = None;
        }
        self.stop_waiting(key);
        let ms = self.plan.program.steps[key.step as usize]
            .timeout_ms
            .unwrap_or(0);
        let error = ActionError::timeout(format!(
            "step `{}` timed out after {ms}ms",
            self.instance_name(key)
        ));
        self.fail_attempt(key, error, host);
    }

    /// Stops whatever the instance waits for (the action, timer, decision,
    /// signal wait or child frames), leaving its status alone.
    fn stop_waiting(&mut self, key: &InstRef) {
        let Some(inst) = self.inst(key) else { return };
        let wait = inst.wait.clone();
        let children: Vec<FrameId> = match inst.flow.as_deref() {
            Some(super::state::Flow::Branch { frame, .. }) => vec![*frame],
            Some(super::state::Flow::Loop(state)) => state.frame.into_iter().collect(),
            Some(super::state::Flow::Fork(state)) => {
                state.frames.iter().flatten().copied().collect()
            }
            None => Vec::new(),
        };
        match wait {
            Wait::Action(effect) => {
                if self.drop_flight(effect).is_some() {
                    self.emit(Effect::CancelDispatch { effect });
                }
            }
            Wait::Retry(timer) | Wait::Sleep(timer) => self.cancel_timer(timer),
            Wait::Signal(timer) => {
                self.waiters.retain(|(k, _)| k != key);
                if let Some(t) = timer {
                    self.cancel_timer(t);
                }
            }
            Wait::Decision(id) => {
                if let Some(d) = self.decisions.remove(&id) {
                    if let Some(t) = d.timer {
                        self.cancel_timer(t);
                    }
                    self.emit(Effect::CancelDecision { id });
                }
            }
            Wait::Children => {
                for f in children {
                    self.cancel_frame(f, "cancelled");
                }
            }
            Wait::Fallback(other) => self.cancel_instance(&other, "cancelled"),
            Wait::Nothing => {}
        }
        self.set_wait(key, Wait::Nothing);
    }

    /// Stops an unfinished instance and marks it cancelled (the log's
    /// `step_skipped` says why: `cancelled`, `race_lost`).
    pub(super) fn cancel_instance(&mut self, key: &InstRef, reason: &str) {
        let Some(inst) = self.inst(key) else { return };
        if inst.status.is_finished() {
            return;
        }
        if let Some(d) = inst.deadline {
            self.cancel_timer(d);
        }
        self.stop_waiting(key);
        self.set_finished(key, StepStatus::of_skip(reason), Value::Null);
        self.record(Record::StepSkipped {
            inst: key.clone(),
            reason: reason.to_owned(),
        });
    }

    /// Stops a frame and everything in it.
    pub(super) fn cancel_frame(&mut self, f: FrameId, reason: &str) {
        if self.frames[f].state != FrameState::Running {
            return;
        }
        self.frames[f].state = FrameState::Cancelled;
        self.cancel_frame_contents(f, reason);
    }

    /// Stops the unfinished instances of a frame (the frame's own state is the caller's).
    pub(super) fn cancel_frame_contents(&mut self, f: FrameId, reason: &str) {
        let frame = &self.frames[f];
        let block = &self.plan.program.blocks[frame.block as usize];
        let keys: Vec<InstRef> = block
            .steps
            .iter()
            .map(|&s| InstRef {
                step: s,
                iters: frame.iters.clone(),
            })
            .collect();
        for key in keys {
            if self.inst(&key).is_some_and(|i| i.frame == f) {
                self.cancel_instance(&key, reason);
            }
        }
    }

    /// Stops every frame, timer, action and decision of the run.
    pub(super) fn cancel_everything(&mut self, reason: &str) {
        for f in 0..self.frames.len() {
            self.cancel_frame(f, reason);
        }
        let run_timer = self.run_timer;
        let timers: Vec<u64> = self
            .timers
            .keys()
            .copied()
            .filter(|t| Some(*t) != run_timer)
            .collect();
        for t in timers {
            self.cancel_timer(t);
        }
        let effects: Vec<u64> = self.inflight.keys().copied().collect();
        for effect in effects {
            self.drop_flight(effect);
            self.emit(Effect::CancelDispatch { effect });
        }
        let decisions: Vec<String> = self.decisions.keys().cloned().collect();
        for id in decisions {
            self.decisions.remove(&id);
            self.emit(Effect::CancelDecision { id });
        }
        self.waiters.clear();
    }

    /// `on_timeout: suspend`: stop running actions and timers; their steps
    /// start again on resume. Decisions and signal waits stay.
    pub(super) fn halt(&mut self) {
        self.halted = true;
        let mut keys: Vec<InstRef> = self
            .top
            .iter()
            .enumerate()
            .filter_map(|(s, i)| {
                i.as_ref().map(|_| InstRef {
                    step: s as u32,
                    iters: Vec::new(),
                })
            })
            .collect();
        // In order, so the cancels it emits come out the same at every replay.
        let mut nested: Vec<InstRef> = self.nested.keys().cloned().collect();
        nested.sort();
        keys.extend(nested);
        for key in keys {
            let halts = self.inst(&key).is_some_and(|i| {
                matches!(i.wait, Wait::Action(_) | Wait::Retry(_) | Wait::Sleep(_))
            });
            if halts {
                if let Some(d) = self.inst(&key).and_then(|i| i.deadline) {
                    self.cancel_timer(d);
                }
                self.stop_waiting(&key);
                if let Some(inst) = self.inst_mut(&key) {
                    inst.status = StepStatus::Pending;
                    inst.deadline = None;
                }
            }
        }
    }

    /// After resume: restart halted steps, then start whatever became ready.
    pub(super) fn restart_halted(&mut self, host: &dyn Host) {
        let mut keys: Vec<InstRef> = self
            .top
            .iter()
            .enumerate()
            .filter_map(|(s, i)| {
                i.as_ref()
                    .filter(|i| i.status == StepStatus::Pending)
                    .map(|_| InstRef {
                        step: s as u32,
                        iters: Vec::new(),
                    })
            })
            .collect();
        let mut nested: Vec<InstRef> = self
            .nested
            .iter()
            .filter(|(_, i)| i.status == StepStatus::Pending)
            .map(|(k, _)| k.clone())
            .collect();
        nested.sort();
        keys.extend(nested);
        for key in keys {
            if self.status.is_terminal() {
                return;
            }
            self.begin_attempt(&key, false, host);
        }
        for f in 0..self.frames.len() {
            if self.status.is_terminal() {
                return;
            }
            self.start_ready(f, host);
        }
    }

    /// `workflow_id/step/attempt`: the idempotency key of an attempt.
    pub(super) fn idempotency_key(&self, key: &InstRef, attempt: u32) -> String {
        format!("{}/{}/{attempt}", self.meta.run_id, self.instance_name(key))
    }
}

/// The delay before retry `k` (0-based count of retries already done).
pub fn retry_delay(policy: &RetryPolicy, k: u32, key: &str) -> u64 {
    let base = match policy.backoff {
        Backoff::None => 0,
        Backoff::Constant => policy.delay_ms,
        Backoff::Linear => policy.delay_ms.saturating_mul(u64::from(k) + 1),
        Backoff::Exponential => policy
            .delay_ms
            .saturating_mul(1u64.checked_shl(k.min(62)).unwrap_or(u64::MAX)),
    };
    let capped = policy.max_delay_ms.map_or(base, |m| base.min(m));
    if !policy.jitter || capped == 0 {
        return capped;
    }
    // Deterministic jitter in [-25%, +25%], from an FNV-1a hash of the key.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let permille = (hash % 501) as i64 - 250;
    let delta = (capped as i64).saturating_mul(permille) / 1000;
    (capped as i64).saturating_add(delta).max(0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(backoff: Backoff) -> RetryPolicy {
        RetryPolicy {
            max: 5,
            backoff,
            delay_ms: 100,
            max_delay_ms: Some(500),
            jitter: false,
        }
    }

    #[test]
    fn backoff_shapes() {
        assert_eq!(retry_delay(&policy(Backoff::None), 3, "k"), 0);
        assert_eq!(retry_delay(&policy(Backoff::Constant), 3, "k"), 100);
        assert_eq!(retry_delay(&policy(Backoff::Linear), 2, "k"), 300);
        assert_eq!(retry_delay(&policy(Backoff::Exponential), 2, "k"), 400);
        assert_eq!(retry_delay(&policy(Backoff::Exponential), 3, "k"), 500);
        assert_eq!(retry_delay(&policy(Backoff::Exponential), 200, "k"), 500);
    }

    #[test]
    fn jitter_is_deterministic_and_bounded() {
        let mut p = policy(Backoff::Constant);
        p.jitter = true;
        let a = retry_delay(&p, 0, "run/step/1");
        assert_eq!(a, retry_delay(&p, 0, "run/step/1"));
        assert!((75..=125).contains(&a), "{a}");
    }
}
