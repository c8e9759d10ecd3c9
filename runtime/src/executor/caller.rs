//! One action call of a run: its secrets resolved, its circuit breaker
//! asked, a worker slot held while it runs, and the call's end and time told
//! to the executor's observer. Spawned for most actions; awaited in place, inside the
//! round, for immediate ones (spec/events.md, "Immediate actions").

use std::sync::Arc;

use opcode_stdlib::exec::{Actions, Call, Secrets};
use opcode_stdlib::redact::Revealed;
use opcode_vm::effect::Dispatch;
use opcode_vm::error::ActionError;
use serde_json::Value;

use super::slots::{Slot, Slots};
use super::stand_in::{Answer, StandIn};
use super::{Inner, Observer};
use crate::breaker::{Breakers, Outcome, Transition};
use crate::time::now_ms;
use crate::workspace::Workspaces;

/// What a run's action calls need.
pub struct Caller {
    actions: Arc<Actions>,
    store: Arc<dyn crate::store::EventStore>,
    slots: Arc<Slots>,
    secrets: Arc<dyn Secrets>,
    breakers: Arc<Breakers>,
    observer: Option<Arc<dyn Observer>>,
    stand_in: Option<Arc<dyn StandIn>>,
    workspaces: Option<Workspaces>,
    /// The values of the run's secrets, read at its first call that needs them.
    run_secrets: tokio::sync::OnceCell<Revealed>,
}

/// Who makes a call.
pub struct Who<'a> {
    /// The run.
    pub run_id: &'a str,
    /// The step instance.
    pub step: &'a str,
    /// The agent that started the run.
    pub agent_id: Option<&'a str>,
    /// The template the run runs.
    pub template: Option<&'a str>,
    /// The run's workspace.
    pub workspace: Option<&'a std::path::Path>,
    /// The session the run belongs to.
    pub session: Option<&'a str>,
    /// Every secret the run may reveal.
    pub secrets: &'a [String],
    /// The run's priority: 0 first, 9 last (spec/flow-control.md).
    pub priority: u8,
}

/// An action's result, and the breaker changes the call caused.
pub struct Finished {
    /// The action's output or error.
    pub result: Result<Value, ActionError>,
    /// Breakers that opened or closed, to log before the result.
    pub breaker_changes: Vec<Transition>,
}

impl Caller {
    /// The caller for runs of `inner` using `actions`.
    pub fn new(inner: &Inner, actions: Arc<Actions>) -> Caller {
        Caller {
            actions,
            store: inner.store.clone(),
            slots: inner.slots.clone(),
            secrets: inner.secrets.clone(),
            breakers: inner.breakers.clone(),
            observer: inner.observer.get().cloned(),
            stand_in: inner.stand_in.get().cloned(),
            workspaces: inner.config.workspaces.clone(),
            run_secrets: tokio::sync::OnceCell::new(),
        }
    }

    /// The values of the run's secrets, `names` (read once a run).
    pub async fn revealed(&self, names: &[String]) -> &Revealed {
        self.run_secrets
            .get_or_init(|| opcode_stdlib::exec::reveal(names, self.secrets.as_ref()))
            .await
    }

    /// May `dispatch` run in the round that asked for it?
    pub fn immediate(&self, dispatch: &Dispatch, run_id: &str) -> bool {
        // A rate-limited call asks the store first: never in the round.
        if dispatch.rate.is_some() {
            return false;
        }
        if self
            .stand_in
            .as_ref()
            .is_some_and(|s| matches!(s.answer(run_id, dispatch), Answer::Hold | Answer::After(..)))
        {
            // Held in the round, it would hold the whole run.
            return false;
        }
        self.actions
            .immediate(&dispatch.action, &dispatch.params, run_id)
    }

    /// May `dispatch` start while the commit of its start is written? Only
    /// a read may (decision 0043).
    pub fn reads_only(&self, dispatch: &Dispatch) -> bool {
        self.actions.reads_only(&dispatch.action)
    }

    /// A worker slot, if one is free now and no call waits for one.
    pub fn free_slot(&self) -> Option<Slot> {
        self.slots.try_take()
    }

