//! The test file (`NAME.test.json`, spec/testing.md): named cases of one
//! workflow, each with its inputs, mocks, answers and expectations.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// A test file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestFile {
    /// The workflow under test, relative to the test file (default: the
    /// file's name without `.test`, as `.json` or `.opc`, else
    /// `workflow.json` / `workflow.opc` beside it).
    pub workflow: Option<PathBuf>,
    /// Mocks every case starts from (a case's own win).
    #[serde(default)]
    pub mocks: BTreeMap<String, Mock>,
    /// The cases.
    pub cases: Vec<Case>,
}

/// One case.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// Its name, unique in the file.
    pub name: String,
    /// The run's inputs.
    #[serde(default)]
    pub inputs: Option<Value>,
    /// Another workflow for this case (a path, or a definition inline):
    /// for a case about a workflow that must not compile.
    pub workflow: Option<Value>,
    /// Mocks by step instance (`review[2]`), step id, or action name.
    #[serde(default)]
    pub mocks: BTreeMap<String, Mock>,
    /// Answers to reasoning steps, by step id or instance name.
    #[serde(default)]
    pub decisions: BTreeMap<String, String>,
    /// Signals sent once the run has started, in order.
    #[serde(default)]
    pub signals: Vec<Signal>,
    /// What must be true when the run rests.
    #[serde(default)]
    pub expect: Expect,
}

/// What a mocked call gives.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mock {
    /// Its output.
    pub output: Option<Value>,
    /// Or its failure.
    pub error: Option<MockError>,
    /// Or one result per attempt, in order (the last repeats).
    pub sequence: Option<Vec<Mock>>,
    /// How long the call takes, in virtual time (`"2h"`).
    pub delay: Option<String>,
    /// Call the real action instead.
    #[serde(default)]
    pub call_through: bool,
    /// The parameters the call must be made with (objects match
    /// partially): a golden run's recorded ones.
    pub params: Option<Value>,
}

/// A mocked failure.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockError {
    /// The code (default R0100).
    pub code: Option<String>,
    /// The message.
    #[serde(default)]
    pub message: String,
    /// Whether a retry policy retries it (default true).
    pub retryable: Option<bool>,
}

/// A signal to send.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signal {
    /// Its name.
    pub name: String,
    /// Its payload.
    #[serde(default)]
    pub payload: Value,
}

/// Expectations; each one given must hold.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The run's status.
    pub status: Option<String>,
    /// The run's output (objects match partially).
    pub output: Option<Value>,
    /// The run's error (objects match partially).
    pub error: Option<Value>,
    /// Steps by instance name: `status`, `attempts`, `output`, `error`.
    #[serde(default)]
    pub steps: BTreeMap<String, Value>,
    /// Steps that must never have run (absent, or skipped).
    #[serde(default)]
    pub never_ran: Vec<String>,
    /// For a workflow that must not compile: the codes it reports.
    pub diagnostics: Option<Vec<String>>,
}

impl TestFile {
    /// Reads and parses `path`.
    pub fn read(path: &Path) -> Result<TestFile, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let file: TestFile = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a test file: {e}", path.display()))?;
        let mut names = std::collections::BTreeSet::new();
        for case in &file.cases {
            if !names.insert(case.name.as_str()) {
                return Err(format!(
                    "{}: two cases are named `{}`",
                    path.display(),
                    case.name
                ));
            }
        }
        Ok(file)
    }

    /// The workflow file this test file is about.
    pub fn workflow_path(&self, path: &Path) -> Result<PathBuf, String> {
        match &self.workflow {
            Some(given) => Ok(super::case::folder_of(path).join(given)),
            None => workflow_beside(path),
        }
    }
}

/// The workflow beside the test file at `path` that it is about when it
/// names none: its name without `.test`, as `.json` or `.opc`, else
/// `workflow.json` / `workflow.opc`.
pub fn workflow_beside(path: &Path) -> Result<PathBuf, String> {
    let folder = super::case::folder_of(path);
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let stem = name.strip_suffix(".test.json").unwrap_or(name);
    let candidates = [
        format!("{stem}.json"),
        format!("{stem}.opc"),
        "workflow.json".to_owned(),
        "workflow.opc".to_owned(),
    ];
    candidates
        .iter()
        .map(|c| folder.join(c))
        .find(|c| c.is_file())
        .ok_or_else(|| {
            format!(
                "{}: no workflow beside it ({}); say which with `workflow`",
                path.display(),
                candidates.join(", ")
            )
        })
}
