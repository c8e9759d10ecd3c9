//! The `opcodec` binary, driven as a user would: exit codes, output formats,
//! and hostile inputs that must get a diagnostic, never a panic.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test helpers may panic

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn opcodec(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opcodec"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("opcodec runs")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A file in a temporary directory of its own, removed with it when dropped.
struct TempFile {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl std::ops::Deref for TempFile {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for TempFile {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

/// Writes `content` to a fresh temporary file named `name`.
fn temp_file(name: &str, content: &[u8]) -> TempFile {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, content).unwrap();
    TempFile { _dir: dir, path }
}

fn json_diagnostics(path: &Path) -> (i32, Vec<serde_json::Value>) {
    let output = opcodec(&["check", "--format", "json", path.to_str().unwrap()]);
    let value: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("JSON output");
    (
        output.status.code().unwrap(),
        value.as_array().unwrap().clone(),
    )
}

#[test]
fn every_example_checks_without_errors() {
    let mut args = vec!["check".to_owned(), "--color".into(), "never".into()];
    let mut examples: Vec<String> = std::fs::read_dir(repo().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("workflow.json").is_file())
        .map(|p| {
            format!(
                "examples/{}/workflow.json",
                p.file_name().unwrap().to_string_lossy()
            )
        })
        .collect();
    examples.sort();
    args.extend(examples);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = opcodec(&refs);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    assert!(stdout(&output).contains(" 0 errors"), "{}", stdout(&output));
}

#[test]
fn errors_point_at_the_offending_value() {
    let path = temp_file(
        "bad-action.json",
        br#"{
  "steps": [
    {"id": "fetch", "action": "http.gett", "params": {"url": "https://x"}}
  ]
}"#,
    );
    let (code, diagnostics) = json_diagnostics(&path);
    assert_eq!(code, 1);
    let d = &diagnostics[0];
    assert_eq!(d["code"], "E0040");
    assert_eq!(d["severity"], "error");
    assert_eq!(
        (d["line"].as_u64(), d["column"].as_u64()),
        (Some(3), Some(31))
    );
    assert_eq!(
        (d["end_line"].as_u64(), d["end_column"].as_u64()),
        (Some(3), Some(42))
    );
    assert_eq!(d["pointer"], "/steps/0/action");
    assert_eq!(d["file"], path.to_str().unwrap());
    assert!(d["help"].as_str().unwrap().contains("http.get"));
    assert_eq!(d["fix"]["edits"][0]["replacement"], "\"http.get\"");
    assert_eq!(d["fix"]["patch"][0]["op"], "replace");
}

#[test]
fn cycles_and_misreferences_exit_1() {
    let path = temp_file(
        "cycle.json",
        br#"{"steps": [
  {"id": "a", "action": "workflow.log", "depends_on": ["b"]},
  {"id": "b", "action": "workflow.log", "depends_on": ["a"], "params": {"message": "${{steps.c.output}}"}}
]}"#,
    );
    let (code, diagnostics) = json_diagnostics(&path);
    assert_eq!(code, 1);
    let codes: Vec<&str> = diagnostics
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"E0024"), "{codes:?}");
    assert!(codes.contains(&"E0034"), "{codes:?}");
    let cycle = diagnostics.iter().find(|d| d["code"] == "E0024").unwrap();
    assert!(cycle["message"].as_str().unwrap().contains("a → b → a"));
}

