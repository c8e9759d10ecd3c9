//! Isolation of the processes actions start, and the paths `fs.*` may use.
//!
//! A step's `isolation` block is merged over the embedding's defaults (the
//! daemon's settings) into a [`Policy`]. `shell.exec` under an enabled
//! policy runs in new network, pid, mount, ipc and uts namespaces, in a
//! cgroup with the policy's limits, with a read-only view of the host but
//! for the workspace and a private `/tmp` (see `spec/isolation.md`).

pub mod cgroup;
pub mod paths;
pub mod sandbox;
pub mod spawn;

use std::path::{Path, PathBuf};

use opcode_vm::error::ActionError;
use serde::Deserialize;
use serde_json::Value;

pub use self::paths::PathRules;

/// The `isolation` block of a step or of the settings; every field optional.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Block {
    /// Isolate at all.
    pub enabled: Option<bool>,
    /// Keep the host's network (default false: a new, empty network namespace).
    pub network: Option<bool>,
    /// The directory the process works in and may write to.
    pub workspace: Option<PathBuf>,
    /// May the process write to the workspace (default true)?
    pub writable: Option<bool>,
    /// Memory limit: bytes, or text such as `256MiB`, `1G`.
    pub memory: Option<Size>,
    /// Most processes and threads at once.
    pub pids: Option<u64>,
    /// CPU share in cores (`0.5` is half a core).
    pub cpu: Option<f64>,
    /// Bytes kept of each output stream.
    pub max_output: Option<Size>,
    /// Largest file the process may write.
    pub max_file_size: Option<Size>,
    /// Paths `fs.*` actions may read and write, and never touch.
    pub fs: Option<PathRules>,
    /// Settings only: run unisolated where the host cannot isolate, instead
    /// of failing the step.
    pub allow_unisolated: Option<bool>,
}

/// A size in bytes, written as a number or as text with a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Size, D::Error> {
        match Value::deserialize(d)? {
            Value::Number(n) => n
                .as_u64()
                .map(Size)
                .ok_or_else(|| serde::de::Error::custom("a size must be a whole number of bytes")),
            Value::String(s) => parse_size(&s).map(Size).map_err(serde::de::Error::custom),
            _ => Err(serde::de::Error::custom(
                "a size is a number of bytes or text such as 256MiB",
            )),
        }
    }
}

/// Parses `512`, `64k`, `256MiB`, `1G`, `2GB` (powers of 1024).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a size such as 256MiB"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(format!("`{text}` has an unknown unit: use KiB, MiB or GiB")),
    };
    number
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("`{text}` is too large"))
}

impl Block {
    /// Parses a block (`null` is an empty one).
    pub fn parse(value: Option<&Value>) -> Result<Block, String> {
        match value {
            None | Some(Value::Null) => Ok(Block::default()),
            Some(v) => Block::deserialize(v).map_err(|e| format!("`isolation`: {e}")),
        }
    }

    /// `self` with `over`'s set fields on top.
    fn overlay(self, over: Block) -> Block {
        Block {
            enabled: over.enabled.or(self.enabled),
            network: over.network.or(self.network),
            workspace: over.workspace.or(self.workspace),
            writable: over.writable.or(self.writable),
            memory: over.memory.or(self.memory),
            pids: over.pids.or(self.pids),
            cpu: over.cpu.or(self.cpu),
            max_output: over.max_output.or(self.max_output),
            max_file_size: over.max_file_size.or(self.max_file_size),
            fs: match (self.fs, over.fs) {
                (Some(base), Some(step)) => Some(base.narrowed_by(step)),
                (base, step) => step.or(base),
            },
            allow_unisolated: self.allow_unisolated,
        }
    }
}

/// What the embedding decides: defaults, and where the sandbox helper is.
#[derive(Debug, Clone, Default)]
pub struct IsolationConfig {
    /// Defaults every step's block is merged over.
    pub defaults: Block,
    /// The program that sets a sandbox up (a binary whose `main` calls
    /// [`sandbox::main_if_sandbox`]); isolation needs one.
    pub helper: Option<PathBuf>,
}

