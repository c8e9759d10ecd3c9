//! Runs a workflow to rest with answers given in advance: what `opcodec
//! run` and the conformance suite do with the engine's executor.
//!
//! [`attend`] sends the run its signals, answers each decision any run of
//! the store asks (the run and its children) from a table of choices by
//! step id, and waits while a timeout that would end a wait is near. It
//! stops when the run has ended, or when it only waits for what nobody
//! will send: the run is then left suspended, as it is stored. A child
//! that only waits so is cancelled, with the reason, so its parent goes on
//! and fails with it. The executor must run its background loop (decision
//! timeouts fire there).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use opcode_vm::event::{Event, Resolution};
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use crate::executor::{ExecError, Executor};
use crate::store::{DecisionRow, DecisionStatus, WorkflowFilter, WorkflowStatus};
use crate::time::{now_ms, parse_ms};

/// What to tell a run, given before it asks.
#[derive(Debug, Clone, Default)]
pub struct Answers {
    /// The choice for each reasoning step, by step id (every time it asks),
    /// or for one instance of it in a loop, by its name (`review[2]`),
    /// which wins over the step's.
    pub decisions: HashMap<String, String>,
    /// Signals sent once the run is started, in order.
    pub signals: Vec<(String, Value)>,
    /// How long to wait for a timeout that would end a wait for a decision
    /// or a signal (one due later is not waited for).
    pub max_wait: Duration,
    /// Who answers (`resolved_by` when the decision names no agent).
    pub decider: String,
    /// The `reasoning` given with each answer.
    pub reasoning: String,
    /// How often to look again without news (none: every half second).
    pub recheck: Option<Duration>,
}

/// How an attended run came to rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rest {
    /// Its status.
    pub status: WorkflowStatus,
    /// Answers the runs refused (a choice that is not an option, a signal
    /// nobody waits for), as their messages.
    pub refused: Vec<String>,
    /// What the driver did on its own: the children it cancelled, and why.
    pub notes: Vec<String>,
}

/// The answers given for decisions that were never asked, as refusals: a
/// misspelled step or an instance that does not exist is not ignored.
fn unused(answers: &Answers, used: &HashSet<&str>) -> Vec<String> {
    let mut left: Vec<String> = answers
        .decisions
        .keys()
        .filter(|k| !used.contains(k.as_str()))
        .map(|k| format!("no decision `{k}` was asked: the answer was not used"))
        .collect();
    left.sort();
    left
}

/// Looks again this often even without news (a missed broadcast delays,
/// never blocks).
const RECHECK: Duration = Duration::from_millis(500);

/// Attends run `id` (started on `executor`) until it rests.
pub async fn attend(executor: &Executor, id: &str, answers: &Answers) -> Result<Rest, ExecError> {
    let mut changes = executor.changes();
    let mut refused = Vec::new();
    let mut notes = Vec::new();
    for (name, payload) in &answers.signals {
        let signal = Event::Signal {
            name: name.clone(),
            payload: payload.clone(),
        };
        refuse_into(executor.deliver(id, signal).await, &mut refused)?;
    }
    let mut answered: HashSet<(String, String)> = HashSet::new();
    let mut used: HashSet<&str> = HashSet::new();
    loop {
        let root = executor
            .store()
            .workflow(id)
            .await?
            .ok_or_else(|| ExecError::NotFound(id.to_owned()))?;
        if root.status.is_ended() {
            refused.extend(unused(answers, &used));
            return Ok(Rest {
                status: root.status,
                refused,
                notes,
            });
        }
        let asked = executor
            .store()
            .decisions(None, Some(DecisionStatus::Pending))
            .await?;
        let mut gave = false;
        for decision in asked {
            let key = (decision.workflow_id.clone(), decision.id.clone());
            let Some((key_given, choice)) = answers
                .decisions
                .get_key_value(&decision.id)
                .or_else(|| answers.decisions.get_key_value(&decision.step_id))
            else {
                continue;
            };
            used.insert(key_given.as_str());
            if !answered.insert(key.clone()) {
                continue;
            }
            gave = true;
            let event = resolution(&decision, choice, answers);
            match executor.deliver(&decision.workflow_id, event).await {
                // It ended, or left before answering (it is asked again
                // once it is back): the next look decides.
                Err(ExecError::Ended { .. }) => {}
                Err(ExecError::Stopped(_)) => {
                    answered.remove(&key);
                }
                other => refuse_into(other, &mut refused)?,
            }
        }
        if !gave && let Some(status) = rest_or_unstick(executor, id, answers, &mut notes).await? {
            // A decision asked after the look above, by a run that then
            // went to rest, is answered before the run is said to rest.
            if answerable(executor, answers, &answered).await? {
                continue;
            }
            refused.extend(unused(answers, &used));
            return Ok(Rest {
                status,
                refused,
                notes,
            });
        }
        match tokio::time::timeout(answers.recheck.unwrap_or(RECHECK), changes.recv()).await {
            Ok(Ok(_) | Err(RecvError::Lagged(_))) | Err(_) => {}
            Ok(Err(RecvError::Closed)) => return Err(ExecError::Stopped(id.to_owned())),
        }
    }
}

