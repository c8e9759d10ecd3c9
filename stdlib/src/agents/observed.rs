//! What a call observed of its agent, and the concise result built from it.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::protocol::Event;

/// The most error lines a result carries, and the longest.
const MAX_ERRORS: usize = 40;
const MAX_ERROR_CHARS: usize = 300;
/// The most commands a result lists.
const MAX_COMMANDS: usize = 200;

/// Everything the events told.
#[derive(Debug, Default)]
pub struct Observed {
    /// Model steps ended.
    pub steps: i64,
    /// The text of the current (last) step.
    step_text: Vec<String>,
    /// The last step's text that had any.
    last_text: Vec<String>,
    /// Tool calls started and not finished: id → (tool, input).
    open_tools: BTreeMap<String, (String, Value)>,
    /// Commands run: command, exit code.
    commands: Vec<(String, Option<i64>)>,
    /// Tools called, by name: how many times.
    tools: BTreeMap<String, i64>,
    /// Lines of failed tool output that read as errors.
    output_errors: Vec<String>,
    /// The agent's error events.
    errors: Vec<String>,
    /// Tokens summed by kind.
    tokens: Map<String, Value>,
    /// Cost summed.
    cost: Option<f64>,
    /// Permission requests and their answers.
    pub permissions: Vec<Value>,
    /// Its report event.
    report: Option<Value>,
    /// The last JSON object it wrote.
    last_object: Option<Value>,
    /// Its compacted summary.
    compacted: Option<String>,
}

impl Observed {
    /// Takes one event in.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::Text(text) if !text.trim().is_empty() => self.step_text.push(text.clone()),
            Event::StepStart => self.close_step(),
            Event::Step { tokens, cost } => {
                self.steps += 1;
                self.close_step();
                if let Some(Value::Object(tokens)) = tokens {
                    add_tokens(&mut self.tokens, tokens);
                }
                if let Some(cost) = cost {
                    self.cost = Some(self.cost.unwrap_or(0.0) + cost);
                }
            }
            Event::ToolStart { id, tool, input } => {
                self.open_tools
                    .insert(id.clone(), (tool.clone(), input.clone()));
            }
            Event::ToolFinish {
                id,
                tool,
                input,
                output,
                exit_code,
                is_error,
            } => {
                let (started_tool, started_input) = self.open_tools.remove(id).unwrap_or_default();
                let tool = if tool.is_empty() { &started_tool } else { tool };
                let input = if input.is_null() {
                    &started_input
                } else {
                    input
                };
                if !tool.is_empty() {
                    *self.tools.entry(tool.clone()).or_default() += 1;
                }
                if let Some(command) = command_of(tool, input)
                    && self.commands.len() < MAX_COMMANDS
                {
                    self.commands.push((command, *exit_code));
                }
                if *is_error {
                    self.output_errors.extend(error_lines(output));
                }
            }
            Event::Error(message) => self.errors.push(cut(message)),
            Event::Compacted(summary) => self.compacted = Some(summary.clone()),
            Event::Report(report) => self.report = Some(report.clone()),
            Event::Other(object) => self.last_object = Some(object.clone()),
            _ => {}
        }
    }

    /// The summary the agent compacted its session into, if it did.
    pub fn compacted(&self) -> Option<&str> {
        self.compacted.as_deref()
    }

    /// Did the agent write anything the protocol reads?
    pub fn any(&self) -> bool {
        self.steps > 0
            || !self.step_text.is_empty()
            || !self.last_text.is_empty()
            || !self.commands.is_empty()
            || !self.errors.is_empty()
            || self.report.is_some()
            || self.last_object.is_some()
    }

    fn close_step(&mut self) {
        if !self.step_text.is_empty() {
            self.last_text = std::mem::take(&mut self.step_text);
        }
    }

    /// The agent's own report: its report event, else its last JSON
    /// object read through `pointers`.
    pub fn report(&self, pointers: &BTreeMap<String, String>) -> Option<Value> {
        if let Some(report) = &self.report {
            return Some(report.clone());
        }
        let object = self.last_object.as_ref()?;
        if pointers.is_empty() {
            return object.get("summary").is_some().then(|| object.clone());
        }
        let mut mapped = Map::new();
        for (field, pointer) in pointers {
            if let Some(value) = object.pointer(pointer) {
                mapped.insert(field.clone(), value.clone());
            }
        }
        (!mapped.is_empty()).then_some(Value::Object(mapped))
    }

    /// The result's fields that come from the events (and the report).
    pub fn fields(&mut self, report: Option<&Value>, runner: bool) -> Map<String, Value> {
        self.close_step();
        let field = |key: &str| report.and_then(|r| r.get(key)).filter(|v| !v.is_null());
        let summary = field("summary")
            .map(|s| s.as_str().map_or_else(|| s.to_string(), str::to_owned))
            .or_else(|| (!self.last_text.is_empty()).then(|| self.last_text.join("\n")))
            .or_else(|| self.compacted.clone())
            .unwrap_or_default();
        let commands = field("commands").cloned().unwrap_or_else(|| {
            Value::Array(
                self.commands
                    .iter()
                    .map(|(command, code)| json!({"command": command, "exit_code": code}))
                    .collect(),
            )
        });
        let mut errors: Vec<String> = Vec::new();
        if let Some(Value::Array(theirs)) = field("errors") {
            errors.extend(
                theirs
                    .iter()
                    .map(|e| cut(e.as_str().unwrap_or(&e.to_string()))),
            );
        }
        errors.extend(self.errors.iter().cloned());
        if runner || errors.is_empty() {
            errors.extend(self.output_errors.iter().cloned());
        }
        let mut seen = std::collections::HashSet::new();
        errors.retain(|e| seen.insert(e.clone()));
        errors.truncate(MAX_ERRORS);
        let tokens = field("tokens")
            .cloned()
            .or_else(|| (!self.tokens.is_empty()).then(|| Value::Object(self.tokens.clone())));
        let cost = field("cost")
            .cloned()
            .or_else(|| self.cost.map(|c| json!(c)));
        let steps = field("steps")
            .and_then(Value::as_i64)
            .unwrap_or(self.steps)
            .max(self.steps);
        let mut out = Map::new();
        out.insert("summary".into(), Value::String(summary));
        out.insert("commands".into(), commands);
        out.insert("tools".into(), json!(self.tools));
        out.insert("errors".into(), json!(errors));
        out.insert("permissions".into(), Value::Array(self.permissions.clone()));
        out.insert("steps".into(), json!(steps));
        if let Some(tokens) = tokens {
            out.insert("tokens".into(), tokens);
        }
        if let Some(cost) = cost {
            out.insert("cost".into(), cost);
        }
        if let Some(files) = field("files_changed") {
            out.insert("reported_files".into(), files.clone());
        }
        out
    }
}