/// Processes in a sandbox at once unless the policy says.
pub const DEFAULT_PIDS: u64 = 1024;
/// Bytes kept of each output stream unless the policy says.
pub const DEFAULT_MAX_OUTPUT: u64 = 10 * 1024 * 1024;
/// Largest file a sandboxed process may write unless the policy says.
pub const DEFAULT_MAX_FILE: u64 = 1 << 30;

/// The isolation of one call.
#[derive(Debug, Clone, PartialEq)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "independent switches of the settings"
)]
pub struct Policy {
    /// Isolate?
    pub enabled: bool,
    /// Keep the host network?
    pub network: bool,
    /// The workspace (absolute), if any.
    pub workspace: Option<PathBuf>,
    /// Writable workspace?
    pub writable: bool,
    /// Memory limit in bytes.
    pub memory: Option<u64>,
    /// Process limit.
    pub pids: u64,
    /// CPU cores.
    pub cpu: Option<f64>,
    /// Bytes kept per stream.
    pub max_output: u64,
    /// Largest file written.
    pub max_file_size: u64,
    /// `fs.*` path rules.
    pub fs: PathRules,
    /// Run unisolated where the host cannot isolate.
    pub allow_unisolated: bool,
}

impl Policy {
    /// The policy of a call: its step's block over the defaults; relative
    /// paths resolve against `base`.
    pub fn of(
        config: &IsolationConfig,
        step: Option<&Value>,
        base: &Path,
    ) -> Result<Policy, ActionError> {
        let block = Block::parse(step).map_err(ActionError::validation)?;
        let merged = config.defaults.clone().overlay(block);
        let absolute = |p: PathBuf| if p.is_absolute() { p } else { base.join(p) };
        if let Some(cpu) = merged.cpu.filter(|c| !(c.is_finite() && *c > 0.0)) {
            return Err(ActionError::validation(format!(
                "`isolation.cpu` must be a positive number of cores, not {cpu}"
            )));
        }
        Ok(Policy {
            enabled: merged.enabled.unwrap_or(false),
            network: merged.network.unwrap_or(false),
            workspace: merged.workspace.map(absolute),
            writable: merged.writable.unwrap_or(true),
            memory: merged.memory.map(|s| s.0),
            pids: merged.pids.unwrap_or(DEFAULT_PIDS).max(1),
            cpu: merged.cpu,
            max_output: merged.max_output.map_or(DEFAULT_MAX_OUTPUT, |s| s.0),
            max_file_size: merged.max_file_size.map_or(DEFAULT_MAX_FILE, |s| s.0),
            fs: merged.fs.unwrap_or_default().absolute(base),
            allow_unisolated: merged.allow_unisolated.unwrap_or(false),
        })
    }
}

/// The error for a host that cannot give the isolation asked for.
pub fn unavailable(missing: &[String]) -> ActionError {
    ActionError::new(
        opcode_vm::codes::R0125,
        "ISOLATION_ERROR",
        format!(
            "this host cannot isolate the step ({}); allow running unisolated with \
             `isolation.enabled: false` on the step or `isolation.allow_unisolated` in the settings",
            missing.join("; ")
        ),
        false,
    )
    .with_details(serde_json::json!({ "missing": missing }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("12"), Ok(12));
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("MiB").is_err());
    }

    #[test]
    fn step_blocks_override_defaults_and_unknown_keys_are_errors() {
        let config = IsolationConfig {
            defaults: Block::parse(Some(&json!({"enabled": true, "pids": 100, "memory": "1G"})))
                .unwrap(),
            helper: None,
        };
        let step = json!({"memory": 1_048_576, "network": true, "workspace": "work"});
        let policy = Policy::of(&config, Some(&step), Path::new("/base")).unwrap();
        assert!(policy.enabled && policy.network);
        assert_eq!((policy.pids, policy.memory), (100, Some(1 << 20)));
        assert_eq!(policy.workspace.as_deref(), Some(Path::new("/base/work")));
        let err = Policy::of(&config, Some(&json!({"memroy": 1})), Path::new("/")).unwrap_err();
        assert!(err.message.contains("memroy"), "{}", err.message);
        assert!(Policy::of(&config, Some(&json!({"cpu": -1})), Path::new("/")).is_err());
    }
}
