//! A delegated agent's live events (`agent.*`, published while its step
//! runs; spec/agents.md) as AG-UI events: its words as text messages, its
//! tool calls as tool calls, its plan, metrics and summary as a state
//! delta under `/agents/<step>`. Pure, so it is tested without a server.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::map::pointer_token;

/// The agent events of one AG-UI run.
#[derive(Debug, Default)]
pub struct AgentStream {
    /// Messages and tool calls numbered so far.
    next: u64,
    /// Tool calls announced, by the step and the agent's call id.
    started: BTreeSet<(String, String)>,
    /// Each step's agent state: `todos`, `metrics`, `summary`.
    state: BTreeMap<String, Map<String, Value>>,
}

impl AgentStream {
    /// The AG-UI events of one `agent.*` event of `step`; none for another
    /// kind of event.
    pub fn event(&mut self, step: &str, kind: &str, payload: &Value) -> Vec<Value> {
        match kind {
            "agent.text" => {
                let id = self.id(step, "text");
                let text = payload["text"].as_str().unwrap_or_default();
                vec![
                    json!({"type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant"}),
                    json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": text}),
                    json!({"type": "TEXT_MESSAGE_END", "messageId": id}),
                ]
            }
            "agent.tool_start" => self.tool_start(step, payload),
            "agent.tool_finish" => {
                let mut events = self.tool_start(step, payload);
                let call = call_id(step, payload);
                let output = payload["output"].as_str().unwrap_or_default();
                events.push(
                    json!({"type": "TOOL_CALL_RESULT", "messageId": self.id(step, "result"),
                                   "toolCallId": call, "content": output, "role": "tool"}),
                );
                events
            }
            "agent.plan" => self.delta(step, "todos", payload["todos"].clone()),
            "agent.step" => self.delta(step, "metrics", payload.clone()),
            "agent.summary" => self.delta(step, "summary", payload["summary"].clone()),
            "agent.permission" => self.delta(step, "permission", payload.clone()),
            _ => Vec::new(),
        }
    }

    /// `TOOL_CALL_START`, its arguments and `TOOL_CALL_END`, once per call.
    fn tool_start(&mut self, step: &str, payload: &Value) -> Vec<Value> {
        let call = call_id(step, payload);
        if !self.started.insert((step.to_owned(), call.clone())) {
            return Vec::new();
        }
        let name = payload["tool"]
            .as_str()
            .filter(|t| !t.is_empty())
            .unwrap_or("tool");
        vec![
            json!({"type": "TOOL_CALL_START", "toolCallId": call, "toolCallName": name}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": payload["input"].to_string()}),
            json!({"type": "TOOL_CALL_END", "toolCallId": call}),
        ]
    }

    /// A `STATE_DELTA` setting the step's object under `/agents`, `key`
    /// changed (beside `/steps`, which the step's own deltas replace).
    fn delta(&mut self, step: &str, key: &str, value: Value) -> Vec<Value> {
        let state = self.state.entry(step.to_owned()).or_default();
        state.insert(key.to_owned(), value);
        let path = format!("/agents/{}", pointer_token(step));
        vec![json!({"type": "STATE_DELTA", "delta": [
            {"op": "add", "path": path, "value": Value::Object(state.clone())},
        ]})]
    }

    fn id(&mut self, step: &str, what: &str) -> String {
        self.next += 1;
        format!("{step}.agent.{what}.{}", self.next)
    }
}

/// The AG-UI id of the agent's tool call in `payload`.
fn call_id(step: &str, payload: &Value) -> String {
    let theirs = payload["id"].as_str().unwrap_or_default();
    format!("{step}.agent.tool.{theirs}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_tools_and_plans_become_messages_calls_and_state() {
        let mut stream = AgentStream::default();
        let text = stream.event("fix", "agent.text", &json!({"text": "looking"}));
        let types: Vec<&str> = text.iter().filter_map(|e| e["type"].as_str()).collect();
        assert_eq!(
            types,
            [
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END"
            ]
        );
        let start = stream.event(
            "fix",
            "agent.tool_start",
            &json!({"id": "1", "tool": "bash", "input": {"command": "ls"}}),
        );
        assert_eq!(start[1]["delta"], r#"{"command":"ls"}"#);
        let finish = stream.event(
            "fix",
            "agent.tool_finish",
            &json!({"id": "1", "tool": "bash", "output": "a\nb"}),
        );
        assert_eq!(
            finish.len(),
            1,
            "the call was announced already: {finish:?}"
        );
        assert_eq!(
            (finish[0]["type"].as_str(), finish[0]["toolCallId"].as_str()),
            (Some("TOOL_CALL_RESULT"), Some("fix.agent.tool.1"))
        );
        // OpenCode says a call only once it ended: announced then.
        let late = stream.event(
            "fix",
            "agent.tool_finish",
            &json!({"id": "2", "tool": "read", "output": "x"}),
        );
        assert_eq!(late.len(), 4);
        stream.event("fix", "agent.plan", &json!({"todos": ["a"]}));
        let metrics = stream.event("fix", "agent.step", &json!({"steps": 2}));
        assert_eq!(metrics[0]["delta"][0]["path"], "/agents/fix");
        assert_eq!(
            metrics[0]["delta"][0]["value"],
            json!({"todos": ["a"], "metrics": {"steps": 2}})
        );
        assert!(stream.event("fix", "workflow.emit", &json!({})).is_empty());
    }
}
