//! The `isolation` block, as a step or the settings write it.

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

use super::paths::PathRules;

/// The `isolation` block of a step or of the settings; every field
/// optional. The fields after `fs` belong to the settings only.
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
    /// The most the places the process may write (its workspace, writable
    /// binds) may hold while it runs.
    pub disk: Option<Size>,
    /// Paths `fs.*` actions may read and write, and never touch.
    pub fs: Option<PathRules>,
    /// Settings only: run unisolated where the host cannot isolate, instead
    /// of failing the step.
    pub allow_unisolated: Option<bool>,
    /// Settings only: the user id sandboxed processes run as (default 65534).
    pub uid: Option<u32>,
    /// Settings only: their group id (default 65534).
    pub gid: Option<u32>,
    /// Settings only: `false` runs sandboxes without a user namespace even
    /// where the host has them (the init then drops to the sandbox user).
    pub user_namespace: Option<bool>,
    /// Settings only: protections this host may lack without failing the
    /// step (`user_namespace`, `seccomp`).
    #[serde(default)]
    pub optional: Vec<Protection>,
    /// Settings only: where each run's fresh workspace is made.
    pub workspace_root: Option<PathBuf>,
    /// Settings only: the cgroup hierarchy (or delegated subtree) calls'
    /// cgroups are made in (default `/sys/fs/cgroup`).
    pub cgroup_root: Option<PathBuf>,
    /// Settings only: what steps of some templates or agents may widen.
    #[serde(default)]
    pub grants: Vec<Grant>,
}

/// The keys only the settings may use.
pub const SETTINGS_ONLY: &[&str] = &[
    "allow_unisolated",
    "uid",
    "gid",
    "user_namespace",
    "optional",
    "workspace_root",
    "cgroup_root",
    "grants",
];

/// A protection the operator may accept missing on a host that lacks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protection {
    /// A user namespace (the sandbox user's ids, locked mounts).
    UserNamespace,
    /// The seccomp filter.
    Seccomp,
}

/// An operator's allowance: steps of the template and/or agent it names may
/// ask for up to what it says (each field widens the settings' ceiling).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// The template whose steps it applies to.
    pub template: Option<String>,
    /// The agent whose runs it applies to (with `template`, both must match).
    pub agent: Option<String>,
    /// `false`: steps may turn isolation off.
    pub enabled: Option<bool>,
    /// `true`: steps may keep the host network.
    pub network: Option<bool>,
    /// Directories steps may use as their workspace.
    #[serde(default)]
    pub workspaces: Vec<PathBuf>,
    /// `true`: steps may write to a workspace the settings make read-only.
    pub writable: Option<bool>,
    /// The most memory a step may ask for.
    pub memory: Option<Size>,
    /// The most processes a step may ask for.
    pub pids: Option<u64>,
    /// The most CPU a step may ask for.
    pub cpu: Option<f64>,
    /// The most output a step may keep.
    pub max_output: Option<Size>,
    /// The largest file a step may write.
    pub max_file_size: Option<Size>,
    /// The most disk a step may ask for.
    pub disk: Option<Size>,
}

impl Grant {
    /// Does this grant apply to a run of `template` started by `agent`?
    pub fn applies(&self, template: Option<&str>, agent: Option<&str>) -> bool {
        let named = self.template.is_some() || self.agent.is_some();
        let matches = |wanted: &Option<String>, given: Option<&str>| {
            wanted.as_deref().is_none_or(|w| Some(w) == given)
        };
        named && matches(&self.template, template) && matches(&self.agent, agent)
    }
}

/// A size in bytes, written as a number or as text with a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
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
    /// Parses the settings' block (`null` is an empty one).
    pub fn parse(value: Option<&Value>) -> Result<Block, String> {
        match value {
            None | Some(Value::Null) => Ok(Block::default()),
            Some(v) => Block::deserialize(v).map_err(|e| format!("`isolation`: {e}")),
        }
    }

    /// Parses a step's block: the settings-only keys are refused.
    pub fn parse_step(value: Option<&Value>) -> Result<Block, String> {
        if let Some(Value::Object(map)) = value
            && let Some(key) = SETTINGS_ONLY.iter().find(|k| map.contains_key(**k))
        {
            return Err(format!(
                "`isolation.{key}` belongs to the daemon's settings, not to a step"
            ));
        }
        Block::parse(value)
    }
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
    fn steps_cannot_use_settings_keys_and_grants_need_a_name() {
        let err = Block::parse_step(Some(&json!({"uid": 0}))).unwrap_err();
        assert!(err.contains("isolation.uid"), "{err}");
        assert!(Block::parse_step(Some(&json!({"memroy": 1}))).is_err());
        let grant = Grant {
            template: Some("deploy".into()),
            ..Grant::default()
        };
        assert!(grant.applies(Some("deploy"), Some("bot")));
        assert!(!grant.applies(Some("other"), None));
        assert!(!Grant::default().applies(Some("deploy"), None));
    }
}
