//! Circuit breakers, one per target (spec/breakers.md, "Targets": an HTTP
//! origin, a plugin's server, a delegated agent's settings entry), shared
//! by every workflow of the engine: after `threshold` counted failures in a
//! row calls to the target are refused (R0127) for `cooldown`; then up to
//! `half_open_probes` calls are let through, and the first outcome decides:
//! success closes the breaker, failure opens it again. A probe whose
//! outcome does not count (a validation error, a cancelled call) gives its
//! slot back, so a breaker never stays half-open. Each change of state is
//! returned as a [`Transition`], which the executor writes to the log of
//! the workflow whose call caused it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use opcode_vm::error::ActionError;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::store::EventName;

/// One breaker's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerSettings {
    /// Counted failures in a row that open the breaker (0: never).
    pub threshold: u32,
    /// How long an open breaker refuses calls.
    pub cooldown: Duration,
    /// Calls let through at once while half-open.
    pub half_open_probes: u32,
}

impl Default for BreakerSettings {
    fn default() -> BreakerSettings {
        BreakerSettings {
            threshold: 5,
            cooldown: Duration::from_secs(30),
            half_open_probes: 1,
        }
    }
}

/// The `breakers` settings: `default`, and blocks named by a target
/// (`https://api.github.com`, `plugin:github`, `agent:coder`) or by an
/// action name (every target its calls reach).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BreakerConfig {
    default: BreakerSettings,
    named: HashMap<String, BreakerSettings>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Block {
    threshold: Option<u32>,
    cooldown: Option<String>,
    half_open_probes: Option<u32>,
}

impl BreakerConfig {
    /// Parses `{"default": {...}, "https://api.github.com": {...},
    /// "http.get": {...}}` (each block has `threshold`, `cooldown` such as
    /// `30s`, `half_open_probes`).
    pub fn parse(value: Option<&Value>) -> Result<BreakerConfig, String> {
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return Ok(BreakerConfig::default());
        };
        let blocks = BTreeMap::<String, Block>::deserialize(value)
            .map_err(|e| format!("`breakers`: {e}"))?;
        let apply = |base: BreakerSettings, name: &str, block: &Block| {
            let cooldown = match &block.cooldown {
                Some(text) => humantime::parse_duration(text)
                    .map_err(|e| format!("`breakers.{name}.cooldown`: {e}"))?,
                None => base.cooldown,
            };
            Ok::<_, String>(BreakerSettings {
                threshold: block.threshold.unwrap_or(base.threshold),
                cooldown,
                half_open_probes: block
                    .half_open_probes
                    .unwrap_or(base.half_open_probes)
                    .max(1),
            })
        };
        let default = match blocks.get("default") {
            Some(block) => apply(BreakerSettings::default(), "default", block)?,
            None => BreakerSettings::default(),
        };
        let mut named = HashMap::new();
        for (name, block) in blocks.iter().filter(|(n, _)| *n != "default") {
            named.insert(name.clone(), apply(default, name, block)?);
        }
        Ok(BreakerConfig { default, named })
    }

    /// The settings of the breaker guarding `target` for a call of
    /// `action`: the target's block, else the action's, else `default`.
    fn of(&self, target: &str, action: &str) -> BreakerSettings {
        self.named
            .get(target)
            .or_else(|| self.named.get(action))
            .copied()
            .unwrap_or(self.default)
    }
}

/// A change of a breaker's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// `circuit_opened`, `circuit_half_open` or `circuit_closed`.
    pub event_type: EventName,
    /// Its payload: `target`, the `action` whose call caused it, and
    /// `failures` and `cooldown_ms` when opened.
    pub payload: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed { failures: u32 },
    Open { until_ms: u64, failures: u32 },
    HalfOpen { probes: u32 },
}

/// Does an outcome count?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The action worked.
    Success,
    /// A failure that counts: an execution error, a timeout, anything retryable.
    Failure,
    /// Neither: validation errors, assertions, `workflow.fail`, refused paths,
    /// a call cancelled before it ended, a worktree busy with another
    /// writer (R0132: the target is fine, it is taken), an answer the
    /// target gave on purpose (an HTTP 4xx, a plugin tool's own error).
    Neutral,
}

