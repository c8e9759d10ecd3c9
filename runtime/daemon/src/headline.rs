//! A tool result in one line: the text content beside `structuredContent`
//! for clients of the 2026-07-28 revision, which read the structure (the
//! JSON is not sent twice).

use std::fmt::Write as _;

use serde_json::Value;

/// The longest headline, in characters.
const MAX_CHARS: usize = 200;

/// `value` (a tool's result) in at most 200 characters.
pub fn headline(value: &Value) -> String {
    let line = if value.get("workflow_id").is_some() && value.get("status").is_some() {
        run(value)
    } else if let (Some(name), Some(version)) = (value.get("name"), value.get("version")) {
        format!("defined {} {}", plain(name), plain(version))
    } else if let (Some(count), Some(total)) = (value.get("count"), value.get("total")) {
        format!("{count} of {total} rows; more: {}", value["has_more"])
    } else {
        value.to_string()
    };
    cut(line)
}

/// A run view: status, steps, what it waits for, output or error.
fn run(value: &Value) -> String {
    let mut line = plain(&value["status"]);
    if let Some(counts) = value.get("step_counts").and_then(Value::as_object) {
        let counts: Vec<String> = counts
            .iter()
            .map(|(status, n)| format!("{n} {status}"))
            .collect();
        if !counts.is_empty() {
            let _ = write!(line, ": steps {}", counts.join(", "));
        }
    }
    if let Some(decisions) = value.get("pending_decisions").and_then(Value::as_array) {
        for d in decisions {
            let _ = write!(
                line,
                "; decision {} asks {}",
                plain(&d["step_id"]),
                d["context"]["prompt"]
            );
        }
    }
    if let Some(error) = value.get("error") {
        let _ = write!(line, "; error {}", error.get("message").unwrap_or(error));
    }
    if let Some(output) = value.get("output") {
        let _ = write!(line, "; output {output}");
    }
    line
}

fn plain(value: &Value) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_owned)
}

fn cut(line: String) -> String {
    if line.chars().count() <= MAX_CHARS {
        return line;
    }
    let mut short: String = line.chars().take(MAX_CHARS - 1).collect();
    short.push('…');
    short
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_run_reads_as_status_steps_and_output() {
        let view = json!({"workflow_id": "w", "status": "completed",
                          "step_counts": {"completed": 10}, "output": {"last": "ab"}});
        assert_eq!(
            headline(&view),
            r#"completed: steps 10 completed; output {"last":"ab"}"#
        );
    }

    #[test]
    fn a_suspended_run_names_its_question_and_a_long_line_is_cut() {
        let view = json!({"workflow_id": "w", "status": "suspended", "step_counts": {},
            "pending_decisions": [{"step_id": "ok", "context": {"prompt": "Ship it?"}}],
            "output": "x".repeat(500)});
        let line = headline(&view);
        assert!(line.starts_with(r#"suspended; decision ok asks "Ship it?"; output "xxx"#));
        assert_eq!(line.chars().count(), 200);
        assert!(line.ends_with('…'));
    }
}
