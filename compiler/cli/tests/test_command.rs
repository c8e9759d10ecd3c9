//! `opcodec test`, driven as a user would: a passing suite, a broken
//! change caught with a diff that names the step, an unmocked effect
//! refused, and the JSON and JUnit reports.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test helpers may panic

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn opcodec(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opcodec"))
        .args(args)
        .output()
        .expect("opcodec runs")
}

/// A fresh, empty folder for one test.
fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("opcodec-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `opcodec test DIR [extra…]`, which must fail (exit 1): its report.
fn failing(dir: &Path, extra: &[&str]) -> String {
    let mut args = vec!["test", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    let ran = opcodec(&args);
    let text = String::from_utf8_lossy(&ran.stdout).into_owned();
    assert_eq!(ran.status.code(), Some(1), "{text}");
    text
}

/// A copy of `examples/multi-agent-review` in a fresh folder, its
/// workflow changed by `edit`.
fn example_copy(name: &str, edit: impl Fn(String) -> String) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/multi-agent-review");
    let dir = fresh_dir(name);
    for file in ["workflow.json", "workflow.test.json"] {
        let text = std::fs::read_to_string(from.join(file)).unwrap();
        let text = if file == "workflow.json" {
            edit(text)
        } else {
            text
        };
        std::fs::write(dir.join(file), text).unwrap();
    }
    dir
}

fn json_report(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

#[test]
fn the_examples_suite_passes() {
    let dir = example_copy("same", |t| t);
    let ran = opcodec(&["test", dir.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&ran.stdout);
    assert_eq!(ran.status.code(), Some(0), "{text}");
    assert!(text.contains("3 cases: 3 passed, 0 failed"), "{text}");
    assert!(text.contains("2h 0m 0s virtual"), "{text}");
    let crashed = opcodec(&[
        "test",
        dir.to_str().unwrap(),
        "--crash-points",
        "--format",
        "json",
    ]);
    assert_eq!(crashed.status.code(), Some(0));
    let report = json_report(&crashed);
    let cases = report["files"][0]["cases"].as_array().unwrap();
    let total = |key: &str| -> u64 { cases.iter().map(|c| c[key].as_u64().unwrap()).sum() };
    let (tried, in_recovery) = (total("crash_points"), total("crashes_in_recovery"));
    assert!(tried >= 9, "{report}");
    // Crash points include second kills, during the recovery from the first.
    assert!(in_recovery > 0 && in_recovery < tried, "{report}");
}

#[test]
fn an_inverted_condition_fails_with_a_diff_naming_the_step() {
    let dir = example_copy("inverted", |t| {
        t.replace("choice == 'approve'", "choice != 'approve'")
    });
    let junit = dir.join("junit.xml");
    let ran = opcodec(&[
        "test",
        dir.to_str().unwrap(),
        "--format",
        "json",
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(ran.status.code(), Some(1));
    let report = json_report(&ran);
    assert_eq!(
        (report["passed"].as_u64(), report["failed"].as_u64()),
        (Some(0), Some(3)),
        "{report}"
    );
    let approved = &report["files"][0]["cases"][0];
    let failures = approved["failures"].to_string();
    assert!(failures.contains("/steps/publish"), "{failures}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("<testsuite") && xml.matches("<failure").count() == 3,
        "{xml}"
    );
}

#[test]
fn an_effect_nobody_mocked_is_refused_by_name() {
    let dir = example_copy("unmocked", |t| t.replace("http.post", "http.request"));
    let text = failing(&dir, &[]);
    assert!(
        text.contains("step `publish` calls `http.request`, which this case does not mock"),
        "{text}"
    );
}

#[test]
fn a_test_file_named_bare_in_its_own_folder_runs() {
    let dir = example_copy("bare", |t| t);
    let ran = Command::new(env!("CARGO_BIN_EXE_opcodec"))
        .args(["test", "workflow.test.json"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(
        ran.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ran.stdout)
    );
}

#[test]
fn nothing_to_test_is_a_usage_error() {
    let dir = fresh_dir("empty");
    assert_eq!(
        opcodec(&["test", dir.to_str().unwrap()]).status.code(),
        Some(2)
    );
}

/// A golden case (as `opcode export` writes it) fails when the workflow
/// now calls a step with other params, naming the step and the place.
#[test]
fn a_golden_case_names_the_step_called_with_other_params() {
    let dir = fresh_dir("golden");
    let workflow = |expression: &str| {
        serde_json::json!({"steps": [{"id": "b", "action": "expr.eval", "params": {"expression": expression}}]})
            .to_string()
    };
    let golden = serde_json::json!({"cases": [{"name": "golden", "mocks": {"b": {"sequence": [
        {"output": {"result": 2}, "params": {"expression": "1+1", "language": "cel"}}]}},
        "expect": {"status": "completed", "output": {"b": {"result": 2}}}}]});
    std::fs::write(dir.join("workflow.test.json"), golden.to_string()).unwrap();
    std::fs::write(dir.join("workflow.json"), workflow("1+1")).unwrap();
    assert_eq!(
        opcodec(&["test", dir.to_str().unwrap()]).status.code(),
        Some(0)
    );
    std::fs::write(dir.join("workflow.json"), workflow("2+2")).unwrap();
    let text = failing(&dir, &[]);
    assert!(
        text.contains("step `b` (attempt 1) was called with other params: at /expression: expected \"1+1\", got \"2+2\""),
        "{text}"
    );
}

/// A value that changes on every call (an unmocked `crypto.uuid` after a
/// dispatched step) reaches the output: recovering from the commit before
/// it ran ends differently, and the crash point says which one.
#[test]
fn a_run_that_ends_differently_after_a_crash_fails_its_crash_point() {
    let dir = fresh_dir("uuid");
    let workflow = serde_json::json!({
        "name": "fresh-id",
        "steps": [
            {"id": "ping", "action": "http.get", "params": {"url": "https://example.com"}},
            {"id": "id", "action": "crypto.uuid", "depends_on": ["ping"]}
        ],
        "output": {"id": "${{steps.id.output.uuid}}"}
    });
    let cases = serde_json::json!({"cases": [{
        "name": "a fresh id",
        "mocks": {"ping": {"output": {"status_code": 200}}}
    }]});
    std::fs::write(dir.join("workflow.json"), workflow.to_string()).unwrap();
    std::fs::write(dir.join("workflow.test.json"), cases.to_string()).unwrap();
    let plain = opcodec(&["test", dir.to_str().unwrap()]);
    assert_eq!(plain.status.code(), Some(0));
    let text = failing(&dir, &["--crash-points"]);
    assert!(
        text.contains("crashed after commit 1 of") && text.contains("the run ends differently"),
        "{text}"
    );
    assert!(text.contains("/output/id"), "{text}");
}

/// A mock of an output its action never gives fails the file, at its line,
/// before any case runs.
#[test]
fn a_mock_of_an_output_the_action_never_gives_is_refused() {
    let dir = fresh_dir("misfit");
    let workflow = serde_json::json!({"steps": [
        {"id": "ping", "action": "http.get", "params": {"url": "https://example.com"}}]});
    std::fs::write(dir.join("workflow.json"), workflow.to_string()).unwrap();
    std::fs::write(
        dir.join("workflow.test.json"),
        "{\"cases\": [{\"name\": \"a\",\n \"mocks\": {\"ping\": {\"output\": {\"status_code\": \"ok\"}}}}]}",
    )
    .unwrap();
    let text = failing(&dir, &[]);
    assert!(
        text.contains(
            "line 2: E0056: `http.get` never gives this output: .status_code is a string"
        ),
        "{text}"
    );
}

#[test]
fn a_sequence_is_per_instance_and_its_unused_entries_fail_the_case() {
    let dir = fresh_dir("sequence-in-loop");
    std::fs::write(
        dir.join("workflow.json"),
        r#"{"steps": [{"id": "each", "type": "loop", "config": {"mode": "for_each", "over": "[1, 2]", "body": [
            {"id": "fetch", "action": "http.get", "params": {"url": "https://example.com/${{loop.item}}"}}]}}]}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("workflow.test.json"),
        r#"{"cases": [{"name": "each iteration is its own call", "mocks": {"fetch": {"sequence": [
            {"output": {"status_code": 200}}, {"output": {"status_code": 201}}]}},
            "expect": {"status": "completed"}}]}"#,
    )
    .unwrap();
    let report = failing(&dir, &[]);
    assert!(
        report.contains("entries 2 to 2 were never used") && report.contains("`fetch[0]`"),
        "{report}"
    );
}