impl Outcome {
    /// How a result counts.
    pub fn of(result: &Result<Value, ActionError>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(e)
                if e.code == opcode_vm::codes::R0127.id || e.code == opcode_vm::codes::R0132.id =>
            {
                Outcome::Neutral
            }
            Err(e) if e.retryable => Outcome::Failure,
            Err(e) if e.code == opcode_vm::codes::R0100.id && e.kind != "NON_RETRYABLE" => {
                Outcome::Failure
            }
            Err(_) => Outcome::Neutral,
        }
    }
}

/// Targets with a state kept at most (a closed breaker with no failure
/// counted keeps none); past it, closed breakers' counts are forgotten.
const TARGETS_KEPT: usize = 10_000;

/// Every breaker of an engine, by target.
#[derive(Debug, Default)]
pub struct Breakers {
    config: BreakerConfig,
    states: Mutex<HashMap<String, State>>,
}

/// A call let through; finish it with [`Ticket::finish`]. Dropped
/// unfinished (the call was cancelled), it counts as neutral.
#[derive(Debug)]
pub struct Ticket {
    breakers: Arc<Breakers>,
    target: String,
    action: String,
    probe: bool,
    done: bool,
}

impl Breakers {
    /// Breakers with `config`.
    pub fn new(config: BreakerConfig) -> Breakers {
        Breakers {
            config,
            states: Mutex::new(HashMap::new()),
        }
    }

    /// Lets a call of `action` to `target` through (with the transition
    /// that made it a probe, if any), or refuses it with R0127.
    pub fn admit(
        self: &Arc<Self>,
        target: &str,
        action: &str,
        now_ms: u64,
    ) -> Result<(Ticket, Option<Transition>), ActionError> {
        let settings = self.config.of(target, action);
        let ticket = |probe| Ticket {
            breakers: self.clone(),
            target: target.to_owned(),
            action: action.to_owned(),
            probe,
            done: false,
        };
        if settings.threshold == 0 {
            return Ok((ticket(false), None));
        }
        let mut states = self.states.lock().unwrap_or_else(PoisonError::into_inner);
        // A target with no state is closed with no failure counted.
        let Some(state) = states.get_mut(target) else {
            return Ok((ticket(false), None));
        };
        match *state {
            State::Closed { .. } => Ok((ticket(false), None)),
            State::Open { until_ms, .. } if now_ms >= until_ms => {
                *state = State::HalfOpen { probes: 1 };
                let change = Transition {
                    event_type: EventName::CircuitHalfOpen,
                    payload: json!({
                        "target": target,
                        "action": action,
                        "probes": settings.half_open_probes,
                    }),
                };
                Ok((ticket(true), Some(change)))
            }
            State::HalfOpen { probes } if probes < settings.half_open_probes => {
                *state = State::HalfOpen { probes: probes + 1 };
                Ok((ticket(true), None))
            }
            State::Open { until_ms, failures } => {
                Err(refusal(target, action, "open", failures, until_ms - now_ms))
            }
            State::HalfOpen { .. } => {
                Err(refusal(target, action, "half_open", settings.threshold, 0))
            }
        }
    }

