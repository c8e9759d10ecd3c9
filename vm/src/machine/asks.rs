//! Questions an action in flight asks ([`Event::ActionAsked`]): each opens
//! a decision on the running step, whose answer goes back to the action
//! ([`Effect::AnswerAction`]) while the step keeps running. An answer is
//! kept with the dispatch, so the same question asked again by a re-run of
//! it (after a crash) is answered at once.
//!
//! [`Event::ActionAsked`]: crate::Event::ActionAsked

use std::sync::Arc;

use super::Vm;
use super::state::{Asked, Inflight, PendingDecision};
use crate::effect::{DecisionRequest, Effect, Record, TimerPurpose};
use crate::event::{Ask, EffectId};

impl Vm {
    /// An action in flight asks `ask`.
    pub(super) fn action_asked(&mut self, ask: &Ask) {
        let Some(flight) = self.inflight.get(&ask.effect) else {
            return;
        };
        let inst = flight.dispatch.inst.clone();
        match flight.asks.get(&ask.key) {
            Some(Asked {
                decision,
                answer: Some(choice),
            }) => {
                let (decision, choice) = (decision.clone(), choice.clone());
                self.record(Record::DecisionReplayed {
                    inst,
                    decision,
                    choice: choice.clone(),
                });
                self.emit(Effect::AnswerAction {
                    effect: ask.effect,
                    key: ask.key.clone(),
                    choice,
                });
            }
            // Asked already and not answered yet: the same decision stands.
            Some(_) => {}
            None => {
                let id = ask.decision_id(&self.instance_name(&inst));
                let timer = self.start_timer(
                    ask.timeout_ms,
                    TimerPurpose::DecisionTimeout,
                    Some(inst.clone()),
                );
                let request = Arc::new(DecisionRequest {
                    id: id.clone(),
                    inst,
                    prompt: Some(ask.prompt.clone()),
                    options: ask.options.clone(),
                    data: ask.data.clone(),
                    timeout_at: Some(self.now.saturating_add(ask.timeout_ms)),
                    fallback: Some(ask.default.clone()),
                    target_agent: None,
                });
                self.decisions.insert(
                    id.clone(),
                    PendingDecision {
                        request: Arc::clone(&request),
                        timer: Some(timer),
                        asked_by: Some((ask.effect, ask.key.clone())),
                    },
                );
                if let Some(flight) = self.inflight.get_mut(&ask.effect) {
                    flight.asks.insert(
                        ask.key.clone(),
                        Asked {
                            decision: id,
                            answer: None,
                        },
                    );
                }
                self.emit(Effect::RequestDecision(request));
            }
        }
    }

    /// The question `key` of dispatch `effect` is answered with `choice`:
    /// the answer is kept and given to the action.
    pub(super) fn answer_action(&mut self, effect: EffectId, key: &str, choice: &str) {
        let Some(asked) = self
            .inflight
            .get_mut(&effect)
            .and_then(|f| f.asks.get_mut(key))
        else {
            return;
        };
        asked.answer = Some(choice.to_owned());
        self.emit(Effect::AnswerAction {
            effect,
            key: key.to_owned(),
            choice: choice.to_owned(),
        });
    }

    /// The action in flight `effect` is done with (it finished, or was
    /// stopped): the questions it left unanswered are withdrawn.
    pub(super) fn drop_flight(&mut self, effect: EffectId) -> Option<Inflight> {
        let flight = self.inflight.remove(&effect)?;
        for asked in flight.asks.values().filter(|a| a.answer.is_none()) {
            if let Some(pending) = self.decisions.remove(&asked.decision) {
                if let Some(timer) = pending.timer {
                    self.cancel_timer(timer);
                }
                self.emit(Effect::CancelDecision {
                    id: asked.decision.clone(),
                });
            }
        }
        Some(flight)
    }
}
