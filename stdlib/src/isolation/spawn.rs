//! Starting a process in a sandbox: its cgroup, its namespaces, and the
//! helper that finishes the setup (see [`super::sandbox`]).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::cgroup::{Cgroup, Limits};
use super::host::Host;
use super::sandbox::{ARG, SPEC_VAR, Spec};
use super::{Policy, Protection, unavailable};
use opcode_vm::error::ActionError;

/// The `PATH` of a sandboxed process unless the step sets one.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A command ready to spawn in a sandbox, and the cgroup it will join.
#[derive(Debug)]
pub struct Sandboxed {
    /// The helper command (spawn it as usual; stdio passes through).
    pub command: tokio::process::Command,
    /// The call's cgroup (dropping it kills what is left and removes it).
    pub cgroup: Cgroup,
}

/// The environment a sandboxed process gets: a minimal `PATH`, `HOME`
/// and `LANG`, overridden by what the step passes, and nothing else.
pub fn scrubbed_env(given: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = [
        ("PATH", DEFAULT_PATH),
        ("HOME", "/tmp"),
        ("LANG", "C.UTF-8"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    for (key, value) in given {
        env.retain(|(k, _)| *k != key);
        env.push((key, value));
    }
    env
}

/// Which protections the sandbox gets: (user namespace, seccomp), or what
/// this host lacks that the operator did not accept missing.
pub fn protections(host: &Host, policy: &Policy) -> Result<(bool, bool), Vec<String>> {
    let mut missing = Vec::new();
    if !host.root {
        missing.push("the daemon is not running as root".to_owned());
    }
    if !host.namespaces {
        missing.push("the kernel has no namespaces".to_owned());
    }
    let accepts = |p: Protection| policy.optional.contains(&p);
    let user_namespaces = host.user_namespaces && policy.user_namespace;
    if !host.user_namespaces && policy.user_namespace && !accepts(Protection::UserNamespace) {
        missing.push(
            "user namespaces are disabled (/proc/sys/user/max_user_namespaces); accept it with \
             isolation.optional [\"user_namespace\"]"
                .to_owned(),
        );
    }
    if !host.seccomp && !accepts(Protection::Seccomp) {
        missing.push(
            "the kernel has no seccomp filters; accept it with isolation.optional [\"seccomp\"]"
                .to_owned(),
        );
    }
    if missing.is_empty() {
        Ok((user_namespaces, host.seccomp))
    } else {
        Err(missing)
    }
}

/// Prepares `program args` to run under `policy` through `helper`, or says
/// what this host lacks.
pub fn sandboxed(
    policy: &Policy,
    helper: Option<&Path>,
    program: &str,
    args: Vec<String>,
    env: Vec<(String, String)>,
    cwd: &Path,
) -> Result<Sandboxed, ActionError> {
    let protected = protections(Host::get(), policy);
    let (Some(helper), Ok((user_namespace, seccomp))) = (helper, &protected) else {
        let mut missing = protected.err().unwrap_or_default();
        if helper.is_none() {
            missing.push("this program has no sandbox helper".to_owned());
        }
        return Err(unavailable(&missing));
    };
    let limits = Limits {
        memory: policy.memory,
        default_memory: Some(super::DEFAULT_MEMORY),
        pids: policy.pids,
        cpu: policy.cpu,
    };
    let cgroup = Cgroup::create(&policy.cgroup_root, &unique_name(), &limits)
        .map_err(|m| unavailable(&m))?;
    let spec = Spec {
        program: program.to_owned(),
        args,
        env: scrubbed_env(env),
        cwd: cwd.to_path_buf(),
        workspace: policy.workspace.clone(),
        writable: policy.writable,
        tmp_size: policy.memory.unwrap_or(256 << 20).min(1 << 30),
        max_file_size: policy.max_file_size,
        pids: policy.pids,
        network: policy.network,
        cgroups: cgroup.procs_files(),
        uid: policy.uid,
        gid: policy.gid,
        user_namespace: *user_namespace,
        seccomp: *seccomp,
        parent: std::process::id(),
        hidden: policy.hidden.clone(),
        binds: policy.binds.clone(),
    };
    let mut command = tokio::process::Command::new(helper);
    command
        .arg(ARG)
        .env_clear()
        .env(SPEC_VAR, serde_json::to_string(&spec).unwrap_or_default());
    Ok(Sandboxed { command, cgroup })
}

/// A cgroup name unique in this host.
fn unique_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{}-{}-{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isolation::Block;

    fn policy(settings: &serde_json::Value) -> Policy {
        let config = crate::isolation::IsolationConfig {
            defaults: Block::parse(Some(settings)).unwrap(),
            ..crate::isolation::IsolationConfig::default()
        };
        Policy::of(&config, &crate::call::Call::default(), Path::new("/")).unwrap()
    }

    #[test]
    fn a_missing_protection_fails_closed_unless_the_operator_accepts_it() {
        let bare = Host {
            root: true,
            namespaces: true,
            user_namespaces: false,
            seccomp: false,
            cgroup: None,
        };
        let missing = protections(&bare, &policy(&serde_json::json!({}))).unwrap_err();
        assert!(
            missing[0].contains("user namespaces") && missing[1].contains("seccomp"),
            "{missing:?}"
        );
        let accepted = policy(&serde_json::json!({"optional": ["user_namespace", "seccomp"]}));
        assert_eq!(protections(&bare, &accepted), Ok((false, false)));
        let full = Host {
            user_namespaces: true,
            seccomp: true,
            ..bare.clone()
        };
        assert_eq!(
            protections(&full, &policy(&serde_json::json!({}))),
            Ok((true, true))
        );
        let without = policy(&serde_json::json!({"user_namespace": false}));
        assert_eq!(protections(&full, &without), Ok((false, true)));
        let unprivileged = Host {
            root: false,
            ..full
        };
        assert!(
            protections(&unprivileged, &without).unwrap_err()[0].contains("not running as root")
        );
    }
}
