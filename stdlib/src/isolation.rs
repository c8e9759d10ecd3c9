//! Isolation of the processes actions start, and the paths `fs.*` may use.
//!
//! A step's `isolation` block may only narrow what the embedding's
//! settings allow ([`ceiling`]); merged over them it becomes the call's
//! [`Policy`]. `shell.exec` under an enabled policy runs in a sandbox:
//! new user, network, pid, mount, ipc, uts and cgroup namespaces, the
//! sandbox user's ids, no capabilities, a seccomp filter, a cgroup with the
//! policy's limits, a read-only view of the host but for the workspace
//! (see `spec/isolation.md` and `spec/security.md`).

pub mod block;
pub mod ceiling;
pub mod cgroup;
pub mod disk;
pub mod give;
pub mod host;
pub mod paths;
pub mod sandbox;
pub mod spawn;
pub mod tether;

use std::path::{Path, PathBuf};

use opcode_vm::error::ActionError;

pub use self::block::{Block, Grant, Protection, Size, parse_size};
pub use self::ceiling::Ceiling;
pub use self::paths::PathRules;
use crate::call::Call;

/// What the embedding decides: the settings' block, where the sandbox
/// helper is, and what no step may see.
#[derive(Debug, Clone, Default)]
pub struct IsolationConfig {
    /// The settings' block: defaults for every step, and their ceiling.
    pub defaults: Block,
    /// The program that sets a sandbox up (a binary whose `main` calls
    /// [`sandbox::main_if_sandbox`]); isolation needs one.
    pub helper: Option<PathBuf>,
    /// The embedding's own files (its database, settings, vault key):
    /// hidden from sandboxes and denied to `fs.*`; resolved once, when
    /// the config is made ([`IsolationConfig::new`]).
    hidden: Vec<PathBuf>,
    /// The settings' `fs` rules resolved once, when every entry is an
    /// absolute path (relative ones name places in each run's workspace).
    settings_fs: Option<PathRules>,
}

impl IsolationConfig {
    /// The config of `defaults`, sandboxes set up by `helper`, and the
    /// embedding's own files `hidden`, their symlinks resolved now: the
    /// embedding made them, and resolving them per `fs.*` call was most
    /// of its cost (a dozen path walks). The settings' absolute `fs`
    /// paths are resolved now too, for the same reason.
    pub fn new(defaults: Block, helper: Option<PathBuf>, hidden: Vec<PathBuf>) -> IsolationConfig {
        let settings_fs = defaults
            .fs
            .as_ref()
            .map_or(Some(PathRules::default()), PathRules::resolved_if_absolute);
        IsolationConfig {
            defaults,
            helper,
            hidden: hidden.into_iter().map(|p| paths::resolve(&p)).collect(),
            settings_fs,
        }
    }

    /// The embedding's own files, resolved.
    pub fn hidden(&self) -> &[PathBuf] {
        &self.hidden
    }

    /// The cgroup hierarchy sandboxes go in.
    pub fn cgroup_root(&self) -> PathBuf {
        self.defaults
            .cgroup_root
            .clone()
            .unwrap_or_else(|| PathBuf::from(cgroup::ROOT))
    }
}

/// Processes in a sandbox at once unless the policy says.
pub const DEFAULT_PIDS: u64 = 1024;
/// What the places a sandboxed call may write (its workspace, writable
/// binds) may hold while it runs, unless its step or the settings say:
/// past it the call is killed and the step fails with R0130.
pub const DEFAULT_DISK: u64 = 2 << 30;
/// Memory a sandboxed call may use unless its step or the settings say
/// (where the host offers the memory controller): past it the call is
/// killed and the step fails with R0130.
pub const DEFAULT_MEMORY: u64 = 2 << 30;
/// The most processes a cgroup may be given (the kernel's `PID_MAX_LIMIT`).
pub const MAX_PIDS: u64 = 4_194_304;
/// Bytes kept of each output stream unless the policy says.
pub const DEFAULT_MAX_OUTPUT: u64 = 10 * 1024 * 1024;
/// Largest file a sandboxed process may write unless the policy says.
pub const DEFAULT_MAX_FILE: u64 = 1 << 30;
/// The user and group sandboxed processes run as unless the settings say
/// (`nobody` on Debian).
pub const DEFAULT_SANDBOX_ID: u32 = 65534;

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
    /// The most the places the call writes may hold.
    pub disk: u64,
    /// `fs.*` path rules.
    pub fs: PathRules,
    /// Run unisolated where the host cannot isolate.
    pub allow_unisolated: bool,
    /// The sandbox user.
    pub uid: u32,
    /// The sandbox group.
    pub gid: u32,
    /// Protections the host may lack.
    pub optional: Vec<Protection>,
    /// Use a user namespace where the host has them.
    pub user_namespace: bool,
    /// What a sandbox must not show: the embedding's files and the other
    /// runs' workspaces.
    pub hidden: Vec<PathBuf>,
    /// The cgroup hierarchy calls' cgroups are made in.
    pub cgroup_root: PathBuf,
    /// Paths bound into the sandbox besides the workspace.
    pub binds: Vec<sandbox::Bind>,
}

