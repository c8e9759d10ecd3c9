//! The mapping of a workflow's event log onto AG-UI events (spec/panel.md):
//! pure, so it is tested without a server.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use opcode_runtime::store::{
    DecisionRow, EntryKind, EventName, LogEntry, StepRow, StepStatus, WorkflowRow,
};

/// Why an AG-UI run ends.
#[derive(Debug, Clone, PartialEq)]
pub enum Stop {
    /// The workflow completed with this output.
    Completed(Value),
    /// It was cancelled.
    Cancelled,
    /// It failed.
    Failed {
        /// What went wrong.
        message: String,
        /// The error code.
        code: String,
    },
    /// It waits: for these decisions, or (when empty) to be resumed.
    Suspended(Vec<DecisionRow>),
}

/// The stop a log entry announces, if it announces one (a suspension's
/// decisions are read by the caller, so they are empty here).
pub fn stop_of(entry: &LogEntry) -> Option<Stop> {
    let payload: Value = serde_json::from_str(&entry.payload).unwrap_or(Value::Null);
    let name = entry.name()?;
    match (entry.kind, name) {
        (EntryKind::Record, EventName::WorkflowCompleted) => Some(Stop::Completed(
            payload.get("output").cloned().unwrap_or(Value::Null),
        )),
        (EntryKind::Record, EventName::WorkflowCancelled) => Some(Stop::Cancelled),
        (EntryKind::Record, EventName::WorkflowFailed) => Some(failed(payload.get("error"))),
        (EntryKind::Record, EventName::WorkflowSuspended)
        | (EntryKind::Note, EventName::WorkflowInterrupted) => Some(Stop::Suspended(Vec::new())),
        _ => None,
    }
}

/// The stop a workflow's row shows, when it is not running.
pub fn stop_of_row(row: &WorkflowRow, pending: Vec<DecisionRow>) -> Option<Stop> {
    let parse = |text: &Option<String>| {
        text.as_deref()
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
    };
    match row.status.as_str() {
        "completed" => Some(Stop::Completed(parse(&row.output).unwrap_or(Value::Null))),
        "cancelled" => Some(Stop::Cancelled),
        "failed" => Some(failed(parse(&row.error).as_ref())),
        "suspended" => Some(Stop::Suspended(pending)),
        _ => None,
    }
}

