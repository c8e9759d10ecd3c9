//! A finished run as a workflow test case (spec/testing.md, "Golden
//! runs"): its inputs; every call it made, in attempt order, as a mock
//! that gives the recorded result and expects the recorded parameters; its
//! decisions and signals; and, as expectations, its status, output and
//! each step's status and attempts. `opcodec test` replays it against the
//! current definition, so a change that dispatches another step, calls one
//! with other parameters or ends otherwise fails, naming the step.

use serde_json::{Map, Value, json};

use crate::log;
use crate::store::{
    EntryKind, EventName, LogEntry, RunLog, StoreError, WorkflowRow, WorkflowState, WorkflowStatus,
};
use opcode_vm::event::Event;

/// Why a run cannot be exported.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// No run has this id.
    #[error("workflow `{0}` not found")]
    NotFound(String),
    /// The run is still going: its result is not known yet.
    #[error("workflow `{0}` is {1}: export a run that has ended or rests suspended")]
    NotAtRest(String, &'static str),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Whether a run of this status can be exported: it has ended, or rests
/// suspended (its case then expects it to stay so).
pub fn exportable(status: WorkflowStatus) -> bool {
    status.is_ended() || status == WorkflowStatus::Suspended
}

/// The test case of run `id`, read from `store`, named after the run.
pub async fn export(store: &dyn RunLog, id: &str) -> Result<Value, ExportError> {
    let state = store
        .state(id)
        .await?
        .ok_or_else(|| ExportError::NotFound(id.to_owned()))?;
    let status = state.workflow.status;
    if !exportable(status) {
        return Err(ExportError::NotAtRest(id.to_owned(), status.as_str()));
    }
    let entries = store.entries(id, 0, false).await?;
    let name = format!("golden run {id} ({})", state.workflow.name);
    Ok(case(&state, &entries, &name)?)
}

/// A test file of `cases`, naming `workflow` (relative to where the file
/// goes) when given.
pub fn test_file(cases: &[Value], workflow: Option<&str>) -> Value {
    let mut file = json!({"cases": cases});
    if let Some(workflow) = workflow {
        file["workflow"] = json!(workflow);
    }
    file
}

/// The test case of run `state`, named `name`, from its log `entries`.
pub fn case(state: &WorkflowState, entries: &[LogEntry], name: &str) -> Result<Value, StoreError> {
    let row: &WorkflowRow = &state.workflow;
    let mut mocks: Map<String, Value> = Map::new();
    let mut params: Map<String, Value> = Map::new();
    let mut decisions = Map::new();
    let mut signals = Vec::new();
    for entry in entries {
        let step = entry.step_id.clone().unwrap_or_default();
        match (entry.kind, entry.name()) {
            (EntryKind::Record, Some(EventName::StepStarted)) => {
                let payload: Value = serde_json::from_str(&entry.payload).unwrap_or(Value::Null);
                if let Some(input) = payload.get("input") {
                    params.insert(step, without_secrets(input));
                }
            }
            (EntryKind::Input, _) => match log::decode(entry) {
                Ok((_, Event::ActionFinished { result, .. })) => {
                    let mut mock = match result {
                        Ok(output) => json!({"output": output}),
                        Err(e) => {
                            json!({"error": {"code": e.code, "message": e.message, "retryable": e.retryable}})
                        }
                    };
                    if let Some(p) = params.remove(&step) {
                        mock["params"] = p;
                    }
                    let calls = mocks.entry(step).or_insert_with(|| json!({"sequence": []}));
                    if let Some(sequence) = calls["sequence"].as_array_mut() {
                        sequence.push(mock);
                    }
                }
                Ok((_, Event::DecisionResolved { resolution, .. })) => {
                    decisions.insert(step, resolution.choice.into());
                }
                Ok((_, Event::Signal { name, payload })) => {
                    signals.push(json!({"name": name, "payload": payload}));
                }
                Ok(_) => {}
                Err(e) => return Err(StoreError::Backend(e.to_string())),
            },
            _ => {}
        }
    }
    let steps: Map<String, Value> = state
        .steps
        .iter()
        .map(|s| {
            (
                s.step_id.clone(),
                json!({"status": s.status.as_str(), "attempts": s.attempt}),
            )
        })
        .collect();
    let mut expect = json!({"status": row.status.as_str(), "steps": steps});
    if let Some(output) = row
        .output
        .as_deref()
        .and_then(|o| serde_json::from_str::<Value>(o).ok())
    {
        expect["output"] = output;
    }
    let inputs: Value = serde_json::from_str(&row.inputs).unwrap_or(Value::Null);
    Ok(json!({
        "name": name,
        "inputs": without_secrets(&inputs),
        "mocks": mocks,
        "decisions": decisions,
        "signals": signals,
        "expect": expect,
    }))
}

/// `value` without the strings that are secret references (a call is
/// given the secret's value, which no test file may hold).
fn without_secrets(value: &Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.as_str().is_some_and(|s| s.contains("${{secrets.")))
                .map(|(k, v)| (k.clone(), without_secrets(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_secrets).collect()),
        other => other.clone(),
    }
}
