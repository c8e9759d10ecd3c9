//! Why a suspended run is stopped: whether `resume` can move it on (its
//! deadline suspended it, a restart interrupted it, it was quarantined) or
//! it waits for an input only an answer or a signal gives.

use serde_json::{Value, json};

use crate::store::{DecisionStatus, EventName, EventStore, StoreError, WorkflowStatus};

/// Entries at the end of a log read to find why the run stopped.
const TAIL: u64 = 64;

/// What a suspended run waits for, when `resume` cannot move it on.
#[derive(Debug, Clone, PartialEq)]
pub struct Awaited {
    /// The run that waits (the run itself or one below it).
    pub workflow_id: String,
    /// The suspended step.
    pub step_id: String,
    /// The pending decision's id and prompt; `None` for a signal wait.
    pub decision: Option<(String, String)>,
}

impl Awaited {
    /// The JSON a refusal's details carry.
    pub fn to_json(&self) -> Value {
        match &self.decision {
            Some((id, prompt)) => json!({
                "workflow_id": self.workflow_id, "step_id": self.step_id,
                "kind": "decision", "decision_id": id, "prompt": prompt,
            }),
            None => json!({
                "workflow_id": self.workflow_id, "step_id": self.step_id, "kind": "signal",
            }),
        }
    }

    /// What to do, in a sentence.
    pub fn advice(&self) -> String {
        match &self.decision {
            Some((_, prompt)) => format!(
                "run `{}` waits for the decision of step `{}` (\"{prompt}\"): answer it (signal_type `decision`)",
                self.workflow_id, self.step_id
            ),
            None => format!(
                "run `{}` waits for a signal at step `{}`: send it (signal_type `signal`)",
                self.workflow_id, self.step_id
            ),
        }
    }
}

/// What run `id` waits for when it is suspended only on inputs (decisions
/// or signals, its own or those of suspended runs below it): empty when
/// `resume` would move it on, or when it is not suspended.
pub async fn awaited(store: &dyn EventStore, id: &str) -> Result<Vec<Awaited>, StoreError> {
    let Some(row) = store.workflow(id).await? else {
        return Ok(Vec::new());
    };
    if row.status != WorkflowStatus::Suspended || resumable(store, id, row.last_seq).await? {
        return Ok(Vec::new());
    }
    let mut runs = vec![id.to_owned()];
    runs.extend(
        crate::summary::waiting_below(store, id)
            .await?
            .into_iter()
            .map(|(run, _)| run),
    );
    let mut out = Vec::new();
    for run in runs {
        let pending = store
            .decisions(Some(&run), Some(DecisionStatus::Pending))
            .await?;
        let Some(state) = store.state(&run).await? else {
            continue;
        };
        for step in state
            .steps
            .iter()
            .filter(|s| s.status == opcode_vm::StepStatus::Suspended)
        {
            let decision = pending
                .iter()
                .find(|d| d.step_id == step.step_id)
                .map(|d| (d.id.clone(), d.prompt.clone()));
            out.push(Awaited {
                workflow_id: run.clone(),
                step_id: step.step_id.clone(),
                decision,
            });
        }
    }
    Ok(out)
}

/// Did the run's last stop come from its deadline, a restart or a
/// quarantine (which `resume` lifts) rather than from its steps waiting?
/// Read from the log's tail; a stop too far back counts as resumable.
async fn resumable(store: &dyn EventStore, id: &str, last_seq: u64) -> Result<bool, StoreError> {
    let tail = store
        .entries(id, last_seq.saturating_sub(TAIL), false)
        .await?;
    for entry in tail.iter().rev() {
        match entry.name() {
            Some(EventName::WorkflowTimedOut) => {
                let payload: Value = serde_json::from_str(&entry.payload).unwrap_or_default();
                return Ok(payload["action"] == "suspend");
            }
            Some(EventName::WorkflowInterrupted | EventName::WorkflowQuarantined) => {
                return Ok(true);
            }
            Some(EventName::WorkflowResumed | EventName::WorkflowStarted) => return Ok(false),
            _ => {}
        }
    }
    Ok(tail.first().is_none_or(|first| first.seq > 1))
}
