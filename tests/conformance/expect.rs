//! `expect.toml`: what an example is expected to do.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

/// The whole expectation file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// What `opcodec check` reports.
    pub check: Check,
    /// What it reports for `original.json`, opcode's file before our fix.
    pub original: Option<Check>,
    /// How the example runs.
    pub run: Option<Run>,
    /// Where the example is run instead of here (its steps need what this
    /// suite does not give: a delegated agent, a sandbox).
    pub run_elsewhere: Option<String>,
}

/// Expected diagnostic codes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    /// Error codes, each at least once.
    #[serde(default)]
    pub errors: Vec<String>,
    /// Warning codes, each at least once.
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// A run of the example and what it must produce.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Run {
    /// The inputs. In strings, `{mock}` is the mock server's URL, `{dir}` a
    /// fresh temporary directory, `{example}` the example's folder.
    #[serde(default)]
    pub inputs: Value,
    /// Answers to reasoning steps, by step id.
    #[serde(default)]
    pub decide: BTreeMap<String, String>,
    /// Signals sent after the start: `[name, payload]`.
    #[serde(default)]
    pub signals: Vec<(String, Value)>,
    /// Shell commands run in `{dir}` before the run (fixtures).
    #[serde(default)]
    pub setup: Vec<String>,
    /// The final status.
    pub status: String,
    /// Values in the run summary, by JSON Pointer
    /// (`/output/x`, `/steps/<id>/status`, `/error/code`).
    #[serde(default)]
    pub expect: BTreeMap<String, Value>,
    /// Pointers whose value must be JSON `null` or absent (TOML has no null).
    #[serde(default)]
    pub expect_null: Vec<String>,
    /// Mock HTTP routes.
    #[serde(default)]
    pub mock: Vec<Route>,
    /// Requests the mock must have received: `"METHOD /path"` → how many.
    #[serde(default)]
    pub requests: BTreeMap<String, usize>,
    /// Programs the expectation assumes are not installed (the trial is
    /// ignored, saying why, on a machine that has one).
    #[serde(default)]
    pub assumes_absent: Vec<String>,
}

/// One mock route.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// The path.
    pub path: String,
    /// Only this method (default: any).
    pub method: Option<String>,
    /// The status (default 200).
    #[serde(default = "ok")]
    pub status: u16,
    /// The body: JSON, or text when a string.
    #[serde(default)]
    pub body: Value,
    /// Answer 503 to the first N calls.
    #[serde(default)]
    pub fail_first: u32,
}

fn ok() -> u16 {
    200
}

/// Reads `dir/expect.toml`.
pub fn load(dir: &Path) -> Result<Expect, String> {
    let path = dir.join("expect.toml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}
