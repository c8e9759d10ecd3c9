//! The conformance suite: every folder of `examples/` is a test.
//!
//! Each folder holds `workflow.json` and `expect.toml`. For each folder this
//! generates `check::<name>` (the diagnostic codes `opcodec check` reports
//! are exactly the expected ones), `schema::<name>` (the file is valid
//! against `spec/workflow.schema.json`, checked with the `jsonschema` crate)
//! and `run::<name>` (it runs through the engine's executor as `[run]`
//! expects, then recovers from every prefix of its log to the same end).
#![allow(clippy::expect_used, clippy::unwrap_used)] // test harness code may panic

mod expect;
mod mock;
mod replay;
mod run;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Failed, Trial};
use opcode_compiler::Compiler;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn example_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root().join("examples"))
        .expect("examples/ exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("workflow.json").is_file())
        .collect();
    dirs.sort();
    dirs
}

fn name_of(dir: &Path) -> String {
    dir.file_name().unwrap().to_string_lossy().into_owned()
}

fn compiler() -> Compiler {
    Compiler::new().with_actions(opcode_stdlib::catalog())
}

/// Checks `file` and compares the codes reported with `want`.
fn expect_codes(file: &Path, want: &expect::Check) -> Result<(), Failed> {
    let text = std::fs::read_to_string(file).map_err(|e| e.to_string())?;
    let diagnostics = compiler().check(&text);
    let codes = |errors: bool| -> BTreeSet<String> {
        diagnostics
            .iter()
            .filter(|d| d.is_error() == errors)
            .map(|d| d.code.id.to_owned())
            .collect()
    };
    let (errors, warnings) = (codes(true), codes(false));
    let want_errors: BTreeSet<String> = want.errors.iter().cloned().collect();
    let want_warnings: BTreeSet<String> = want.warnings.iter().cloned().collect();
    if errors != want_errors || warnings != want_warnings {
        let messages: Vec<String> = diagnostics
            .iter()
            .map(|d| format!("{}: {}", d.code.id, d.message))
            .collect();
        return Err(Failed::from(format!(
            "expected errors {want_errors:?} warnings {want_warnings:?}, got errors {errors:?} warnings {warnings:?}:\n{}",
            messages.join("\n")
        )));
    }
    Ok(())
}

fn check_trial(dir: PathBuf) -> Trial {
    Trial::test(format!("check::{}", name_of(&dir)), move || {
        let expect = expect::load(&dir)?;
        expect_codes(&dir.join("workflow.json"), &expect.check)?;
        let original = dir.join("original.json");
        match (&expect.original, original.is_file()) {
            (Some(want), true) => {
                expect_codes(&original, want)?;
                // Applying the fixes to opcode's file gives our workflow.json.
                let text = std::fs::read_to_string(&original).map_err(|e| e.to_string())?;
                let diagnostics = compiler().check(&text).into_sorted();
                let (fixed, _) = opcode_compiler::diagnostics::apply_fixes(&text, &diagnostics);
                let ours = std::fs::read_to_string(dir.join("workflow.json"))
                    .map_err(|e| e.to_string())?;
                if fixed != ours {
                    return Err(Failed::from(
                        "workflow.json is not original.json with its fixes applied",
                    ));
                }
                Ok(())
            }
            (None, false) => Ok(()),
            _ => Err(Failed::from(
                "original.json and [original] in expect.toml go together",
            )),
        }
    })
}

fn schema_trial(dir: PathBuf, validator: std::sync::Arc<jsonschema::Validator>) -> Trial {
    Trial::test(format!("schema::{}", name_of(&dir)), move || {
        follows(&dir.join("workflow.json"), &validator)
    })
}

/// Does the JSON file at `path` follow the schema of `validator`?
fn follows(path: &Path, validator: &jsonschema::Validator) -> Result<(), Failed> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Failed::from(errors.join("\n")))
    }
}

/// The validator of the JSON Schema at `spec/NAME`.
fn validator(name: &str) -> std::sync::Arc<jsonschema::Validator> {
    let text = std::fs::read_to_string(root().join("spec").join(name)).expect("schema exists");
    let schema: serde_json::Value = serde_json::from_str(&text).expect("schema is JSON");
    std::sync::Arc::new(jsonschema::draft202012::new(&schema).expect("schema compiles"))
}

/// Is a program of this name on `PATH`?
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

fn run_trial(dir: PathBuf) -> Trial {
    let expected = expect::load(&dir).ok();
    let elsewhere = expected.as_ref().is_some_and(|e| e.run_elsewhere.is_some());
    let present: Vec<String> = expected
        .and_then(|e| e.run)
        .map(|r| {
            r.assumes_absent
                .into_iter()
                .filter(|p| on_path(p))
                .collect()
        })
        .unwrap_or_default();
    let ignored = !present.is_empty() || elsewhere;
    Trial::test(format!("run::{}", name_of(&dir)), move || {
        let outcome = run::check_run(&dir)?;
        match outcome {
            Some(outcome) => replay::check_replay(&dir, &outcome),
            None => Err(Failed::from("expect.toml has no [run] section")),
        }
    })
    .with_ignored_flag(ignored)
}

/// The schema must also reject things: a step without an id, an unknown type.
fn schema_rejects_trial(validator: std::sync::Arc<jsonschema::Validator>) -> Trial {
    Trial::test("schema::rejects-invalid-workflows", move || {
        let bad = [
            serde_json::json!({"steps": [{"action": "workflow.log"}]}),
            serde_json::json!({"steps": [{"id": "a", "type": "lop", "config": {}}]}),
            serde_json::json!({"steps": [{"id": "a", "type": "loop", "config": {"over": "x"}}]}),
            serde_json::json!({"steps": []}),
            serde_json::json!({"steps": [{"id": "a", "action": "x.y", "timeout": "5 min"}]}),
        ];
        for doc in bad {
            if validator.is_valid(&doc) {
                return Err(Failed::from(format!("schema accepted {doc}")));
            }
        }
        Ok(())
    })
}

/// An example's workflow tests follow `spec/test-file.schema.json`
/// (`opcodec test` runs them; tests/run).
fn test_file_trial(path: PathBuf, validator: std::sync::Arc<jsonschema::Validator>) -> Trial {
    let name = path.parent().map(name_of).unwrap_or_default();
    Trial::test(format!("test-file::{name}"), move || {
        follows(&path, &validator)
    })
}

fn main() {
    let args = Arguments::from_args();
    let workflows = validator("workflow.schema.json");
    let test_files = validator("test-file.schema.json");
    let mut trials = vec![schema_rejects_trial(workflows.clone())];
    for dir in example_dirs() {
        trials.push(check_trial(dir.clone()));
        trials.push(run_trial(dir.clone()));
        let tests = dir.join("workflow.test.json");
        if tests.is_file() {
            trials.push(test_file_trial(tests, test_files.clone()));
        }
        trials.push(schema_trial(dir, workflows.clone()));
    }
    libtest_mimic::run(&args, trials).exit();
}