impl Policy {
    /// The policy of `call`: its step's block over the settings, refused
    /// if it widens them (R0129). Relative paths resolve against `base`
    /// (the run's workspace, or the embedding's directory).
    pub fn of(config: &IsolationConfig, call: &Call, base: &Path) -> Result<Policy, ActionError> {
        let step = Block::parse_step(call.isolation.as_ref()).map_err(ActionError::validation)?;
        let settings = &config.defaults;
        let ceiling = Ceiling::of(settings, call.template.as_deref(), call.agent_id.as_deref());
        let name = grant_name(call.template.as_deref(), call.agent_id.as_deref());
        if let Some(widening) = ceiling.widenings(&step, &name).into_iter().next() {
            return Err(widened(&widening));
        }
        if let Some(pids) = step
            .pids
            .or(settings.pids)
            .filter(|p| !(1..=MAX_PIDS).contains(p))
        {
            return Err(ActionError::validation(format!(
                "`isolation.pids` must be between 1 and {MAX_PIDS} (the kernel's most), not {pids}"
            )));
        }
        if let Some(cpu) = step
            .cpu
            .or(settings.cpu)
            .filter(|c| !(c.is_finite() && *c > 0.0))
        {
            return Err(ActionError::validation(format!(
                "`isolation.cpu` must be a positive number of cores, not {cpu}"
            )));
        }
        let enabled_by_settings = settings.enabled.unwrap_or(false);
        let absolute = |p: &Path| paths::normalize(&base.join(p));
        let workspace = step
            .workspace
            .as_deref()
            .map(absolute)
            .or_else(|| call.workspace.clone());
        let writable = step.writable.or(settings.writable).unwrap_or(true);
        let mut outer = match &config.settings_fs {
            Some(resolved) => resolved.clone(),
            None => settings.fs.clone().unwrap_or_default().absolute(base),
        };
        if enabled_by_settings && let Some(ws) = call.workspace.as_ref().or(workspace.as_ref()) {
            // Isolated runs keep `fs.*` in their workspace, unless the
            // settings list more.
            let ws = paths::resolve(ws);
            if writable {
                outer.write.push(ws);
            } else {
                outer.read.push(ws);
            }
        }
        outer.deny.extend(config.hidden.iter().cloned());
        let fs = match step.fs {
            Some(rules) => outer.narrowed_by(rules.absolute(base)),
            None => outer,
        };
        let mut hidden = config.hidden.clone();
        hidden.extend(settings.workspace_root.iter().cloned());
        Ok(Policy {
            enabled: step.enabled.or(settings.enabled).unwrap_or(false),
            network: step.network.or(settings.network).unwrap_or(false),
            workspace,
            writable,
            memory: step.memory.or(settings.memory).map(|s| s.0),
            pids: step.pids.or(settings.pids).unwrap_or(DEFAULT_PIDS).max(1),
            cpu: step.cpu.or(settings.cpu),
            max_output: step
                .max_output
                .or(settings.max_output)
                .map_or(DEFAULT_MAX_OUTPUT, |s| s.0),
            disk: step.disk.or(settings.disk).map_or(DEFAULT_DISK, |s| s.0),
            max_file_size: step
                .max_file_size
                .or(settings.max_file_size)
                .map_or(DEFAULT_MAX_FILE, |s| s.0),
            fs,
            allow_unisolated: settings.allow_unisolated.unwrap_or(false),
            uid: settings.uid.unwrap_or(DEFAULT_SANDBOX_ID),
            gid: settings.gid.unwrap_or(DEFAULT_SANDBOX_ID),
            optional: settings.optional.clone(),
            user_namespace: settings.user_namespace.unwrap_or(true),
            hidden,
            cgroup_root: config.cgroup_root(),
            binds: Vec::new(),
        })
    }
}

