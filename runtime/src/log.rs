//! Log entries: what the executor writes for each VM input, record and
//! runtime note, and how inputs are read back for replay.
//!
//! Inputs are the serialized [`Event`] (their schema version is
//! [`EVENT_VERSION`]); replay reads nothing else. Records and notes carry
//! people-facing payloads under [`RECORD_VERSION`]: the step instance goes
//! in the `step_id` column, not in the payload.

use std::borrow::Cow;

use opcode_vm::Plan;
use opcode_vm::effect::{Dispatch, Record};
use opcode_vm::event::{EVENT_VERSION, Event};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::store::{EntryKind, EventName, LogEntry, NewEntry};
use crate::time::{parse_ms, rfc3339};

/// Schema version of record and note payloads.
pub const RECORD_VERSION: u16 = 1;

/// The entry for an input event.
pub fn input(at: &str, event: &Event, step_id: Option<String>) -> NewEntry {
    NewEntry {
        at: at.to_owned(),
        kind: EntryKind::Input,
        event_type: event.name(),
        step_id,
        version: EVENT_VERSION,
        payload: serde_json::to_string(event).unwrap_or_else(|_| "{}".into()),
    }
}

/// The entry for a record. A step's start is given its attempt's
/// dispatch as `call`: its entry then says what the attempt calls,
/// `action`, and `input`, the resolved params with each secret as its
/// `${{secrets.NAME}}` reference (values are written into the call only).
pub fn record(at: &str, record: &Record, plan: &Plan, call: Option<&Dispatch>) -> NewEntry {
    NewEntry {
        at: at.to_owned(),
        kind: EntryKind::Record,
        event_type: record.event_type(),
        step_id: record.inst().map(|inst| plan.instance_name(inst)),
        version: RECORD_VERSION,
        payload: record_payload(record, plan, call),
    }
}

/// A step's start, as [`payload_of`] writes it.
#[derive(Serialize)]
struct Started<'a> {
    attempt: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    action: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input: Option<Cow<'a, Value>>,
}

/// A step's end, as [`payload_of`] writes it (its key removals swap
/// `carried_from` first).
#[derive(Serialize)]
struct Completed<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    carried_from: Option<&'a str>,
    output: &'a Value,
}

/// A record's payload text. The two records every step writes are
/// serialized straight from the record, the same text [`payload_of`]
/// makes through a copy of it (the output, the params).
fn record_payload(record: &Record, plan: &Plan, call: Option<&Dispatch>) -> String {
    let text = match record {
        Record::StepStarted { attempt, .. } => serde_json::to_string(&Started {
            attempt: *attempt,
            action: call.map(|d| d.action.as_str()),
            input: call.map(|d| {
                if d.secrets.is_empty() {
                    Cow::Borrowed(&d.params)
                } else {
                    Cow::Owned(opcode_stdlib::exec::shown_params(d))
                }
            }),
        }),
        Record::StepCompleted {
            output,
            carried_from,
            ..
        } => serde_json::to_string(&Completed {
            output,
            carried_from: carried_from.as_deref(),
        }),
        _ => return payload_of(record, plan, call),
    };
    text.unwrap_or_else(|_| payload_of(record, plan, call))
}

/// A record's payload: its fields but the tag and the instance, the
/// fallback step by id, and a start's call.
fn payload_of(record: &Record, plan: &Plan, call: Option<&Dispatch>) -> String {
    let mut payload = match serde_json::to_value(record) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    payload.remove("record");
    payload.remove("inst");
    if let Record::FallbackStarted { fallback, .. } = record {
        payload.insert("fallback_step".into(), plan.id(*fallback).into());
        payload.remove("fallback");
    }
    if let Some(dispatch) = call {
        payload.insert("action".into(), dispatch.action.as_str().into());
        payload.insert("input".into(), opcode_stdlib::exec::shown_params(dispatch));
    }
    Value::Object(payload).to_string()
}

/// A runtime note.
pub fn note(at: &str, name: EventName, step_id: Option<String>, payload: &Value) -> NewEntry {
    NewEntry {
        at: at.to_owned(),
        kind: EntryKind::Note,
        event_type: name.as_str(),
        step_id,
        version: RECORD_VERSION,
        payload: payload.to_string(),
    }
}

