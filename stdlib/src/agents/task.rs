//! The task an agent is given: its role's rules, its budget, the files
//! and data the step includes, and the prompt (spec/agents.md).

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use opcode_vm::error::ActionError;
use serde_json::{Value, json};

use super::role::{MAX_STEPS, MIN_STEPS, MIN_TIMEOUT, Role, reserve_steps};
use crate::call::Call;

/// The most bytes of one included file, and of all of them.
const MAX_FILE: usize = 64 << 10;
const MAX_FILES: usize = 256 << 10;

/// Steps and time a call may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Model steps.
    pub max_steps: i64,
    /// Of which kept for the report.
    pub reserve: i64,
    /// Wall-clock time.
    pub timeout: Duration,
}

impl Budget {
    /// The budget of `call` (the role's defaults where it says nothing),
    /// refused when it cannot be met.
    pub fn of(call: &Call, role: Role) -> Result<Budget, ActionError> {
        let max_steps = match call.params.get("max_steps") {
            None | Some(Value::Null) => role.default_steps(),
            Some(v) => v.as_i64().ok_or_else(|| {
                ActionError::validation(format!("`max_steps` must be a whole number, not {v}"))
            })?,
        };
        if !(MIN_STEPS..=MAX_STEPS).contains(&max_steps) {
            return Err(ActionError::validation(format!(
                "`max_steps` must be between {MIN_STEPS} and {MAX_STEPS}, not {max_steps} \
                 (the last 20% of the steps, at least two, are for the report)"
            )));
        }
        let timeout = match call.str("timeout") {
            None => role.default_timeout(),
            Some(text) => crate::call::parse_duration(text).map_err(|e| {
                ActionError::validation(format!("`timeout` {text:?} is not a duration: {e}"))
            })?,
        };
        if timeout < MIN_TIMEOUT {
            return Err(ActionError::validation(format!(
                "`timeout` must be at least {}s, not {}ms",
                MIN_TIMEOUT.as_secs(),
                timeout.as_millis()
            )));
        }
        Ok(Budget {
            max_steps,
            reserve: reserve_steps(max_steps),
            timeout,
        })
    }

    /// When the agent is told to wrap up: 80% of its time.
    pub fn wrap_up_at(&self) -> Duration {
        self.timeout.mul_f64(0.8)
    }
}

/// What the agent is given.
#[derive(Debug, Clone)]
pub struct Task {
    /// The whole prompt: rules, budget, files, context, task.
    pub prompt: String,
    /// The plain protocol's task line.
    pub json: Value,
}

/// The task of `call` for `role` in `workspace`.
pub fn build(
    call: &Call,
    role: Role,
    budget: &Budget,
    workspace: &Path,
    scratch: Option<&Path>,
    history: &str,
) -> Result<Task, ActionError> {
    let prompt = call.required("prompt")?;
    let files = included_files(call, workspace)?;
    let context = call.params.get("context").filter(|v| !v.is_null());
    let skills: Vec<&str> = call
        .params
        .get("skills")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|s| s.get("name")?.as_str())
                .collect()
        })
        .unwrap_or_default();
    let mut text = format!(
        "=== RULES ===\n{}\n\n=== BUDGET ===\nYou have at most {} steps and {} seconds. Keep \
         the last {} steps, and the last 20% of the time, for your final report; stop working \
         when you are told to wrap up.\n",
        role.rules(),
        budget.max_steps,
        budget.timeout.as_secs(),
        budget.reserve,
    );
    for (path, content) in &files {
        let _ = write!(text, "\n=== FILE {path} ===\n{content}\n");
    }
    if let Some(context) = context {
        let shown = serde_json::to_string_pretty(context).unwrap_or_default();
        let _ = write!(text, "\n=== CONTEXT ===\n{shown}\n");
    }
    if !history.is_empty() {
        let _ = write!(text, "\n{}", history.trim_end());
        text.push('\n');
    }
    let _ = write!(text, "\n=== TASK ===\n{prompt}\n");
    let json = json!({
        "protocol": "opcode-agent/1",
        "role": role.name(),
        "prompt": text,
        "task": prompt,
        "model": call.params.get("model"),
        "variant": call.params.get("variant"),
        "max_steps": budget.max_steps,
        "reserve_steps": budget.reserve,
        "timeout_ms": budget.timeout.as_millis() as u64,
        "workspace": workspace.to_string_lossy(),
        "scratch": scratch.map(|s| s.to_string_lossy().into_owned()),
        "files": files.iter().map(|(path, text)| json!({"path": path, "text": text})).collect::<Vec<_>>(),
        "context": context,
        "skills": skills,
        "mcp": call.params.get("mcp"),
    });
    Ok(Task { prompt: text, json })
}

