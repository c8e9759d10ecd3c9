//! A case's post-conditions against what the call answered and what its
//! workspace holds after it (spec/agent-evals.md, "Post-conditions"): one
//! sentence for each that does not hold.

use std::collections::BTreeSet;
use std::path::Path;

use opcode_compiler::agent::suite::Expect;
use serde_json::Value;

/// What does not hold of `expect`, given how the call ended (`status`),
/// its step's summary (`step`: `output` or `error`) and the workspace
/// `dir`.
pub async fn check(expect: &Expect, status: &str, step: &Value, dir: &Path) -> Vec<String> {
    let output = &step["output"];
    let mut failures = Vec::new();
    match &expect.status {
        Some(wanted) if wanted != status => failures.push(format!(
            "status: expected `{wanted}`, was `{status}`{}",
            error_of(step)
        )),
        None if status == "failed" => failures.push(format!("the call failed{}", error_of(step))),
        _ => {}
    }
    if let Some(code) = expect.exit_code
        && output["exit_code"].as_i64() != Some(code)
    {
        failures.push(format!(
            "exit_code: expected {code}, was {}",
            output["exit_code"]
        ));
    }
    let summary = output["summary"].as_str().unwrap_or_default();
    for text in &expect.output_contains {
        if !summary.contains(text.as_str()) {
            failures.push(format!(
                "output_contains: the summary lacks {text:?}: {}",
                cut(summary)
            ));
        }
    }
    for text in &expect.output_lacks {
        if summary.contains(text.as_str()) {
            failures.push(format!(
                "output_lacks: the summary says {text:?}: {}",
                cut(summary)
            ));
        }
    }
    let tools: BTreeSet<&str> = output["tools"]
        .as_object()
        .map(|t| t.keys().map(String::as_str).collect())
        .unwrap_or_default();
    for tool in &expect.tools_called {
        if !tools.contains(tool.as_str()) {
            failures.push(format!(
                "tools_called: `{tool}` was not called; called: {}",
                listed(&tools)
            ));
        }
    }
    for tool in &expect.tools_not_called {
        if tools.contains(tool.as_str()) {
            failures.push(format!("tools_not_called: `{tool}` was called"));
        }
    }
    let commands: Vec<&str> = output["commands"]
        .as_array()
        .map(|c| c.iter().filter_map(|c| c["command"].as_str()).collect())
        .unwrap_or_default();
    for text in &expect.commands_ran {
        if !commands.iter().any(|c| c.contains(text.as_str())) {
            failures.push(format!(
                "commands_ran: no command ran {text:?}; ran: {commands:?}"
            ));
        }
    }
    failures.extend(files(expect, output, dir).await);
    failures
}

/// The workspace's post-conditions.
async fn files(expect: &Expect, output: &Value, dir: &Path) -> Vec<String> {
    let mut failures = Vec::new();
    for path in &expect.files_exist {
        if tokio::fs::symlink_metadata(dir.join(path)).await.is_err() {
            failures.push(format!("files_exist: `{path}` does not exist"));
        }
    }
    for path in &expect.files_absent {
        if tokio::fs::symlink_metadata(dir.join(path)).await.is_ok() {
            failures.push(format!("files_absent: `{path}` exists"));
        }
    }
    for (path, text) in &expect.file_contains {
        match tokio::fs::read(dir.join(path)).await {
            Ok(bytes) if String::from_utf8_lossy(&bytes).contains(text.as_str()) => {}
            Ok(_) => failures.push(format!("file_contains: `{path}` lacks {text:?}")),
            Err(e) => failures.push(format!("file_contains: cannot read `{path}`: {e}")),
        }
    }
    if let Some(wanted) = &expect.files_changed {
        let wanted: BTreeSet<(&str, &str)> = wanted
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_str()))
            .collect();
        let changed: BTreeSet<(&str, &str)> = output["files_changed"]
            .as_array()
            .map(|files| {
                files
                    .iter()
                    .filter_map(|f| Some((f["path"].as_str()?, f["change"].as_str()?)))
                    .collect()
            })
            .unwrap_or_default();
        if wanted != changed {
            let show = |set: &BTreeSet<(&str, &str)>| {
                let items: Vec<String> = set.iter().map(|(p, c)| format!("{p} ({c})")).collect();
                if items.is_empty() {
                    "nothing".to_owned()
                } else {
                    items.join(", ")
                }
            };
            failures.push(format!(
                "files_changed: expected {}, was {}",
                show(&wanted),
                show(&changed)
            ));
        }
    }
    failures
}

/// `: <the step's error>` when it failed.
fn error_of(step: &Value) -> String {
    match step["error"]["message"].as_str() {
        Some(message) => format!(": {}", cut(message)),
        None => String::new(),
    }
}

fn listed(tools: &BTreeSet<&str>) -> String {
    if tools.is_empty() {
        return "none".into();
    }
    tools.iter().copied().collect::<Vec<_>>().join(", ")
}

/// At most 300 characters of `text`.
fn cut(text: &str) -> String {
    match text.char_indices().nth(300) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn each_post_condition_that_does_not_hold_is_said() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("report.md"), "orders need an index").unwrap();
        let step = json!({"output": {
            "status": "completed", "exit_code": 0, "summary": "Added an index on orders.",
            "tools": {"read": 2, "bash": 1},
            "commands": [{"command": "psql -c 'explain'", "exit_code": 0}],
            "files_changed": [{"path": "report.md", "change": "added"}],
        }});
        let holds = Expect {
            status: Some("completed".into()),
            exit_code: Some(0),
            output_contains: vec!["index".into()],
            output_lacks: vec!["DROP".into()],
            tools_called: vec!["read".into()],
            tools_not_called: vec!["write".into()],
            commands_ran: vec!["psql".into()],
            files_exist: vec!["report.md".into()],
            files_absent: vec!["secrets.txt".into()],
            file_contains: [("report.md".to_owned(), "index".to_owned())].into(),
            files_changed: Some(vec![("report.md".into(), "added".into())]),
        };
        assert_eq!(
            check(&holds, "completed", &step, dir.path()).await,
            Vec::<String>::new()
        );
        let fails = Expect {
            status: Some("timeout".into()),
            exit_code: Some(1),
            output_contains: vec!["vacuum".into()],
            output_lacks: vec!["index".into()],
            tools_called: vec!["write".into()],
            tools_not_called: vec!["bash".into()],
            commands_ran: vec!["cargo".into()],
            files_exist: vec!["missing.md".into()],
            files_absent: vec!["report.md".into()],
            file_contains: [("report.md".to_owned(), "vacuum".to_owned())].into(),
            files_changed: Some(Vec::new()),
        };
        let said = check(&fails, "completed", &step, dir.path()).await;
        assert_eq!(said.len(), 11, "{said:#?}");
        assert!(said[0].starts_with("status: expected `timeout`, was `completed`"));
        assert!(
            said[10].contains("expected nothing, was report.md (added)"),
            "{}",
            said[10]
        );
    }

    #[tokio::test]
    async fn a_failed_call_fails_the_case_unless_failure_is_expected() {
        let dir = tempfile::tempdir().unwrap();
        let step = json!({"error": {"message": "the agent exited with code 3"}});
        let said = check(&Expect::default(), "failed", &step, dir.path()).await;
        assert_eq!(said, ["the call failed: the agent exited with code 3"]);
        let expected = Expect {
            status: Some("failed".into()),
            ..Expect::default()
        };
        assert!(
            check(&expected, "failed", &step, dir.path())
                .await
                .is_empty()
        );
    }
}