/// Why a stored input cannot be replayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("entry {seq} ({event_type}) cannot be read: {reason}")]
pub struct DecodeError {
    /// The entry.
    pub seq: u64,
    /// Its type.
    pub event_type: String,
    /// Why.
    pub reason: String,
}

/// An input entry as `(milliseconds, event)`.
pub fn decode(entry: &LogEntry) -> Result<(u64, Event), DecodeError> {
    let fail = |reason: String| DecodeError {
        seq: entry.seq,
        event_type: entry.event_type.clone(),
        reason,
    };
    if entry.version != EVENT_VERSION {
        return Err(fail(format!(
            "event schema version {} is not one this build reads (it reads {EVENT_VERSION})",
            entry.version
        )));
    }
    let at = parse_ms(&entry.at).ok_or_else(|| fail(format!("bad time `{}`", entry.at)))?;
    let event = serde_json::from_str(&entry.payload).map_err(|e| fail(e.to_string()))?;
    Ok((at, event))
}

/// `ms` as the log's time text.
pub fn stamp(ms: u64) -> String {
    rfc3339(ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use opcode_vm::error::ActionError;
    use serde_json::json;

    #[test]
    fn inputs_round_trip() {
        let events = [
            Event::Signal {
                name: "go".into(),
                payload: json!({"n": 1}),
            },
            Event::ActionFinished {
                effect: 3,
                result: Err(ActionError::execution("boom")),
            },
            Event::Resume,
        ];
        for (i, event) in events.into_iter().enumerate() {
            let at = stamp(1_700_000_000_123 + i as u64);
            let stored = input(&at, &event, None).stored(i as u64 + 1);
            assert_eq!(decode(&stored), Ok((1_700_000_000_123 + i as u64, event)));
        }
    }

    #[test]
    fn a_steps_records_are_written_as_their_copies_would_be() {
        let definition =
            r#"{"steps": [{"id": "a", "action": "fs.stat", "params": {"path": "x"}}]}"#;
        let compiler = opcode_compiler::Compiler::new().with_actions(opcode_stdlib::catalog());
        let plan = Plan::new(compiler.compile(definition, "t.json").0.unwrap());
        let inst = opcode_vm::InstRef {
            step: 0,
            iters: Vec::new(),
        };
        let call = |secrets| Dispatch {
            effect: 1,
            inst: inst.clone(),
            attempt: 2,
            action: "http.get".into(),
            params: json!({"url": "https://x", "headers": {"auth": "Bearer "}, "n": [1.5, null]}),
            secrets,
            timeout_ms: None,
            scope: None,
            isolation: None,
            rate: None,
        };
        let site = opcode_vm::effect::SecretSite {
            path: vec![
                opcode_vm::program::PathSeg::Key("headers".into()),
                opcode_vm::program::PathSeg::Key("auth".into()),
            ],
            parts: vec![
                opcode_vm::effect::SecretPart::Text("Bearer ".into()),
                opcode_vm::effect::SecretPart::Secret("TOKEN".into()),
            ],
        };
        let (bare, secret) = (call(Vec::new()), call(vec![site]));
        let started = Record::StepStarted {
            inst: inst.clone(),
            attempt: 2,
        };
        let completed = |carried_from: Option<&str>| Record::StepCompleted {
            inst: inst.clone(),
            output: json!({"size": 3, "name": "x", "nested": {"b": [true], "a": "é\n"}}),
            carried_from: carried_from.map(str::to_owned),
        };
        let cases = [
            (started.clone(), None),
            (started.clone(), Some(&bare)),
            (started, Some(&secret)),
            (completed(None), None),
            (completed(Some("run-1")), None),
        ];
        for (record, call) in cases {
            let fast = record_payload(&record, &plan, call);
            assert_eq!(fast, payload_of(&record, &plan, call));
        }
        let shown = record_payload(
            &Record::StepStarted { inst, attempt: 2 },
            &plan,
            Some(&secret),
        );
        assert!(shown.contains("${{secrets.TOKEN}}"), "{shown}");
    }

    #[test]
    fn unknown_versions_are_refused() {
        let entry = LogEntry {
            seq: 4,
            at: stamp(0),
            kind: EntryKind::Input,
            event_type: "resume_requested".into(),
            step_id: None,
            version: EVENT_VERSION + 1,
            payload: "{\"type\":\"resume\"}".into(),
        };
        let err = decode(&entry).unwrap_err();
        assert!(err.reason.contains("schema version"), "{err}");
    }
}