/// The `files` of `call`, read from inside `workspace`.
fn included_files(call: &Call, workspace: &Path) -> Result<Vec<(String, String)>, ActionError> {
    let Some(list) = call.params.get("files").and_then(Value::as_array) else {
        return Ok(Vec::new());
    };
    let root = std::fs::canonicalize(workspace).map_err(|e| {
        ActionError::validation(format!(
            "the workspace {} cannot be read: {e}",
            workspace.display()
        ))
    })?;
    let mut total = 0;
    let mut files = Vec::new();
    for entry in list {
        let Some(name) = entry.as_str() else {
            return Err(ActionError::validation(format!(
                "`files` lists paths, not {entry}"
            )));
        };
        let denied = || {
            ActionError::new(
                opcode_vm::codes::R0126,
                "PATH_DENIED",
                format!(
                    "`files`: {name} is not a file in the workspace {}",
                    workspace.display()
                ),
                false,
            )
        };
        let path = std::fs::canonicalize(root.join(name)).map_err(|_| denied())?;
        if !path.starts_with(&root) || !path.is_file() {
            return Err(denied());
        }
        let bytes = std::fs::read(&path).map_err(|_| denied())?;
        let mut text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_FILE)]).into_owned();
        if bytes.len() > MAX_FILE {
            let _ = write!(text, "\n[… cut: {} more bytes]", bytes.len() - MAX_FILE);
        }
        total += text.len();
        if total > MAX_FILES {
            return Err(ActionError::validation(format!(
                "`files` hold more than {} KiB of text; include fewer, or let the agent read them",
                MAX_FILES >> 10
            )));
        }
        files.push((name.to_owned(), text));
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(params: Value) -> Call {
        Call {
            action: "agent.worker".into(),
            params,
            ..Call::default()
        }
    }

    #[test]
    fn budgets_are_checked_and_files_stay_in_the_workspace() {
        let budget = Budget::of(&call(json!({"prompt": "x"})), Role::Worker).unwrap();
        assert_eq!((budget.max_steps, budget.reserve), (32, 6));
        assert_eq!(budget.timeout, Duration::from_mins(10));
        assert!(Budget::of(&call(json!({"max_steps": 3})), Role::Scout).is_err());
        assert!(Budget::of(&call(json!({"timeout": "2s"})), Role::Scout).is_err());
        assert_eq!(reserve_steps(4), 2);

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.md"), "remember").unwrap();
        let task = build(
            &call(json!({"prompt": "do it", "files": ["notes.md"], "context": {"n": 1}})),
            Role::Worker,
            &budget,
            dir.path(),
            None,
            "",
        )
        .unwrap();
        assert!(task.prompt.contains("=== FILE notes.md ===\nremember"));
        assert!(task.prompt.ends_with("=== TASK ===\ndo it\n"));
        assert_eq!(task.json["files"][0]["text"], "remember");
        let outside = build(
            &call(json!({"prompt": "x", "files": ["../../etc/passwd"]})),
            Role::Worker,
            &budget,
            dir.path(),
            None,
            "",
        )
        .unwrap_err();
        assert_eq!(outside.code, "R0126");
    }
}