/// How a grant for `template` and `agent` names them in settings JSON.
pub fn grant_name(template: Option<&str>, agent: Option<&str>) -> String {
    match (template, agent) {
        (Some(t), _) => format!("\"template\": {t:?}"),
        (None, Some(a)) => format!("\"agent\": {a:?}"),
        (None, None) => "\"template\": \"NAME\"".into(),
    }
}

/// R0130 for a sandboxed call stopped because `full` held more than `quota`.
pub fn over_disk(full: &disk::Full, quota: u64) -> ActionError {
    let message = format!(
        "{} held {} bytes, more than the {quota} a sandboxed call may fill (isolation.disk); \
         the call was stopped",
        full.place.display(),
        full.bytes
    );
    ActionError::new(opcode_vm::codes::R0130, "LIMIT_EXCEEDED", message, false).with_details(
        serde_json::json!({"limit": "disk", "value": full.bytes, "max": quota,
                           "place": full.place.to_string_lossy()}),
    )
}

/// The error for a step whose block widens the settings (R0129).
pub fn widened(widening: &ceiling::Widening) -> ActionError {
    ActionError::new(
        opcode_vm::codes::R0129,
        "ISOLATION_WIDENED",
        format!(
            "`isolation.{}`: {}; only the daemon's settings may allow it \
             (`\"isolation\": {{\"grants\": [{}]}}`)",
            widening.key, widening.message, widening.grant
        ),
        false,
    )
    .with_details(serde_json::json!({"key": widening.key}))
}

/// The error for a host that cannot give the isolation asked for.
pub fn unavailable(missing: &[String]) -> ActionError {
    ActionError::new(
        opcode_vm::codes::R0125,
        "ISOLATION_ERROR",
        format!(
            "this host cannot isolate the step ({}); the operator may accept a missing \
             protection with `isolation.optional` or `isolation.allow_unisolated` in the settings",
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

    fn call(isolation: serde_json::Value) -> Call {
        Call {
            isolation: Some(isolation),
            template: Some("t".into()),
            workspace: Some(PathBuf::from("/runs/r1")),
            ..Call::default()
        }
    }

    #[test]
    fn step_blocks_narrow_the_settings_and_keep_fs_in_the_workspace() {
        let config = IsolationConfig::new(
            Block::parse(Some(&json!({"enabled": true, "pids": 100, "memory": "1G"}))).unwrap(),
            None,
            vec![PathBuf::from("/etc/opcode")],
        );
        let step = json!({"memory": 1_048_576, "workspace": "work"});
        let policy = Policy::of(&config, &call(step), Path::new("/runs/r1")).unwrap();
        assert!(policy.enabled && !policy.network);
        assert_eq!((policy.pids, policy.memory), (100, Some(1 << 20)));
        assert_eq!(
            policy.workspace.as_deref(),
            Some(Path::new("/runs/r1/work"))
        );
        let write = paths::Access::Write;
        assert!(policy.fs.check(Path::new("/runs/r1/x"), write).is_ok());
        assert!(policy.fs.check(Path::new("/etc/passwd"), write).is_err());
        assert!(
            policy
                .fs
                .check(Path::new("/etc/opcode/key"), paths::Access::Read)
                .is_err()
        );
        let err = Policy::of(&config, &call(json!({"memroy": 1})), Path::new("/")).unwrap_err();
        assert!(err.message.contains("memroy"), "{}", err.message);
        assert!(Policy::of(&config, &call(json!({"cpu": -1})), Path::new("/")).is_err());
        let absurd = Policy::of(&config, &call(json!({"pids": 0})), Path::new("/")).unwrap_err();
        assert!(
            absurd.message.contains("between 1 and"),
            "{}",
            absurd.message
        );
        let wide =
            Policy::of(&config, &call(json!({"network": true})), Path::new("/")).unwrap_err();
        assert_eq!(wide.code, "R0129");
    }
}
