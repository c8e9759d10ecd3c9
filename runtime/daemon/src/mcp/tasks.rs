//! Runs as MCP Tasks (the `io.modelcontextprotocol/tasks` extension,
//! spec/mcp.md "Tasks"): the task is the durable run, its id the workflow
//! id; its state is read from the store each time, so a task outlives the
//! daemon that created it. A pending decision is an `input_required` form
//! elicitation; `tasks/update` answers it as `opcode.signal` would.

use opcode_runtime::store::{
    Admitted, DecisionRow, DecisionStatus, Standing, WorkflowRow, WorkflowStatus,
};
use rmcp::ErrorData;
use rmcp::model::{
    CreateTaskResult, DetailedTask, InputRequest, InputRequests, InputResponses, JsonObject, Task,
    TaskPayload, TaskStatus,
};
use serde_json::{Value, json};

use crate::api::{Api, ToolError};

/// How often a client should ask again, in milliseconds.
const POLL_MS: u64 = 1000;

/// The task of a run just started (`started`: `{workflow_id, status}`).
pub async fn created(api: &Api, started: &Value) -> Result<CreateTaskResult, ErrorData> {
    let id = started["workflow_id"].as_str().unwrap_or_default();
    let row = row(api, id).await?;
    Ok(CreateTaskResult::new(base(&row, TaskStatus::Working)))
}

/// The task `id` as it stands, from the log's derived state.
pub async fn detailed(api: &Api, id: &str, terse: bool) -> Result<DetailedTask, ErrorData> {
    let row = row(api, id).await?;
    let payload = match row.status {
        // Quarantined runs wait for someone to resume or cancel them.
        WorkflowStatus::Pending | WorkflowStatus::Quarantined => TaskPayload::Working,
        // A run whose actions asked questions (spec/agents.md) waits for
        // their answers while it stays active.
        WorkflowStatus::Active => {
            let asks: Vec<DecisionRow> = pending(api, id)
                .await?
                .into_iter()
                .filter(|d| opcode_vm::event::asking_step(&d.id).is_some())
                .collect();
            answers_to(&asks)
        }
        // Without a pending decision it waits for a named signal, or is
        // halted by its deadline: nothing a client can answer through the
        // task.
        WorkflowStatus::Suspended => answers_to(&pending(api, id).await?),
        // A run that ended, well or badly, is a tool call that ran: its task
        // is completed with what `opcode.run` would have answered (the
        // view says `failed` and why). `failed` is kept for protocol
        // errors (SEP-2663, "error semantics").
        WorkflowStatus::Completed | WorkflowStatus::Failed => TaskPayload::Completed {
            result: result_of(api, id, terse).await?,
        },
        WorkflowStatus::Cancelled => TaskPayload::Cancelled,
    };
    let mut task = base(&row, payload.status());
    if row.status == WorkflowStatus::Suspended && matches!(payload, TaskPayload::Working) {
        task =
            task.with_status_message("suspended: waiting for a signal or a resume (opcode.signal)");
    }
    if row.status == WorkflowStatus::Active
        && matches!(payload, TaskPayload::Working)
        && let Some(waiting) = queued(api, id).await?
    {
        task = task.with_status_message(waiting);
    }
    if row.status == WorkflowStatus::Quarantined {
        task = task.with_status_message(
            "quarantined: its recovery kept ending the process; resume or cancel it (opcode.signal)",
        );
    }
    Ok(DetailedTask::new(task, payload))
}

/// What a run waiting for a slot of its concurrency key waits for, said for
/// a person; none for a run that holds its slot or has no key.
async fn queued(api: &Api, id: &str) -> Result<Option<String>, ErrorData> {
    let standing = api
        .executor()
        .store()
        .standing(id)
        .await
        .map_err(|e| super::internal(e.into()))?;
    let Some(Standing {
        key,
        limit,
        admitted: Admitted::Waits { position, holders },
    }) = standing
    else {
        return Ok(None);
    };
    Ok(Some(format!(
        "queued: waiting for a slot of concurrency key `{key}` (limit {limit}, held by {}; \
         {position} waiting before it)",
        holders.join(", ")
    )))
}

/// Applies `tasks/update`'s answers: each key a pending decision's id, each
/// value an elicitation result (`accept` with `{choice, reasoning, data}`
/// answers it, `decline` cancels it and skips its step, `cancel` leaves it
/// pending). Answers are validated and logged as `opcode.signal`'s.
pub async fn update(api: &Api, id: &str, responses: InputResponses) -> Result<(), ErrorData> {
    row(api, id).await?;
    for (decision, response) in responses {
        let content = response.get("content").cloned().unwrap_or(Value::Null);
        let args = match response.get("action").and_then(Value::as_str) {
            Some("accept") => {
                let mut payload =
                    json!({"choice": content.get("choice").cloned().unwrap_or(Value::Null)});
                if let Some(data) = content.get("data") {
                    payload["data"] = data.clone();
                }
                let mut args = json!({"workflow_id": id, "signal_type": "decision",
                    "step_id": decision, "payload": payload, "wait": false});
                if let Some(reasoning) = content.get("reasoning") {
                    args["reasoning"] = reasoning.clone();
                }
                args
            }
            Some("decline") => json!({"workflow_id": id, "signal_type": "cancel",
                "step_id": decision, "wait": false}),
            Some("cancel") => continue,
            _ => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "the answer to `{decision}` needs an action: accept, decline or cancel"
                    ),
                    None,
                ));
            }
        };
        api.call("opcode.signal", args)
            .await
            .map_err(|e| invalid(&e))?;
    }
    Ok(())
}