    /// Runs `dispatch`, holding `slot` if given, otherwise a slot it waits
    /// for (none for calls that only wait for other runs).
    pub async fn call(
        &self,
        dispatch: &Dispatch,
        who: &Who<'_>,
        mut slot: Option<Slot>,
    ) -> Finished {
        if let Some(stand_in) = &self.stand_in {
            match stand_in.answer(who.run_id, dispatch) {
                Answer::Call => {}
                Answer::Give(result) => return Finished::alone(result),
                Answer::After(delay, result) => {
                    tokio::time::sleep(delay).await;
                    return Finished::alone(result);
                }
                Answer::Hold => return std::future::pending().await,
            }
        }
        let prepared = Call::prepare(
            dispatch,
            who.run_id,
            who.step,
            who.agent_id,
            self.secrets.as_ref(),
        )
        .await;
        let mut call = match prepared {
            Ok(call) => call,
            Err(e) => return Finished::alone(Err(e)),
        };
        if !who.secrets.is_empty() {
            // A value revealed to one step (a file written, read back by
            // another) is masked in every step's results.
            call.revealed.extend(self.revealed(who.secrets).await);
        }
        call.template = who.template.map(str::to_owned);
        call.workspace = who.workspace.map(std::path::Path::to_path_buf);
        call.session = who.session.map(str::to_owned);
        call.priority = Some(who.priority);
        if let Err(e) = self.ensure_workspace(&call) {
            return Finished::alone(Err(e));
        }
        if let Some(rate) = &dispatch.rate {
            // Counted only once nothing is left to wait for: a call counted
            // and then kept waiting for a worker would be made in a later
            // window than the one it was counted in.
            if slot.is_none() {
                slot = Some(self.slots.take(who.priority).await);
            }
            if let Err(throttled) =
                super::throttle::admit(self.store.as_ref(), &self.actions, rate, &call).await
            {
                let key = throttled.details.as_ref().and_then(|d| d["key"].as_str());
                if let (Some(observer), Some(key)) = (&self.observer, key) {
                    observer.throttled(key);
                }
                return Finished::alone(Err(throttled));
            }
        }
        // Only a call to something outside this machine has a breaker
        // (spec/breakers.md, "Targets"): a command's or a child run's own
        // failure never refuses another run's calls.
        let Some(target) = self.actions.target(&call.action, &call.params) else {
            let _slot = match slot {
                Some(slot) => Some(slot),
                None if opcode_stdlib::exec::only_waits(&call.action) => None,
                None => Some(self.slots.take(who.priority).await),
            };
            return Finished::alone(self.timed(&call).await);
        };
        match self.breakers.admit(&target, &call.action, now_ms()) {
            Ok((ticket, opened)) => {
                let mut breaker_changes: Vec<Transition> = opened.into_iter().collect();
                let _slot = match slot {
                    Some(slot) => Some(slot),
                    None => Some(self.slots.take(who.priority).await),
                };
                let result = self.timed(&call).await;
                breaker_changes.extend(ticket.finish(Outcome::of(&result), now_ms()));
                Finished {
                    result,
                    breaker_changes,
                }
            }
            Err(refused) => Finished::alone(Err(refused)),
        }
    }

    /// Makes the run's workspace before the first call that may use it.
    fn ensure_workspace(&self, call: &Call) -> Result<(), ActionError> {
        let (Some(workspaces), Some(ws)) = (&self.workspaces, &call.workspace) else {
            return Ok(());
        };
        if !self.actions.uses_workspace(&call.action, &call.params, ws)
            || self
                .actions
                .immediate(&call.action, &call.params, &call.run_id)
        {
            return Ok(());
        }
        workspaces.ensure(ws).map_err(|e| {
            ActionError::execution(format!(
                "cannot make the run's workspace {}: {e}",
                ws.display()
            ))
        })
    }

    /// Runs `call`, telling the observer how it ended and how long it took.
    async fn timed(&self, call: &Call) -> Result<Value, ActionError> {
        let started = std::time::Instant::now();
        let result = if crate::time::is_virtual() {
            // On a virtual clock, time jumps ahead whenever the runtime is
            // idle, as it is while a real call waits on a process or a
            // socket; a blocking task holds the clock still meanwhile.
            let (actions, call) = (self.actions.clone(), call.clone());
            let handle = tokio::runtime::Handle::current();
            tokio::task::spawn_blocking(move || {
                handle.block_on(async move { actions.run(&call).await })
            })
            .await
            .unwrap_or_else(|e| Err(ActionError::execution(format!("the call stopped: {e}"))))
        } else {
            self.actions.run(call).await
        };
        if let Some(observer) = &self.observer {
            observer.action_ended(
                &call.action,
                result.is_ok(),
                started.elapsed().as_secs_f64(),
            );
        }
        result
    }
}

impl Finished {
    fn alone(result: Result<Value, ActionError>) -> Finished {
        Finished {
            result,
            breaker_changes: Vec::new(),
        }
    }
}