/// Is a decision pending that `answers` answer and that was not answered yet?
async fn answerable(
    executor: &Executor,
    answers: &Answers,
    answered: &HashSet<(String, String)>,
) -> Result<bool, ExecError> {
    let asked = executor
        .store()
        .decisions(None, Some(DecisionStatus::Pending))
        .await?;
    Ok(asked.iter().any(|decision| {
        let given = answers.decisions.contains_key(&decision.id)
            || answers.decisions.contains_key(&decision.step_id);
        given && !answered.contains(&(decision.workflow_id.clone(), decision.id.clone()))
    }))
}

/// The decision's answer as an event.
fn resolution(decision: &DecisionRow, choice: &str, answers: &Answers) -> Event {
    Event::DecisionResolved {
        decision: decision.id.clone(),
        resolution: Resolution {
            choice: choice.to_owned(),
            reasoning: Some(answers.reasoning.clone()),
            data: None,
            resolved_by: Some(
                decision
                    .target_agent
                    .clone()
                    .unwrap_or_else(|| answers.decider.clone()),
            ),
        },
    }
}

/// Keeps a refusal's message; any other failure is the caller's.
fn refuse_into<T>(
    result: Result<T, ExecError>,
    refused: &mut Vec<String>,
) -> Result<(), ExecError> {
    match result {
        Ok(_) => Ok(()),
        Err(ExecError::Refused(rejected)) => {
            refused.push(rejected.message);
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Among the runs that only wait (stored, not ended, not loaded), those
/// with no timeout near: the root's status if it is one of them (the run
/// rests), after cancelling any child that is (noting it in `notes`).
async fn rest_or_unstick(
    executor: &Executor,
    id: &str,
    answers: &Answers,
    notes: &mut Vec<String>,
) -> Result<Option<WorkflowStatus>, ExecError> {
    let loaded = executor.loaded();
    let waiting: Vec<_> = executor
        .store()
        .workflows(WorkflowFilter::default())
        .await?
        .into_iter()
        .filter(|w| !w.status.is_ended() && loaded.binary_search(&w.id).is_err())
        .collect();
    if waiting.is_empty() {
        return Ok(None);
    }
    let horizon = now_ms().saturating_add(answers.max_wait.as_millis() as u64);
    let timers = executor.store().next_timers(u32::MAX).await?;
    let near: HashSet<&str> = timers
        .iter()
        .filter(|(_, due)| parse_ms(due).is_some_and(|due| due <= horizon))
        .map(|(workflow, _)| workflow.as_str())
        .collect();
    // A suspended child (a decision or a signal, no timeout due soon)
    // holds its parent: the run rests as suspended, the child named and
    // its question shown in the view (spec/mcp.md, "Decisions of child
    // runs").
    let held = crate::summary::waiting_below(executor.store().as_ref(), id).await?;
    if held.iter().any(|(child, _)| !near.contains(child.as_str())) {
        return Ok(Some(WorkflowStatus::Suspended));
    }
    for run in waiting.iter().filter(|w| !near.contains(w.id.as_str())) {
        if run.id == id {
            return Ok(Some(run.status));
        }
        let reason = format!(
            "child `{}` ({}) was cancelled: it waits for a signal that nobody sends here",
            run.name, run.id
        );
        match executor
            .deliver(
                &run.id,
                Event::Cancel {
                    reason: reason.clone(),
                },
            )
            .await
        {
            Ok(_) => notes.push(reason),
            Err(ExecError::Ended { .. } | ExecError::Refused(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}
