//! `expect.toml`: what an example is expected to do.

use std::path::Path;

use serde::Deserialize;

/// The whole expectation file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// What `opcodec check` reports.
    pub check: Check,
    /// What it reports for `original.json`, opcode's file before our fix.
    pub original: Option<Check>,
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

/// Reads `dir/expect.toml`.
pub fn load(dir: &Path) -> Result<Expect, String> {
    let path = dir.join("expect.toml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}