#[test]
fn fix_rewrites_the_file() {
    let original = std::fs::read(repo().join("examples/secret-rotation/original.json")).unwrap();
    let path = temp_file("fixable.json", &original);
    let p = path.to_str().unwrap();
    assert_eq!(opcodec(&["check", p]).status.code(), Some(1));
    let output = opcodec(&["check", "--fix", p]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    let fixed = std::fs::read_to_string(&path).unwrap();
    assert!(fixed.contains(r#""expected": 200"#), "{fixed}");
}

#[test]
fn agent_definitions_are_checked_and_fixed_like_workflows() {
    let path = temp_file(
        "db.agent.json",
        br#"{"name": "db", "version": "v1.2", "role": "scot", "modle": "m"}"#,
    );
    let (code, diagnostics) = json_diagnostics(&path);
    let codes: Vec<&str> = diagnostics
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!((code, codes), (1, vec!["E0065", "E0014", "E0064"]));
    let p = path.to_str().unwrap();
    let fixed = opcodec(&["check", "--fix", p]);
    assert_eq!(fixed.status.code(), Some(0), "{}", stdout(&fixed));
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        text,
        r#"{"name": "db", "version": "1.2.0", "role": "scout", "model": "m"}"#
    );
}

#[test]
fn eval_suites_are_checked_and_fixed_like_workflows() {
    let path = temp_file(
        "db.eval.json",
        br#"{"agent": "db", "cases": [{"name": "a", "prompt": "p", "expect": {"output_contian": ["x"], "files_exist": ["../etc"]}}]}"#,
    );
    let (code, diagnostics) = json_diagnostics(&path);
    let codes: Vec<&str> = diagnostics
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!((code, codes), (1, vec!["E0071", "E0071"]));
    let p = path.to_str().unwrap();
    let fixed = opcodec(&["check", "--fix", p]);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(r#""output_contains": ["x"]"#), "{text}");
    // A path leaving the workspace has no fix: it is left, and said.
    assert_eq!(fixed.status.code(), Some(1), "{}", stdout(&fixed));
}

#[test]
fn fix_applies_what_an_agent_would_and_check_only_says_so() {
    let broken = br#"{"steps": [
  {"id": "a", "action": "http.get", "params": {"timeout": 30}},
  {"id": "a", "action": "shell.exec", "params": {"command": "make", "workdir": "/src"}, "timeout": "2 min", "depends_on": ["a"]},
  {"id": "c", "action": "workflow.log", "params": {"message": "done ${{steps.a.output.status_code"}, "retry": {"max": "3"}},
  {"id": "d", "action": "crypto.uuid", "depends_on": ["d"]}
]}"#;
    let path = temp_file("agent.json", broken);
    let p = path.to_str().unwrap();
    let check = opcodec(&["fix", "--check", p]);
    assert_eq!(check.status.code(), Some(1), "{}", stdout(&check));
    assert!(stdout(&check).contains("to apply"), "{}", stdout(&check));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        broken,
        "--check writes nothing"
    );
    let fixed = opcodec(&["fix", p]);
    let text = std::fs::read_to_string(&path).unwrap();
    // A missing `url` and a bare number for a duration have no fix: a
    // placeholder would check clean and fail at run time, and a number's
    // unit cannot be told. They are left, and said.
    assert_eq!(fixed.status.code(), Some(1), "{}\n{text}", stdout(&fixed));
    assert!(
        text.contains(r#""params": {"timeout": 30}"#),
        "no guess was written: {text}"
    );
    let said = stdout(&fixed);
    assert!(
        said.contains("E0041") && said.contains("\"30ms\" or \"30s\""),
        "{said}"
    );
    for expected in [
        r#""id": "a-2""#,
        r#""cwd": "/src""#,
        r#""timeout": "2m""#,
        r#""depends_on": []"#,
        "status_code}}",
        r#""max": 3"#,
        r#"{"depends_on": ["a"], "id": "c""#,
    ] {
        assert!(text.contains(expected), "{expected} not in {text}");
    }
    // What is left has nothing to apply.
    let again = opcodec(&["fix", "--check", p]);
    assert!(!stdout(&again).contains("to apply"), "{}", stdout(&again));
}

#[test]
fn warnings_pass_unless_denied() {
    let path = temp_file("warn.json", br#"{"steps": [{"id": "a", "action": "workflow.log", "retry": {"max": 1, "backof": "none"}}]}"#);
    let p = path.to_str().unwrap();
    assert_eq!(opcodec(&["check", p]).status.code(), Some(0));
    assert_eq!(
        opcodec(&["check", "--deny-warnings", p]).status.code(),
        Some(1)
    );
}

#[test]
fn usage_and_io_errors_exit_2() {
    assert_eq!(opcodec(&["check"]).status.code(), Some(2));
    assert_eq!(opcodec(&["frobnicate"]).status.code(), Some(2));
    assert_eq!(
        opcodec(&["check", "/nonexistent/workflow.json"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn explain_prints_the_page() {
    let output = opcodec(&["explain", "e0024"]);
    assert_eq!(output.status.code(), Some(0));
    let text = stdout(&output);
    assert!(text.starts_with("# E0024: dependency cycle"));
    assert!(text.contains("## How to fix"));
    assert_eq!(opcodec(&["explain", "E9999"]).status.code(), Some(2));
}

#[test]
fn hostile_inputs_get_a_diagnostic_not_a_panic() {
    let deep = format!(
        "{{\"steps\": {}{}}}",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let mut huge = b"{\"steps\": [".to_vec();
    while huge.len() < 50 * 1024 * 1024 {
        huge.extend_from_slice(br#"{"id": "s", "action": "workflow.log"},"#);
    }
    huge.extend_from_slice(b"{}]}");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "truncated.json",
            br#"{"steps": [{"id": "a", "action": "workflow.lo"#.to_vec(),
            "E0001",
        ),
        ("deep.json", deep.into_bytes(), "E0003"),
        ("huge.json", huge, "E0006"),
        (
            "latin1.json",
            b"{\"steps\": [{\"id\": \"caf\xe9\"}]}".to_vec(),
            "E0002",
        ),
        (
            "bignum.json",
            br#"{"steps": [{"id": "a", "action": "workflow.log", "params": {"n": 1e999999}}]}"#
                .to_vec(),
            "E0004",
        ),
        ("not-object.json", b"[1, 2, 3]".to_vec(), "E0010"),
        ("empty.json", Vec::new(), "E0001"),
    ];
    for (name, content, expected) in cases {
        let path = temp_file(name, &content);
        let (code, diagnostics) = json_diagnostics(&path);
        assert_eq!(code, 1, "{name}");
        assert_eq!(diagnostics[0]["code"], expected, "{name}: {diagnostics:?}");
        // The human renderer must cope too.
        let output = opcodec(&["check", "--color", "never", path.to_str().unwrap()]);
        assert_eq!(
            output.status.code(),
            Some(1),
            "{name}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn human_output_snapshot() {
    let output = opcodec(&[
        "check",
        "--color",
        "never",
        "compiler/cli/tests/inputs/broken.json",
    ]);
    assert_eq!(output.status.code(), Some(1));
    insta::assert_snapshot!(stdout(&output));
}

#[test]
fn compile_disasm_and_meaning_hash() {
    let pretty =
        std::fs::read_to_string(repo().join("examples/approval-chain/workflow.json")).unwrap();
    let value: serde_json::Value = serde_json::from_str(&pretty).unwrap();
    let compact = temp_file(
        "compact.json",
        serde_json::to_string(&value).unwrap().as_bytes(),
    );
    let original = opcodec(&[
        "compile",
        "--print-hash",
        "examples/approval-chain/workflow.json",
    ]);
    let reformatted = opcodec(&["compile", "--print-hash", compact.to_str().unwrap()]);
    assert_eq!(original.status.code(), Some(0));
    let hash = stdout(&original);
    assert_eq!(hash.trim().len(), 64);
    assert_eq!(
        hash,
        stdout(&reformatted),
        "formatting does not change the meaning"
    );

    let out = temp_file("approval.opcb", b"");
    let compiled = opcodec(&[
        "compile",
        "examples/approval-chain/workflow.json",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(compiled.status.code(), Some(0));
    let listing = opcodec(&["disasm", out.to_str().unwrap()]);
    assert_eq!(listing.status.code(), Some(0));
    assert!(
        stdout(&listing).contains("decide     d0"),
        "{}",
        stdout(&listing)
    );
    let mut bytes = std::fs::read(&out).unwrap();
    bytes[8] = 99;
    let old = temp_file("old.opcb", &bytes);
    let rejected = opcodec(&["disasm", old.to_str().unwrap()]);
    assert_eq!(rejected.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&rejected.stderr).contains("format version 99"));
}

#[test]
fn run_exit_codes_and_json_result() {
    let inputs = r#"{"request_id": "R1", "request_summary": "laptop"}"#;
    let suspended = opcodec(&[
        "run",
        "--format",
        "json",
        "--inputs",
        inputs,
        "examples/approval-chain/workflow.json",
    ]);
    assert_eq!(suspended.status.code(), Some(3));
    let result: serde_json::Value = serde_json::from_str(&stdout(&suspended)).unwrap();
    assert_eq!(result["status"], "suspended");
    assert_eq!(result["pending_decisions"][0]["step_id"], "reviewer1");

    let completed = opcodec(&[
        "run",
        "--format",
        "json",
        "--inputs",
        inputs,
        "--decide",
        "reviewer1=approve",
        "--decide",
        "reviewer2=approve",
        "examples/approval-chain/workflow.json",
    ]);
    assert_eq!(completed.status.code(), Some(0));
    let result: serde_json::Value = serde_json::from_str(&stdout(&completed)).unwrap();
    assert_eq!(result["steps"]["reviewer2"]["output"]["choice"], "approve");

    let failed = opcodec(&[
        "run",
        "--input",
        "should_fail=true",
        "examples/hooks-and-output/workflow.json",
    ]);
    assert_eq!(failed.status.code(), Some(1));
    assert!(
        stdout(&failed).contains("error[R0110]"),
        "{}",
        stdout(&failed)
    );

    let broken = temp_file(
        "broken-run.json",
        br#"{"steps": [{"id": "a", "action": "nope.nope"}]}"#,
    );
    assert_eq!(
        opcodec(&["run", broken.to_str().unwrap()]).status.code(),
        Some(2)
    );

    let missing_input = opcodec(&["run", "examples/approval-chain/workflow.json"]);
    assert_eq!(missing_input.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing_input.stderr).contains("R0108"));
}

#[test]
fn a_signal_no_wait_step_takes_is_refused_naming_the_closest() {
    let file = temp_file(
        "waits.json",
        br#"{"steps": [{"id": "gate", "type": "wait", "config": {"signal": "approved", "duration": "1h"}}]}"#,
    );
    let path = file.to_str().unwrap();
    let refused = opcodec(&["run", path, "--signal", "approve={}"]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(
        said.contains("error[R0114]") && said.contains("did you mean `approved`?"),
        "{said}"
    );
    let taken = opcodec(&["run", path, "--signal", "approved={}", "--format", "json"]);
    assert_eq!(
        taken.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&taken.stderr)
    );
}

#[test]
fn an_expr_map_of_computed_values_is_a_diagnostic_never_a_panic() {
    let file = temp_file(
        "expr-map.json",
        br#"{"steps": [{"id": "e", "action": "expr.eval", "params": {"language": "expr", "expression": "{\"n\": sum([1])}"}}]}"#,
    );
    let (code, diagnostics) = json_diagnostics(&file);
    assert_eq!(code, 1, "{diagnostics:?}");
    assert_eq!(diagnostics[0]["code"], "E0054", "{diagnostics:?}");
}