fn failed(error: Option<&Value>) -> Stop {
    let field = |name: &str| {
        error
            .and_then(|e| e.get(name))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    Stop::Failed {
        message: field("message").unwrap_or_else(|| "the workflow failed".into()),
        code: field("code").unwrap_or_else(|| "failed".into()),
    }
}

/// Turns log entries into the events of one AG-UI run.
#[derive(Debug)]
pub struct Mapper {
    thread_id: String,
    run_id: String,
    open: BTreeSet<String>,
}

impl Mapper {
    /// A run of `thread_id` (the workflow); answers `RUN_STARTED` and the
    /// `STATE_SNAPSHOT` of `row` and its `steps`.
    pub fn start(
        thread_id: &str,
        run_id: &str,
        row: &WorkflowRow,
        steps: &[StepRow],
    ) -> (Mapper, Vec<Value>) {
        let mut states = Map::new();
        for step in steps {
            states.insert(step.step_id.clone(), step_state_of_row(step));
        }
        let mut events = vec![
            json!({"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id}),
            json!({"type": "STATE_SNAPSHOT", "snapshot": {
                "workflow_id": row.id,
                "status": row.status,
                "steps": states,
                "agents": {},
            }}),
        ];
        let mut mapper = Mapper {
            thread_id: thread_id.to_owned(),
            run_id: run_id.to_owned(),
            open: BTreeSet::new(),
        };
        // A client that joins while steps run sees them start now, not
        // when they end.
        for step in steps {
            if matches!(step.status, StepStatus::Running | StepStatus::Retrying) {
                events.extend(mapper.open(&step.step_id));
            }
        }
        (mapper, events)
    }

    /// `STEP_STARTED` for `step` unless it is open already (a step that
    /// was running when the stream began, whose agent speaks).
    pub fn open(&mut self, step: &str) -> Vec<Value> {
        if self.open.insert(step.to_owned()) {
            vec![json!({"type": "STEP_STARTED", "stepName": step})]
        } else {
            Vec::new()
        }
    }

    /// The events one log entry gives.
    pub fn entry(&mut self, entry: &LogEntry) -> Vec<Value> {
        if entry.kind != EntryKind::Record {
            return Vec::new();
        }
        let Some(step) = entry.step_id.as_deref() else {
            return match entry.name() {
                Some(EventName::WorkflowResumed | EventName::WorkflowStarted) => {
                    vec![status_delta("active")]
                }
                _ => Vec::new(),
            };
        };
        let payload: Value = serde_json::from_str(&entry.payload).unwrap_or(Value::Null);
        let Some(name) = entry.name() else {
            return Vec::new();
        };
        let status = match name {
            EventName::StepStarted => "running",
            EventName::StepRetrying => "retrying",
            EventName::StepCompleted => "completed",
            EventName::StepFailed => "failed",
            EventName::StepIgnored => "ignored",
            EventName::StepSkipped => {
                let reason = payload["reason"].as_str().unwrap_or_default();
                StepStatus::of_skip(reason).as_str()
            }
            EventName::StepSuspended => "suspended",
            _ => return Vec::new(),
        };
        let ends = name.ends_step();
        let mut state = json!({"status": status});
        for field in ["output", "error"] {
            if let Some(value) = payload.get(field) {
                state[field] = value.clone();
            }
        }
        let delta = json!({"type": "STATE_DELTA", "delta": [
            {"op": "add", "path": format!("/steps/{}", pointer_token(step)), "value": state},
        ]});
        let mut events = Vec::new();
        if !self.open.contains(step) {
            self.open.insert(step.to_owned());
            events.push(json!({"type": "STEP_STARTED", "stepName": step}));
        }
        events.push(delta);
        if ends {
            self.open.remove(step);
            events.push(json!({"type": "STEP_FINISHED", "stepName": step}));
        }
        events
    }

    /// The events that end the run: open steps finished, then
    /// `RUN_FINISHED` or `RUN_ERROR`.
    pub fn finish(mut self, stop: &Stop) -> Vec<Value> {
        let mut events: Vec<Value> = std::mem::take(&mut self.open)
            .into_iter()
            .map(|step| json!({"type": "STEP_FINISHED", "stepName": step}))
            .collect();
        let status = match stop {
            Stop::Completed(_) => "completed",
            Stop::Cancelled => "cancelled",
            Stop::Failed { .. } => "failed",
            Stop::Suspended(_) => "suspended",
        };
        events.push(status_delta(status));
        let (thread, run) = (&self.thread_id, &self.run_id);
        events.push(match stop {
            Stop::Completed(output) => json!({
                "type": "RUN_FINISHED", "threadId": thread, "runId": run,
                "result": output, "outcome": {"type": "success"},
            }),
            Stop::Cancelled => json!({
                "type": "RUN_FINISHED", "threadId": thread, "runId": run,
                "outcome": {"type": "cancelled"},
            }),
            Stop::Failed { message, code } => json!({
                "type": "RUN_ERROR", "message": message, "code": code,
            }),
            Stop::Suspended(decisions) => json!({
                "type": "RUN_FINISHED", "threadId": thread, "runId": run,
                "outcome": {"type": "interrupt", "interrupts": interrupts(decisions)},
            }),
        });
        events
    }
}

/// The interrupt of each pending decision, or the one `resume` interrupt.
fn interrupts(decisions: &[DecisionRow]) -> Vec<Value> {
    if decisions.is_empty() {
        return vec![json!({
            "id": "resume",
            "reason": "suspended",
            "message": "The workflow is suspended; answer to resume it \
                        (payload {signal, data} sends a named signal instead).",
        })];
    }
    decisions.iter().map(interrupt).collect()
}

fn interrupt(d: &DecisionRow) -> Value {
    let options: Vec<Value> = serde_json::from_str(&d.options).unwrap_or_default();
    let ids: Vec<Value> = options
        .iter()
        .map(|o| o.get("id").cloned().unwrap_or_else(|| o.clone()))
        .collect();
    let mut choice = json!({"type": "string", "description": "the chosen option's id"});
    if !ids.is_empty() {
        choice["enum"] = Value::Array(ids);
    }
    let mut value = json!({
        "id": d.id,
        "reason": "decision",
        "message": d.prompt,
        "responseSchema": {
            "type": "object",
            "required": ["choice"],
            "properties": {
                "choice": choice,
                "reasoning": {"type": "string"},
                "data": {},
            },
        },
        "metadata": {
            "step_id": d.step_id,
            "options": options,
            "context": serde_json::from_str::<Value>(&d.context).unwrap_or(Value::Null),
        },
    });
    if let Some(at) = &d.timeout_at {
        value["expiresAt"] = json!(at);
    }
    value
}

fn status_delta(status: &str) -> Value {
    json!({"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/status", "value": status}]})
}

fn step_state_of_row(step: &StepRow) -> Value {
    let mut state = json!({"status": step.status});
    for (field, text) in [("output", &step.output), ("error", &step.error)] {
        if let Some(value) = text
            .as_deref()
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
        {
            state[field] = value;
        }
    }
    state
}

/// `token` escaped for a JSON Pointer (RFC 6901).
pub(super) fn pointer_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: u64, event_type: &str, step: Option<&str>, payload: &Value) -> LogEntry {
        LogEntry {
            seq,
            at: "2026-11-29T00:00:00.000Z".into(),
            kind: EntryKind::Record,
            event_type: event_type.into(),
            step_id: step.map(str::to_owned),
            version: 1,
            payload: payload.to_string(),
        }
    }

    #[test]
    fn a_run_that_suspends_on_a_decision() {
        let row = WorkflowRow {
            id: "wf".into(),
            status: opcode_runtime::store::WorkflowStatus::Active,
            ..WorkflowRow::default()
        };
        let (mut mapper, mut events) = Mapper::start("wf", "wf@0", &row, &[]);
        let log = [
            record(1, "workflow_started", None, &json!({})),
            record(2, "step_started", Some("fetch"), &json!({"attempt": 1})),
            record(
                3,
                "step_completed",
                Some("fetch"),
                &json!({"output": {"n": 1}}),
            ),
            record(4, "step_started", Some("a/b"), &json!({"attempt": 1})),
            record(5, "step_suspended", Some("a/b"), &json!({})),
            record(6, "workflow_suspended", None, &json!({})),
        ];
        let mut stop = None;
        for entry in &log {
            events.extend(mapper.entry(entry));
            stop = stop.or_else(|| stop_of(entry));
        }
        assert_eq!(stop, Some(Stop::Suspended(Vec::new())));
        let decision = DecisionRow {
            id: "a/b".into(),
            workflow_id: "wf".into(),
            step_id: "a/b".into(),
            prompt: "Ship it?".into(),
            options: r#"[{"id":"yes"},{"id":"no"}]"#.into(),
            context: "{}".into(),
            timeout_at: Some("2026-11-30T00:00:00.000Z".into()),
            status: opcode_runtime::store::DecisionStatus::Pending,
            ..DecisionRow::default()
        };
        events.extend(mapper.finish(&Stop::Suspended(vec![decision])));
        insta::assert_json_snapshot!(events);
    }

    #[test]
    fn a_stopped_step_reads_as_cancelled_and_an_unguarded_one_as_skipped() {
        let row = WorkflowRow::default();
        let (mut mapper, _) = Mapper::start("wf", "r", &row, &[]);
        let status = |events: Vec<Value>| events[1]["delta"][0]["value"]["status"].clone();
        let stopped = record(
            1,
            "step_skipped",
            Some("x"),
            &json!({"reason": "cancelled"}),
        );
        assert_eq!(status(mapper.entry(&stopped)), "cancelled");
        let guarded = record(2, "step_skipped", Some("y"), &json!({"reason": "guard"}));
        assert_eq!(status(mapper.entry(&guarded)), "skipped");
    }

    #[test]
    fn steps_running_when_the_stream_begins_start_at_once() {
        let row = WorkflowRow::default();
        let step = |id: &str, status| StepRow {
            step_id: id.into(),
            status,
            ..StepRow::default()
        };
        let rows = [
            step("done", StepStatus::Completed),
            step("slow", StepStatus::Running),
        ];
        let (mut mapper, events) = Mapper::start("wf", "r", &row, &rows);
        let started: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "STEP_STARTED")
            .collect();
        assert_eq!(started.len(), 1, "{events:?}");
        assert_eq!(started[0]["stepName"], "slow");
        let ended = mapper.entry(&record(9, "step_completed", Some("slow"), &json!({})));
        assert!(
            ended.iter().all(|e| e["type"] != "STEP_STARTED"),
            "{ended:?}"
        );
    }

    #[test]
    fn a_step_finished_without_being_seen_to_start_is_opened_first() {
        let row = WorkflowRow::default();
        let (mut mapper, _) = Mapper::start("wf", "r", &row, &[]);
        let events = mapper.entry(&record(9, "step_failed", Some("x"), &json!({"error": {}})));
        let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["STEP_STARTED", "STATE_DELTA", "STEP_FINISHED"]);
        let end = mapper.finish(&Stop::Failed {
            message: "boom".into(),
            code: "R0100".into(),
        });
        assert_eq!(end.last().unwrap()["type"], "RUN_ERROR");
    }
}
