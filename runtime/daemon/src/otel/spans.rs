//! Spans from the event log: one per step attempt, one per run, with ids
//! derived from the workflow id, so a run's spans share one trace across
//! daemon restarts and the same log always gives the same spans. Pure.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use serde_json::Value;
use sha2::{Digest, Sha256};

use opcode_runtime::store::{EntryKind, EventName, LogEntry, WorkflowRow};
use opcode_runtime::time::parse_ms;

/// The trace of workflow `id`.
pub fn trace_id(id: &str) -> TraceId {
    let digest = Sha256::digest(id.as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    TraceId::from_bytes(bytes)
}

fn span_id(key: &str) -> SpanId {
    let digest = Sha256::digest(key.as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    SpanId::from_bytes(bytes)
}

/// The span of workflow `id`'s run.
pub fn run_span_id(id: &str) -> SpanId {
    span_id(&format!("run:{id}"))
}

fn time_of(at: &str) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(parse_ms(at).unwrap_or(0))
}

/// A step attempt that started and has not ended.
#[derive(Debug, Clone)]
struct Open {
    at: String,
    attempt: u64,
    action: Option<String>,
}

/// Turns log entries into spans as they are appended.
#[derive(Debug, Default)]
pub struct Tracker {
    open: HashMap<(String, String), Open>,
}

/// How a run ended, from its last record.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEnd {
    /// When.
    pub at: String,
    /// `completed`, `failed` or `cancelled`.
    pub status: &'static str,
    /// Why it failed.
    pub error: Option<String>,
}

impl Tracker {
    /// The spans of the step attempts `entries` (of workflow `id`) end, and
    /// how the run ended if it did.
    pub fn entries(&mut self, id: &str, entries: &[LogEntry]) -> (Vec<SpanData>, Option<RunEnd>) {
        let mut spans = Vec::new();
        let mut end = None;
        for entry in entries.iter().filter(|e| e.kind == EntryKind::Record) {
            let payload: Value = serde_json::from_str(&entry.payload).unwrap_or(Value::Null);
            let error = || {
                payload
                    .get("error")
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            };
            let Some(step) = &entry.step_id else {
                let status = match entry.name() {
                    Some(EventName::WorkflowCompleted) => "completed",
                    Some(EventName::WorkflowFailed) => "failed",
                    Some(EventName::WorkflowCancelled) => "cancelled",
                    _ => continue,
                };
                self.open.retain(|(w, _), _| w != id);
                end = Some(RunEnd {
                    at: entry.at.clone(),
                    status,
                    error: error(),
                });
                continue;
            };
            let key = (id.to_owned(), step.clone());
            let outcome = match entry.name() {
                Some(EventName::StepStarted) => {
                    let open = Open {
                        at: entry.at.clone(),
                        attempt: payload.get("attempt").and_then(Value::as_u64).unwrap_or(1),
                        action: payload
                            .get("action")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                    };
                    self.open.insert(key, open);
                    continue;
                }
                Some(EventName::StepCompleted) => ("completed", None),
                Some(EventName::StepSkipped) => {
                    let reason = payload["reason"].as_str().unwrap_or_default();
                    (opcode_vm::StepStatus::of_skip(reason).as_str(), None)
                }
                Some(EventName::StepFailed | EventName::StepIgnored | EventName::StepRetrying) => {
                    ("failed", error())
                }
                _ => continue,
            };
            let started = self.open.remove(&key).unwrap_or_else(|| Open {
                // Started before this process watched: known only to end now.
                at: entry.at.clone(),
                attempt: payload
                    .get("attempt")
                    .and_then(Value::as_u64)
                    .map_or(1, |a| a.saturating_sub(1).max(1)),
                action: None,
            });
            spans.push(step_span(id, step, &started, &entry.at, outcome));
        }
        (spans, end)
    }
}

fn step_span(
    id: &str,
    step: &str,
    started: &Open,
    at: &str,
    (status, error): (&str, Option<String>),
) -> SpanData {
    let mut attributes = vec![
        KeyValue::new("opcode.workflow_id", id.to_owned()),
        KeyValue::new("opcode.step_id", step.to_owned()),
        KeyValue::new("opcode.attempt", started.attempt as i64),
        KeyValue::new("opcode.status", status.to_owned()),
    ];
    if let Some(action) = &started.action {
        attributes.push(KeyValue::new("opcode.action", action.clone()));
    }
    span(
        id,
        span_id(&format!("step:{id}:{step}:{}", started.attempt)),
        run_span_id(id),
        format!("step {step}"),
        (time_of(&started.at), time_of(at)),
        attributes,
        error.map_or(Status::Ok, Status::error),
    )
}

