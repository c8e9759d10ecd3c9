//! Reading an agent's output lines as events, for each protocol
//! (spec/agents.md, "The plain protocol", "The OpenCode protocol").

use serde_json::Value;

use super::entry::Protocol;

/// One thing an agent reported.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Its words.
    Text(String),
    /// A tool call began.
    ToolStart {
        /// The call's id.
        id: String,
        /// The tool.
        tool: String,
        /// Its input.
        input: Value,
    },
    /// A tool call ended.
    ToolFinish {
        /// The call's id.
        id: String,
        /// The tool (empty when only the start named it).
        tool: String,
        /// Its input, where the end repeats it.
        input: Value,
        /// What it printed.
        output: String,
        /// A command's exit code.
        exit_code: Option<i64>,
        /// Did it fail?
        is_error: bool,
    },
    /// A model step began (OpenCode says so).
    StepStart,
    /// A model step ended.
    Step {
        /// Its tokens, by kind.
        tokens: Option<Value>,
        /// Its cost.
        cost: Option<f64>,
    },
    /// Its plan.
    Plan(Value),
    /// It asks for permission.
    Permission {
        /// The request's id.
        id: String,
        /// What it wants to do.
        action: String,
        /// Details.
        detail: Value,
    },
    /// Something went wrong.
    Error(String),
    /// Its compacted summary.
    Compacted(String),
    /// Its final report.
    Report(Value),
    /// The end.
    Done,
    /// A JSON object the protocol does not know (kept as a report candidate).
    Other(Value),
}

/// The event of one output line; `None` when the line is not a JSON object.
pub fn parse(protocol: Protocol, line: &str) -> Option<Event> {
    let value: Value = serde_json::from_str(line.trim()).ok()?;
    if !value.is_object() {
        return None;
    }
    let kind = value
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Some(match protocol {
        Protocol::Plain => plain(kind, value.clone()),
        Protocol::Opencode => opencode(kind, &value),
    })
    .map(|event| event.unwrap_or(Event::Other(value)))
}