    fn settle(&self, ticket: &Ticket, outcome: Outcome, now_ms: u64) -> Option<Transition> {
        let (target, action, probe) =
            (ticket.target.as_str(), ticket.action.as_str(), ticket.probe);
        let settings = self.config.of(target, action);
        if settings.threshold == 0 {
            return None;
        }
        let mut states = self.states.lock().unwrap_or_else(PoisonError::into_inner);
        let state = states
            .get(target)
            .copied()
            .unwrap_or(State::Closed { failures: 0 });
        let open = |failures| {
            (
                State::Open {
                    until_ms: now_ms + settings.cooldown.as_millis() as u64,
                    failures,
                },
                Some(Transition {
                    event_type: EventName::CircuitOpened,
                    payload: json!({
                        "target": target,
                        "action": action,
                        "failures": failures,
                        "cooldown_ms": settings.cooldown.as_millis() as u64,
                    }),
                }),
            )
        };
        let (next, change) = match (state, outcome) {
            (State::HalfOpen { .. }, Outcome::Success) if probe => (
                State::Closed { failures: 0 },
                Some(Transition {
                    event_type: EventName::CircuitClosed,
                    payload: json!({"target": target, "action": action}),
                }),
            ),
            (State::HalfOpen { .. }, Outcome::Failure) if probe => open(settings.threshold),
            (State::HalfOpen { probes }, _) if probe => (
                State::HalfOpen {
                    probes: probes.saturating_sub(1),
                },
                None,
            ),
            (State::Closed { .. }, Outcome::Success) => (State::Closed { failures: 0 }, None),
            (State::Closed { failures }, Outcome::Failure)
                if failures + 1 >= settings.threshold =>
            {
                open(failures + 1)
            }
            (State::Closed { failures }, Outcome::Failure) => (
                State::Closed {
                    failures: failures + 1,
                },
                None,
            ),
            (other, _) => (other, None),
        };
        if next == (State::Closed { failures: 0 }) {
            states.remove(target);
        } else {
            if states.len() >= TARGETS_KEPT && !states.contains_key(target) {
                // Failures counted on closed breakers are forgotten first:
                // targets are as many as the hosts workflows name.
                states.retain(|_, kept| !matches!(kept, State::Closed { .. }));
            }
            states.insert(target.to_owned(), next);
        }
        change
    }
}

impl Ticket {
    /// Records how the call went; the transition it caused, if any.
    pub fn finish(mut self, outcome: Outcome, now_ms: u64) -> Option<Transition> {
        self.done = true;
        self.breakers.settle(&self, outcome, now_ms)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.done {
            self.breakers.settle(self, Outcome::Neutral, 0);
        }
    }
}

