//! A case's mocks as the executor's stand-in: a mocked call never reaches
//! its action; an effectful action that is not mocked is refused (its
//! step fails, and the case with it); everything else runs for real.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use opcode_runtime::executor::{Answer, StandIn};
use opcode_vm::effect::Dispatch;
use opcode_vm::error::ActionError;

use super::file::Mock;

/// The mocks of one case, for the run under test and the runs it starts.
pub struct Mocks {
    /// The run under test (its steps are matched by id).
    pub root: String,
    /// Its step ids, by the program's index.
    pub steps: Vec<String>,
    /// By instance name, step id, or action name.
    pub by_name: BTreeMap<String, Mock>,
    /// What was refused, for the case's report.
    pub refused: Mutex<Vec<String>>,
    /// The instances of the run under test that were called (a call may
    /// be noted twice).
    pub called: Mutex<Vec<String>>,
    /// Per mock with a sequence (by its key): the furthest attempt that
    /// used it.
    furthest: Mutex<BTreeMap<String, u32>>,
}

/// Actions that touch the world: never called in a test unless mocked
/// with `call_through`.
fn effectful(action: &str) -> bool {
    let family = action.split('.').next().unwrap_or_default();
    !matches!(family, "expr" | "json" | "crypto" | "assert" | "workflow")
}

impl Mocks {
    /// Mocks of `by_name` for the run `root` of a program with `steps`.
    pub fn new(root: &str, steps: Vec<String>, by_name: BTreeMap<String, Mock>) -> Mocks {
        Mocks {
            root: root.to_owned(),
            steps,
            by_name,
            refused: Mutex::new(Vec::new()),
            called: Mutex::new(Vec::new()),
            furthest: Mutex::new(BTreeMap::new()),
        }
    }

    /// The sequences some entries of which no call used: a sequence is per
    /// step instance, by attempt, so entries past the furthest attempt
    /// were never given (a failure of the case, as an unused answer is).
    pub fn unused(&self) -> Vec<String> {
        let furthest = self.furthest.lock().unwrap_or_else(PoisonError::into_inner);
        furthest
            .iter()
            .filter_map(|(key, &reached)| {
                let entries = self.by_name.get(key)?.sequence.as_ref()?.len();
                (reached < entries as u32).then(|| {
                    format!(
                        "mock `{key}`: its sequence has {entries} entries, but no call went past attempt {reached}: \
                         entries {} to {entries} were never used (a sequence is per step instance, by attempt; \
                         to answer each iteration of a loop differently, mock its instances: `{key}[0]`, `{key}[1]`…)",
                        reached + 1
                    )
                })
            })
            .collect()
    }

    /// The instance name of `dispatch`, a call of the run under test.
    fn instance(&self, run_id: &str, dispatch: &Dispatch) -> Option<String> {
        let id = self
            .steps
            .get(dispatch.inst.step as usize)
            .filter(|_| run_id == self.root)?;
        if dispatch.inst.iters.is_empty() {
            return Some(id.clone());
        }
        let indices: Vec<String> = dispatch.inst.iters.iter().map(u32::to_string).collect();
        Some(format!("{id}[{}]", indices.join(",")))
    }

    /// The mock for `dispatch` of run `run_id`: its instance's, its
    /// step's (for the run under test), else its action's.
    fn find(&self, run_id: &str, dispatch: &Dispatch) -> Option<(&str, &Mock)> {
        let mut names = Vec::new();
        if let Some(instance) = self.instance(run_id, dispatch) {
            let id = &self.steps[dispatch.inst.step as usize];
            // The instance's own mock first, then its step's.
            let step = (*id != instance).then(|| id.clone());
            names.push(instance);
            names.extend(step);
        }
        names.push(dispatch.action.clone());
        names.into_iter().find_map(|name| {
            self.by_name
                .get_key_value(&name)
                .map(|(k, m)| (k.as_str(), m))
        })
    }
}

impl StandIn for Mocks {
    fn answer(&self, run_id: &str, dispatch: &Dispatch) -> Answer {
        if let Some(instance) = self.instance(run_id, dispatch) {
            self.called
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(instance);
        }
        let Some((key, mock)) = self.find(run_id, dispatch) else {
            if !effectful(&dispatch.action) {
                return Answer::Call;
            }
            let step = self
                .steps
                .get(dispatch.inst.step as usize)
                .filter(|_| run_id == self.root)
                .map_or_else(
                    || format!("a step of {run_id}"),
                    |id| format!("step `{id}`"),
                );
            let message = format!(
                "{step} calls `{}`, which this case does not mock: mock it (by step id or action), or mock it with `call_through: true`",
                dispatch.action
            );
            self.note(message.clone());
            return Answer::Give(Err(ActionError::new(
                opcode_vm::codes::R0107,
                "NOT_MOCKED",
                message,
                false,
            )));
        };
        if mock.sequence.is_some() {
            let mut furthest = self.furthest.lock().unwrap_or_else(PoisonError::into_inner);
            let reached = furthest.entry(key.to_owned()).or_default();
            *reached = (*reached).max(dispatch.attempt.max(1));
        }
        let at = dispatch.attempt.max(1) as usize - 1;
        let this = mock
            .sequence
            .as_ref()
            .filter(|s| !s.is_empty())
            .map_or(mock, |s| &s[at.min(s.len() - 1)]);
        if let Some(want) = &this.params {
            let mut differences = Vec::new();
            super::expect::mismatches("", want, Some(&dispatch.params), &mut differences);
            if !differences.is_empty() {
                let who = self
                    .instance(run_id, dispatch)
                    .unwrap_or_else(|| dispatch.action.clone());
                self.note(format!(
                    "step `{who}` (attempt {}) was called with other params: {}",
                    dispatch.attempt,
                    differences.join("; ")
                ));
            }
        }
        answer_of(mock, dispatch.attempt)
    }
}

impl Mocks {
    /// Keeps a problem for the case's report, once.
    fn note(&self, message: String) {
        let mut refused = self.refused.lock().unwrap_or_else(PoisonError::into_inner);
        if !refused.contains(&message) {
            refused.push(message);
        }
    }
}

/// What `mock` gives at attempt `attempt` (from 1).
fn answer_of(mock: &Mock, attempt: u32) -> Answer {
    if mock.call_through {
        return Answer::Call;
    }
    if let Some(sequence) = mock.sequence.as_ref().filter(|s| !s.is_empty()) {
        let at = (attempt.max(1) as usize - 1).min(sequence.len() - 1);
        return answer_of(&sequence[at], 1);
    }
    let result = match &mock.error {
        Some(e) => {
            let code = e
                .code
                .as_deref()
                .and_then(opcode_vm::codes::lookup)
                .unwrap_or(opcode_vm::codes::R0100);
            Err(ActionError::new(
                code,
                "MOCKED",
                e.message.clone(),
                e.retryable.unwrap_or(true),
            ))
        }
        None => Ok(mock.output.clone().unwrap_or(serde_json::Value::Null)),
    };
    match mock
        .delay
        .as_deref()
        .and_then(|d| opcode_stdlib::exec::parse_duration(d).ok())
    {
        Some(delay) if !delay.is_zero() => Answer::After(delay, result),
        _ => Answer::Give(result),
    }
}