fn text(value: &Value, key: &str) -> String {
    match value.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn plain(kind: &str, value: Value) -> Option<Event> {
    let exit = value.get("exit_code").and_then(Value::as_i64);
    Some(match kind {
        "text" => Event::Text(text(&value, "text")),
        "tool_start" => Event::ToolStart {
            id: text(&value, "id"),
            tool: text(&value, "tool"),
            input: value.get("input").cloned().unwrap_or(Value::Null),
        },
        "tool_finish" => Event::ToolFinish {
            id: text(&value, "id"),
            tool: text(&value, "tool"),
            input: value.get("input").cloned().unwrap_or(Value::Null),
            output: text(&value, "output"),
            exit_code: exit,
            is_error: value
                .get("is_error")
                .and_then(Value::as_bool)
                .unwrap_or(false)
                || exit.is_some_and(|c| c != 0),
        },
        "step" => Event::Step {
            tokens: value.get("tokens").cloned(),
            cost: value.get("cost").and_then(Value::as_f64),
        },
        "plan" => Event::Plan(value.get("todos").cloned().unwrap_or(Value::Null)),
        "permission_request" => Event::Permission {
            id: text(&value, "id"),
            action: text(&value, "action"),
            detail: value.get("detail").cloned().unwrap_or(Value::Null),
        },
        "error" => Event::Error(text(&value, "message")),
        "report" => Event::Report(value),
        _ => return None,
    })
}

fn opencode(kind: &str, value: &Value) -> Option<Event> {
    let part = value.get("part").unwrap_or(&Value::Null);
    let props = value.get("properties").unwrap_or(&Value::Null);
    Some(match kind {
        "text" | "token" => Event::Text(text(part, "text")),
        "step_start" => Event::StepStart,
        "step_finish" => Event::Step {
            tokens: part.get("tokens").cloned(),
            cost: part.get("cost").and_then(Value::as_f64),
        },
        "tool_use" | "tool_finish" => {
            let state = part.get("state").unwrap_or(&Value::Null);
            let metadata = state.get("metadata").unwrap_or(&Value::Null);
            let exit_code = ["exit", "exitCode", "exit_code"]
                .iter()
                .find_map(|k| metadata.get(*k).and_then(Value::as_i64));
            let status = text(state, "status");
            if status == "running" || status == "pending" {
                return Some(Event::ToolStart {
                    id: text(part, "callID"),
                    tool: text(part, "tool"),
                    input: state.get("input").cloned().unwrap_or(Value::Null),
                });
            }
            let output = match state.get("output") {
                Some(Value::String(s)) => s.clone(),
                None | Some(Value::Null) => text(state, "error"),
                Some(other) => other.to_string(),
            };
            Event::ToolFinish {
                id: text(part, "callID"),
                tool: text(part, "tool"),
                input: state.get("input").cloned().unwrap_or(Value::Null),
                output,
                exit_code,
                is_error: status == "error" || exit_code.is_some_and(|c| c != 0),
            }
        }
        "tool_start" => Event::ToolStart {
            id: text(part, "callID"),
            tool: text(part, "tool"),
            input: part.pointer("/state/input").cloned().unwrap_or(Value::Null),
        },
        "error" | "session.error" => {
            let error = value
                .get("error")
                .or_else(|| props.get("error"))
                .unwrap_or(part);
            let message = error
                .pointer("/data/message")
                .or_else(|| error.get("message"))
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_owned);
            Event::Error(message)
        }
        "permission_request" | "permission" | "permission.updated" => {
            let request = if props.is_object() { props } else { value };
            let id = ["id", "permissionID", "interactionId"]
                .iter()
                .map(|k| text(request, k))
                .find(|s| !s.is_empty())
                .unwrap_or_default();
            let action = ["title", "pattern", "type", "permission"]
                .iter()
                .map(|k| text(request, k))
                .find(|s| !s.is_empty())
                .unwrap_or_default();
            Event::Permission {
                id,
                action,
                detail: request.clone(),
            }
        }
        "plan_update" | "todo.updated" => Event::Plan(
            value
                .get("todos")
                .or_else(|| props.get("todos"))
                .cloned()
                .unwrap_or(Value::Null),
        ),
        "session_compacted" | "session.compacted" => Event::Compacted(text(value, "summary")),
        "done" => Event::Done,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn opencode_events_read_as_the_run_command_writes_them() {
        let tool = json!({"type": "tool_use", "timestamp": 1, "sessionID": "ses_1", "part": {
            "tool": "bash", "callID": "c1", "state": {"status": "completed",
            "input": {"command": "cargo test"}, "output": "error[E0308]: mismatched types",
            "metadata": {"exit": 101}}}});
        let Some(Event::ToolFinish {
            exit_code,
            is_error,
            input,
            ..
        }) = parse(Protocol::Opencode, &tool.to_string())
        else {
            panic!("not a tool call");
        };
        assert_eq!((exit_code, is_error), (Some(101), true));
        assert_eq!(input["command"], "cargo test");
        let step = json!({"type": "step_finish", "part": {"cost": 0.01, "tokens": {"input": 5}}});
        assert_eq!(
            parse(Protocol::Opencode, &step.to_string()),
            Some(Event::Step {
                tokens: Some(json!({"input": 5})),
                cost: Some(0.01)
            })
        );
        let error = json!({"type": "error", "error": {"name": "APIError", "data": {"message": "rate limited"}}});
        assert_eq!(
            parse(Protocol::Opencode, &error.to_string()),
            Some(Event::Error("rate limited".into()))
        );
        assert_eq!(parse(Protocol::Opencode, "building..."), None);
        assert!(matches!(
            parse(Protocol::Opencode, r#"{"type": "mystery"}"#),
            Some(Event::Other(_))
        ));
    }

    #[test]
    fn plain_events_and_a_bare_object() {
        let finish = r#"{"type": "tool_finish", "id": "1", "tool": "bash", "exit_code": 2}"#;
        assert!(matches!(
            parse(Protocol::Plain, finish),
            Some(Event::ToolFinish {
                is_error: true,
                exit_code: Some(2),
                ..
            })
        ));
        let ask = r#"{"type": "permission_request", "id": "p1", "action": "rm -rf build"}"#;
        assert!(matches!(
            parse(Protocol::Plain, ask),
            Some(Event::Permission { .. })
        ));
        let bare = r#"{"result": "done", "total_cost_usd": 0.2}"#;
        assert!(matches!(
            parse(Protocol::Plain, bare),
            Some(Event::Other(_))
        ));
        assert_eq!(parse(Protocol::Plain, "[1, 2]"), None);
    }
}