fn refusal(
    target: &str,
    action: &str,
    state: &str,
    failures: u32,
    remaining_ms: u64,
) -> ActionError {
    ActionError::new(
        opcode_vm::codes::R0127,
        "CIRCUIT_OPEN",
        format!(
            "the circuit breaker guarding `{target}` is {state} after {failures} failures in a \
             row of calls to it; this `{action}` call is refused; retry in {remaining_ms}ms"
        ),
        true,
    )
    .with_details(json!({
        "target": target,
        "action": action,
        "state": state,
        "consecutive_failures": failures,
        "cooldown_remaining_ms": remaining_ms,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOWN: &str = "https://down.test";

    fn breakers(threshold: u32, probes: u32) -> Arc<Breakers> {
        let config = BreakerConfig::parse(Some(&json!({
            "x.y": {"threshold": threshold, "cooldown": "1s", "half_open_probes": probes}
        })))
        .unwrap();
        Arc::new(Breakers::new(config))
    }

    fn run(b: &Arc<Breakers>, now: u64, outcome: Outcome) -> Result<Vec<&'static str>, String> {
        let (ticket, first) = b.admit(DOWN, "x.y", now).map_err(|e| e.code)?;
        let second = ticket.finish(outcome, now);
        Ok(first
            .into_iter()
            .chain(second)
            .map(|t| t.event_type.as_str())
            .collect())
    }

    #[test]
    fn opens_probes_and_closes() {
        let b = breakers(2, 1);
        assert_eq!(run(&b, 0, Outcome::Failure), Ok(vec![]));
        assert_eq!(run(&b, 1, Outcome::Failure), Ok(vec!["circuit_opened"]));
        assert_eq!(run(&b, 500, Outcome::Success), Err("R0127".into()));
        assert_eq!(
            run(&b, 1001, Outcome::Failure),
            Ok(vec!["circuit_half_open", "circuit_opened"])
        );
        assert_eq!(run(&b, 1500, Outcome::Success), Err("R0127".into()));
        assert_eq!(
            run(&b, 2001, Outcome::Success),
            Ok(vec!["circuit_half_open", "circuit_closed"])
        );
        assert_eq!(run(&b, 2002, Outcome::Success), Ok(vec![]));
    }

    #[test]
    fn a_neutral_or_cancelled_probe_gives_its_slot_back() {
        let b = breakers(1, 1);
        assert_eq!(run(&b, 0, Outcome::Failure), Ok(vec!["circuit_opened"]));
        let (probe, change) = b.admit(DOWN, "x.y", 1000).unwrap();
        assert_eq!(change.unwrap().event_type, EventName::CircuitHalfOpen);
        assert!(b.admit(DOWN, "x.y", 1000).is_err(), "one probe at a time");
        drop(probe);
        assert_eq!(run(&b, 1001, Outcome::Neutral), Ok(vec![]));
        assert_eq!(run(&b, 1002, Outcome::Success), Ok(vec!["circuit_closed"]));
    }

    #[test]
    fn a_target_that_fails_refuses_only_calls_to_itself() {
        let b = breakers(2, 1);
        assert_eq!(run(&b, 0, Outcome::Failure), Ok(vec![]));
        assert_eq!(run(&b, 1, Outcome::Failure), Ok(vec!["circuit_opened"]));
        let refused = b.admit(DOWN, "x.z", 2).unwrap_err();
        assert_eq!(
            refused.details.unwrap()["target"],
            DOWN,
            "every action's call to it"
        );
        let (ticket, change) = b.admit("https://up.test", "x.y", 2).unwrap();
        assert_eq!(change, None);
        assert_eq!(
            ticket.finish(Outcome::Success, 2),
            None,
            "another target is untouched"
        );
    }

    #[test]
    fn targets_without_trouble_keep_no_state() {
        let b = breakers(3, 1);
        let call = |target: &str, outcome| {
            let (ticket, _) = b.admit(target, "x.y", 0).unwrap();
            ticket.finish(outcome, 0);
        };
        for host in 0..25_000 {
            call(&format!("https://failing{host}.test"), Outcome::Failure);
        }
        let kept = b.states.lock().unwrap().len();
        assert!(
            kept <= TARGETS_KEPT,
            "{kept} states kept for 25,000 failing hosts"
        );
        for host in 0..100 {
            call(&format!("https://fine{host}.test"), Outcome::Success);
        }
        assert_eq!(
            b.states.lock().unwrap().len(),
            kept,
            "a success keeps no state"
        );
        assert_eq!(run(&b, 1, Outcome::Failure), Ok(vec![]));
        assert_eq!(run(&b, 2, Outcome::Failure), Ok(vec![]));
        assert_eq!(run(&b, 3, Outcome::Failure), Ok(vec!["circuit_opened"]));
    }

    #[test]
    fn a_target_block_comes_before_its_action_block() {
        let config = BreakerConfig::parse(Some(&json!({
            "default": {"threshold": 9},
            "http.get": {"threshold": 3},
            "plugin:github": {"threshold": 1, "cooldown": "2s"},
        })))
        .unwrap();
        assert_eq!(config.of("plugin:github", "http.get").threshold, 1);
        assert_eq!(config.of("https://a.test", "http.get").threshold, 3);
        assert_eq!(config.of("https://a.test", "http.post").threshold, 9);
    }

    #[test]
    fn what_counts() {
        assert_eq!(
            Outcome::of(&Err(ActionError::execution("down"))),
            Outcome::Failure
        );
        assert_eq!(
            Outcome::of(&Err(ActionError::validation("bad"))),
            Outcome::Neutral
        );
        assert_eq!(Outcome::of(&Ok(Value::Null)), Outcome::Success);
        let not_found = ActionError::new(opcode_vm::codes::R0100, "NON_RETRYABLE", "404", false);
        assert_eq!(
            Outcome::of(&Err(not_found)),
            Outcome::Neutral,
            "a 4xx answer"
        );
        let busy = ActionError::new(opcode_vm::codes::R0132, "WORKTREE_BUSY", "taken", true);
        assert_eq!(Outcome::of(&Err(busy)), Outcome::Neutral, "a busy worktree");
        assert!(BreakerConfig::parse(Some(&json!({"x": {"treshold": 1}}))).is_err());
        assert!(BreakerConfig::parse(Some(&json!({"x": {"cooldown": "soon"}}))).is_err());
    }
}