/// The command a shell tool ran.
fn command_of(tool: &str, input: &Value) -> Option<String> {
    let shell = matches!(
        tool.to_ascii_lowercase().as_str(),
        "bash" | "shell" | "sh" | "exec" | "command" | "run" | "terminal"
    );
    let command = input
        .get("command")
        .or_else(|| input.get("cmd"))
        .map(|c| match c {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned))
                .collect::<Vec<_>>()
                .join(" "),
            other => other.to_string(),
        });
    if shell || command.is_some() {
        command.map(|c| cut(&c))
    } else {
        None
    }
}

fn add_tokens(sum: &mut Map<String, Value>, tokens: &Map<String, Value>) {
    for (kind, count) in tokens {
        match count {
            Value::Number(n) => {
                let before = sum.get(kind).and_then(Value::as_i64).unwrap_or(0);
                sum.insert(kind.clone(), json!(before + n.as_i64().unwrap_or(0)));
            }
            Value::Object(inner) => {
                let mut nested = match sum.remove(kind) {
                    Some(Value::Object(m)) => m,
                    _ => Map::new(),
                };
                add_tokens(&mut nested, inner);
                sum.insert(kind.clone(), Value::Object(nested));
            }
            _ => {}
        }
    }
}

/// The lines of command output that read as errors.
fn error_lines(output: &str) -> Vec<String> {
    const MARKS: [&str; 10] = [
        "error",
        "failed",
        "failure",
        "panicked",
        "traceback",
        "exception",
        "fatal",
        "fail ",
        "npm err!",
        "assert",
    ];
    output
        .lines()
        .map(str::trim)
        .filter(|line| {
            let lower = line.to_ascii_lowercase();
            !line.is_empty()
                && (MARKS.iter().any(|m| lower.contains(m)) || line.starts_with("FAIL"))
        })
        .map(cut)
        .take(MAX_ERRORS)
        .collect()
}

fn cut(text: &str) -> String {
    if text.chars().count() <= MAX_ERROR_CHARS {
        return text.to_owned();
    }
    let mut kept: String = text.chars().take(MAX_ERROR_CHARS - 1).collect();
    kept.push('…');
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_commands_errors_and_tokens() {
        let mut seen = Observed::default();
        for event in [
            Event::Text("looking".into()),
            Event::Step {
                tokens: Some(json!({"input": 10, "cache": {"read": 2}})),
                cost: Some(0.5),
            },
            Event::ToolStart {
                id: "1".into(),
                tool: "bash".into(),
                input: json!({"command": "cargo test"}),
            },
            Event::ToolFinish {
                id: "1".into(),
                tool: String::new(),
                input: Value::Null,
                output: "running 3 tests\ntest a ... FAILED\nok".into(),
                exit_code: Some(101),
                is_error: true,
            },
            Event::Text("One test fails.".into()),
            Event::Step {
                tokens: Some(json!({"input": 5, "cache": {"read": 1}})),
                cost: Some(0.25),
            },
        ] {
            seen.apply(&event);
        }
        let fields = seen.fields(None, true);
        assert_eq!(fields["summary"], "One test fails.");
        assert_eq!(
            fields["commands"],
            json!([{"command": "cargo test", "exit_code": 101}])
        );
        assert_eq!(fields["errors"], json!(["test a ... FAILED"]));
        assert_eq!(fields["tokens"], json!({"input": 15, "cache": {"read": 3}}));
        assert_eq!(
            (fields["cost"].as_f64(), fields["steps"].as_i64()),
            (Some(0.75), Some(2))
        );
    }

    #[test]
    fn a_report_read_through_pointers() {
        let mut seen = Observed::default();
        seen.apply(&Event::Other(
            json!({"type": "result", "result": "All good", "num_turns": 3}),
        ));
        let pointers = BTreeMap::from([
            ("summary".to_owned(), "/result".to_owned()),
            ("steps".to_owned(), "/num_turns".to_owned()),
        ]);
        let report = seen.report(&pointers);
        let fields = seen.fields(report.as_ref(), false);
        assert_eq!(
            (fields["summary"].as_str(), fields["steps"].as_i64()),
            (Some("All good"), Some(3))
        );
    }
}