/// `tasks/cancel`: cancels the workflow (a finished one stays as it is).
pub async fn cancel(api: &Api, id: &str) -> Result<(), ErrorData> {
    let row = row(api, id).await?;
    if row.status.is_ended() {
        return Ok(());
    }
    let args = json!({"workflow_id": id, "signal_type": "cancel", "wait": false,
                      "payload": {"reason": "cancelled by tasks/cancel"}});
    api.call("opcode.signal", args)
        .await
        .map(|_| ())
        .map_err(|e| invalid(&e))
}

/// A pending decision as a form elicitation (an input request of its task).
fn ask(decision: &DecisionRow) -> Option<InputRequest> {
    let request = json!({"method": "elicitation/create", "params": question(decision)});
    // The shape is the spec's own form elicitation.
    serde_json::from_value(request).ok()
}

/// The parameters of `elicitation/create` that ask `decision`: its prompt
/// and context as the message, its options as the enum of `choice`.
pub fn question(decision: &DecisionRow) -> Value {
    let options: Vec<Value> = serde_json::from_str(&decision.options).unwrap_or_default();
    let ids: Vec<&Value> = options.iter().filter_map(|o| o.get("id")).collect();
    let described: Vec<String> = options
        .iter()
        .map(|o| {
            let id = o["id"].as_str().unwrap_or_default();
            o["description"]
                .as_str()
                .map_or_else(|| id.to_owned(), |d| format!("{id}: {d}"))
        })
        .collect();
    let mut choice = json!({"type": "string", "title": "Choice"});
    if ids.is_empty() {
        choice["description"] = json!("Free-form answer");
    } else {
        choice["enum"] = json!(ids);
        choice["description"] = json!(described.join("; "));
    }
    let data: Value = serde_json::from_str(&decision.context).unwrap_or(Value::Null);
    let message = if data.is_null() || data == json!({}) {
        decision.prompt.clone()
    } else {
        format!("{}\n\nContext: {data}", decision.prompt)
    };
    json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": {
                "choice": choice,
                "reasoning": {"type": "string", "title": "Reasoning", "description": "Why (kept with the answer)"}
            },
            "required": ["choice"]
        },
        "_meta": {"opcode/step_id": decision.step_id, "opcode/data": data}
    })
}

/// The finished run's tool result, as `opcode.run` would have answered it.
async fn result_of(api: &Api, id: &str, terse: bool) -> Result<JsonObject, ErrorData> {
    let view = api
        .call("opcode.status", json!({"workflow_id": id}))
        .await
        .map_err(super::internal)?;
    let result = super::structured(view, terse);
    Ok(super::json_object(
        &serde_json::to_value(result).unwrap_or(Value::Null),
    ))
}

fn base(row: &WorkflowRow, status: TaskStatus) -> Task {
    Task::new(
        row.id.clone(),
        status,
        row.created_at.clone(),
        row.updated_at.clone(),
    )
    .with_poll_interval_ms(POLL_MS)
}

/// The payload of a task waiting for `questions`: working when there are
/// none, else each asked as a form.
fn answers_to(questions: &[DecisionRow]) -> TaskPayload {
    if questions.is_empty() {
        return TaskPayload::Working;
    }
    TaskPayload::InputRequired {
        input_requests: questions
            .iter()
            .filter_map(|d| Some((d.id.clone(), ask(d)?)))
            .collect::<InputRequests>(),
    }
}

/// The pending decisions of run `id`.
async fn pending(api: &Api, id: &str) -> Result<Vec<DecisionRow>, ErrorData> {
    api.executor()
        .store()
        .decisions(Some(id), Some(DecisionStatus::Pending))
        .await
        .map_err(|e| super::internal(e.into()))
}

async fn row(api: &Api, id: &str) -> Result<WorkflowRow, ErrorData> {
    api.executor()
        .store()
        .workflow(id)
        .await
        .map_err(|e| super::internal(e.into()))?
        .ok_or_else(|| ErrorData::invalid_params(format!("there is no task `{id}`"), None))
}

fn invalid(error: &ToolError) -> ErrorData {
    ErrorData::invalid_params(error.message.clone(), Some(error.to_json()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_is_a_form_whose_choice_is_an_enum() {
        let decision = DecisionRow {
            id: "gate".into(),
            step_id: "gate".into(),
            prompt: "Ship it?".into(),
            options: r#"[{"id":"yes","description":"ship"},{"id":"no"}]"#.into(),
            context: r#"{"build":42}"#.into(),
            ..DecisionRow::default()
        };
        let asked = serde_json::to_value(ask(&decision).unwrap()).unwrap();
        assert_eq!(asked["method"], "elicitation/create");
        let schema = &asked["params"]["requestedSchema"];
        assert_eq!(schema["properties"]["choice"]["enum"], json!(["yes", "no"]));
        assert_eq!(schema["required"], json!(["choice"]));
        assert!(
            asked["params"]["message"]
                .as_str()
                .unwrap()
                .contains("\"build\":42")
        );
    }
}