/// The span of a run that ended as `end`.
pub fn run_span(row: &WorkflowRow, end: &RunEnd) -> SpanData {
    let start = row.started_at.as_deref().unwrap_or(&row.created_at);
    let mut attributes = vec![
        KeyValue::new("opcode.workflow_id", row.id.clone()),
        KeyValue::new("opcode.workflow_name", row.name.clone()),
        KeyValue::new("opcode.status", end.status),
    ];
    for (key, value) in [
        ("opcode.template", &row.template_name),
        ("opcode.agent_id", &row.agent_id),
        ("opcode.parent_workflow_id", &row.parent_id),
    ] {
        if let Some(value) = value {
            attributes.push(KeyValue::new(key, value.clone()));
        }
    }
    let status = match (end.status, &end.error) {
        ("failed", error) => Status::error(error.clone().unwrap_or_else(|| "failed".into())),
        _ => Status::Ok,
    };
    span(
        &row.id,
        run_span_id(&row.id),
        SpanId::INVALID,
        if row.name.is_empty() {
            "run".to_owned()
        } else {
            format!("run {}", row.name)
        },
        (time_of(start), time_of(&end.at)),
        attributes,
        status,
    )
}

fn span(
    id: &str,
    span_id: SpanId,
    parent: SpanId,
    name: String,
    (start_time, end_time): (SystemTime, SystemTime),
    attributes: Vec<KeyValue>,
    status: Status,
) -> SpanData {
    SpanData {
        span_context: SpanContext::new(
            trace_id(id),
            span_id,
            TraceFlags::SAMPLED,
            false,
            TraceState::NONE,
        ),
        parent_span_id: parent,
        parent_span_is_remote: false,
        span_kind: SpanKind::Internal,
        name: Cow::Owned(name),
        start_time,
        end_time: end_time.max(start_time),
        attributes,
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status,
        instrumentation_scope: InstrumentationScope::builder("opcode").build(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(at: &str, event_type: &str, step: Option<&str>, payload: &str) -> LogEntry {
        LogEntry {
            seq: 0,
            at: at.into(),
            kind: EntryKind::Record,
            event_type: event_type.into(),
            step_id: step.map(str::to_owned),
            version: 1,
            payload: payload.into(),
        }
    }

    #[test]
    fn attempts_become_child_spans_of_the_run() {
        let mut tracker = Tracker::default();
        let (spans, end) = tracker.entries(
            "wf",
            &[
                record(
                    "2026-11-29T00:00:00.000Z",
                    "step_started",
                    Some("fetch"),
                    r#"{"attempt":1,"action":"http.get"}"#,
                ),
                record(
                    "2026-11-29T00:00:01.000Z",
                    "step_retrying",
                    Some("fetch"),
                    r#"{"attempt":2,"error":{"message":"503"}}"#,
                ),
            ],
        );
        assert!(end.is_none());
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0].status, Status::error("503"));
        let (spans, end) = tracker.entries(
            "wf",
            &[
                record(
                    "2026-11-29T00:00:02.000Z",
                    "step_started",
                    Some("fetch"),
                    r#"{"attempt":2,"action":"http.get"}"#,
                ),
                record(
                    "2026-11-29T00:00:02.500Z",
                    "step_completed",
                    Some("fetch"),
                    r#"{"output":{}}"#,
                ),
                record(
                    "2026-11-29T00:00:02.500Z",
                    "workflow_completed",
                    None,
                    r#"{"output":{}}"#,
                ),
            ],
        );
        let span = &spans[0];
        assert_eq!(span.name, "step fetch");
        assert_eq!(span.parent_span_id, run_span_id("wf"));
        assert_eq!(span.span_context.trace_id(), trace_id("wf"));
        assert_eq!(
            span.end_time.duration_since(span.start_time).unwrap(),
            Duration::from_millis(500)
        );
        assert!(
            span.attributes
                .contains(&KeyValue::new("opcode.action", "http.get"))
        );
        let end = end.unwrap();
        let row = WorkflowRow {
            id: "wf".into(),
            name: "fetcher".into(),
            created_at: "2026-11-29T00:00:00.000Z".into(),
            ..WorkflowRow::default()
        };
        let run = run_span(&row, &end);
        assert_eq!(
            (run.name.as_ref(), run.parent_span_id),
            ("run fetcher", SpanId::INVALID)
        );
        assert_eq!(run.span_context.span_id(), run_span_id("wf"));
    }
}
