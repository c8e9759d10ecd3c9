//! One `agents` settings entry: the command line, its protocol, and how
//! its report is read.

use std::collections::BTreeMap;

use serde::Deserialize;

/// How the agent's events are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// `opencode run --format json`.
    Opencode,
    /// A JSON task on stdin, JSON lines on stdout.
    Plain,
}

/// What the agent's standard input gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stdin {
    /// The task as one JSON line; the channel stays open for control lines
    /// (plain protocol's default).
    Task,
    /// The prompt as text, then end of input (plain protocol).
    Prompt,
    /// Only control lines (OpenCode behind a bridge that reads them).
    Control,
    /// Nothing: end of input at once (OpenCode's default: `opencode run`
    /// reads a piped stdin as more of the message).
    None,
}

/// One argument of the command line: text, or a group kept only when all
/// its placeholders have values.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Arg {
    /// Always passed (placeholders replaced, an absent value as nothing).
    One(String),
    /// Passed when every placeholder in it has a value.
    Group(Vec<String>),
}

/// An agent the settings name.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The program and its arguments.
    pub command: Vec<Arg>,
    /// How its events are read.
    pub protocol: Protocol,
    /// What it reads on stdin (default by protocol: see [`Entry::stdin`]).
    #[serde(default)]
    pub stdin: Option<Stdin>,
    /// JSON pointers into its final object for the report's fields.
    #[serde(default)]
    pub report: BTreeMap<String, String>,
    /// Environment variables of every call.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The host network for its calls.
    #[serde(default)]
    pub network: bool,
    /// The entry a step that names none gets.
    #[serde(default)]
    pub default: bool,
}

/// The placeholders a command line may hold.
pub const PLACEHOLDERS: [&str; 7] = [
    "prompt",
    "model",
    "variant",
    "max_steps",
    "timeout_s",
    "role",
    "workspace",
];

/// The report fields a `report` pointer may fill.
const REPORT_FIELDS: [&str; 7] = [
    "summary",
    "cost",
    "steps",
    "tokens",
    "files_changed",
    "commands",
    "errors",
];

impl Entry {
    /// Refuses an entry that cannot work.
    pub fn check(&self) -> Result<(), String> {
        match self.command.first() {
            Some(Arg::One(program)) if !program.trim().is_empty() && !program.contains('{') => {}
            _ => return Err("`command` must start with the program, as text".into()),
        }
        for arg in &self.command {
            let parts = match arg {
                Arg::One(text) => std::slice::from_ref(text),
                Arg::Group(parts) => parts.as_slice(),
            };
            for name in parts.iter().flat_map(|p| placeholders(p)) {
                if !PLACEHOLDERS.contains(&name) {
                    return Err(format!(
                        "`{{{name}}}` in `command` is not a placeholder; use one of {}",
                        PLACEHOLDERS.map(|p| format!("{{{p}}}")).join(", ")
                    ));
                }
            }
        }
        for (field, pointer) in &self.report {
            if !REPORT_FIELDS.contains(&field.as_str()) {
                return Err(format!(
                    "`report.{field}` is not a report field; use one of {}",
                    REPORT_FIELDS.join(", ")
                ));
            }
            if !pointer.is_empty() && !pointer.starts_with('/') {
                return Err(format!(
                    "`report.{field}` must be a JSON pointer such as \"/result\", not {pointer:?}"
                ));
            }
        }
        let fits = match self.protocol {
            Protocol::Plain => matches!(self.stdin(), Stdin::Task | Stdin::Prompt),
            Protocol::Opencode => matches!(self.stdin(), Stdin::Control | Stdin::None),
        };
        if !fits {
            return Err(
                "`stdin` is `task` or `prompt` for the plain protocol, `control` or `none` for \
                 OpenCode's"
                    .into(),
            );
        }
        if self.protocol == Protocol::Opencode && !self.report.is_empty() {
            return Err("`report` belongs to the plain protocol".into());
        }
        Ok(())
    }

    /// What its standard input gets.
    pub fn stdin(&self) -> Stdin {
        self.stdin.unwrap_or(match self.protocol {
            Protocol::Plain => Stdin::Task,
            Protocol::Opencode => Stdin::None,
        })
    }

    /// The command line with `values` in place of the placeholders.
    pub fn argv(&self, values: &BTreeMap<&str, String>) -> Vec<String> {
        let mut argv = Vec::new();
        for arg in &self.command {
            match arg {
                Arg::One(text) => argv.push(fill(text, values)),
                Arg::Group(parts) => {
                    let complete = parts
                        .iter()
                        .flat_map(|p| placeholders(p))
                        .all(|name| values.contains_key(name));
                    if complete {
                        argv.extend(parts.iter().map(|p| fill(p, values)));
                    }
                }
            }
        }
        argv
    }
}

/// The placeholder names in `text` (`{name}`).
fn placeholders(text: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        names.push(&after[..close]);
        rest = &after[close + 1..];
    }
    names
}

/// `text` with each placeholder replaced (an absent value by nothing).
fn fill(text: &str, values: &BTreeMap<&str, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        out.push_str(&rest[..open]);
        if let Some(value) = values.get(&after[..close]) {
            out.push_str(value);
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(value: serde_json::Value) -> Entry {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn groups_go_away_with_their_values() {
        let e = entry(json!({"protocol": "opencode", "command":
            ["opencode", "run", ["--model", "{model}"], ["--variant", "{variant}"], "{prompt}"]}));
        e.check().unwrap();
        let mut values = BTreeMap::from([("prompt", "do it".to_owned())]);
        assert_eq!(e.argv(&values), ["opencode", "run", "do it"]);
        values.insert("model", "m/x".into());
        assert_eq!(
            e.argv(&values),
            ["opencode", "run", "--model", "m/x", "do it"]
        );
    }

    #[test]
    fn bad_entries_say_what_to_write() {
        let unknown = entry(json!({"protocol": "plain", "command": ["a", "{promt}"]}));
        assert!(unknown.check().unwrap_err().contains("{prompt}"));
        let templated = entry(json!({"protocol": "plain", "command": ["{prompt}"]}));
        assert!(templated.check().is_err());
        let pointer =
            entry(json!({"protocol": "plain", "command": ["a"], "report": {"summary": "result"}}));
        assert!(pointer.check().unwrap_err().contains("JSON pointer"));
        let field =
            entry(json!({"protocol": "plain", "command": ["a"], "report": {"sumary": "/r"}}));
        assert!(field.check().unwrap_err().contains("sumary"));
        let mixed = entry(json!({"protocol": "opencode", "command": ["a"], "stdin": "prompt"}));
        assert!(mixed.check().is_err());
    }
}
