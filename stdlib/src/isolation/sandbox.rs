//! The sandbox helper: the processes `shell.exec` starts to set a sandbox
//! up, in three stages of the same binary (spec/isolation.md, "How it is
//! built").
//!
//! 1. [`enter`], on the host: joins the call's cgroup, starts stage 2 and,
//!    once stage 2 is in its user namespace, writes the namespace's id maps
//!    (only a process outside the namespace may map an unprivileged id).
//! 2. [`namespaces`]: leaves every supplementary group, enters new user,
//!    mount, pid, ipc, uts, cgroup (and network) namespaces, becomes the
//!    sandbox user, builds the file system view ([`filesystem`]) and starts
//!    stage 3, the first process of the new pid namespace.
//! 3. [`init`]: mounts `/proc`, drops every capability, sets
//!    `no_new_privs`, installs the seccomp filter ([`lockdown`]), starts
//!    the command and reaps every process until the command exits. It
//!    lives exactly as long as the command, so nothing ever runs in a pid
//!    namespace whose init has gone, and its exit kills what is left.
//!
//! Where the host has no user namespaces and the operator allows that, stage
//! 2 stays root for the mounts and stage 3 becomes the sandbox user before
//! the command starts. No `unsafe` code is involved.

mod enter;
mod filesystem;
mod init;
pub mod lockdown;
mod namespaces;

use std::path::PathBuf;

use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

/// The first argument that makes a binary act as the helper.
pub const ARG: &str = "__opcode_sandbox";
/// The first argument of stage 2.
const NAMESPACES_ARG: &str = "__opcode_sandbox_namespaces";
/// The first argument of stage 3, the namespace's init.
const INIT_ARG: &str = "__opcode_sandbox_init";
/// The variable that carries the [`Spec`].
pub const SPEC_VAR: &str = "OPCODE_SANDBOX_SPEC";
/// The exit code of a setup failure (with a line on stderr starting [`PREFIX`]).
pub const SETUP_FAILED: i32 = 125;
/// How the helper's own messages start.
pub const PREFIX: &str = "opcode-sandbox: ";

/// What to run, and how.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "independent switches of one sandbox"
)]
pub struct Spec {
    /// The program (a path, or a name looked up in the `PATH` of `env`).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its whole environment.
    pub env: Vec<(String, String)>,
    /// Its working directory.
    pub cwd: PathBuf,
    /// The directory left as it is (writable unless `writable` is false).
    pub workspace: Option<PathBuf>,
    /// Is the workspace writable?
    pub writable: bool,
    /// Size of the private `/tmp`.
    pub tmp_size: u64,
    /// Largest file the command may write.
    pub max_file_size: u64,
    /// Most processes (an rlimit; the cgroup is what holds for root).
    pub pids: u64,
    /// Keep the host network?
    pub network: bool,
    /// The `cgroup.procs` files to join.
    pub cgroups: Vec<PathBuf>,
    /// The user and group the command runs as (on the host, too).
    pub uid: u32,
    /// See `uid`.
    pub gid: u32,
    /// Enter a user namespace (the sandbox user is its only id).
    pub user_namespace: bool,
    /// Install the seccomp filter.
    pub seccomp: bool,
    /// The process that started the helper (the daemon): each stage dies
    /// with its parent, so nothing outlives the daemon.
    pub parent: u32,
    /// Paths the command must not see (the daemon's own files, other
    /// runs' workspaces): covered by an empty file system, or by an empty
    /// file for a file.
    pub hidden: Vec<PathBuf>,
    /// Host paths bound at their own place after the workspace, each
    /// writable or not (an agent's home, a `.git` kept read-only).
    #[serde(default)]
    pub binds: Vec<Bind>,
}

/// A host path the sandbox sees at the same place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bind {
    /// The path (absolute).
    pub path: PathBuf,
    /// May the command write it?
    pub writable: bool,
}

/// The exit code a shell would report for a child's status: its code, or
/// 128 plus the signal that ended it; -1 when it could not be waited for.
pub fn exit_code(status: std::io::Result<std::process::ExitStatus>) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .ok()
        .and_then(|s| s.code().or_else(|| s.signal().map(|n| 128 + n)))
        .unwrap_or(-1)
}

/// The isolation error of a sandboxed command that exited with `code`,
/// when the helper's setup failed (its message among `stderr`'s lines).
pub fn setup_failure<'a>(
    code: i32,
    mut stderr: impl Iterator<Item = &'a str>,
) -> Option<opcode_vm::error::ActionError> {
    if code != SETUP_FAILED {
        return None;
    }
    let line = stderr.find_map(|l| l.strip_prefix(PREFIX))?;
    Some(super::unavailable(&[line.to_owned()]))
}

/// Runs the helper and exits if this process was started as one; returns
/// otherwise. Call it first thing in `main`, before any thread starts.
pub fn main_if_sandbox() {
    let stage = std::env::args_os().nth(1);
    let stage = match stage.as_ref().and_then(|a| a.to_str()) {
        Some(ARG) => enter::enter,
        Some(NAMESPACES_ARG) => namespaces::namespaces,
        Some(INIT_ARG) => init::init,
        _ => return,
    };
    let spec = std::env::var(SPEC_VAR)
        .map_err(|e| e.to_string())
        .and_then(|text| serde_json::from_str::<Spec>(&text).map_err(|e| e.to_string()));
    let code = match spec {
        Ok(spec) => stage(&spec),
        Err(e) => fail(&format!("no sandbox spec: {e}")),
    };
    std::process::exit(code);
}

/// Reports a setup failure; the exit code to return.
fn fail(message: &str) -> i32 {
    eprintln!("{PREFIX}{message}");
    SETUP_FAILED
}

/// The exit code a shell would report for a wait status.
fn code_of(status: WaitStatus) -> Option<i32> {
    match status {
        WaitStatus::Exited(_, code) => Some(code),
        WaitStatus::Signaled(_, signal, _) => Some(128 + signal as i32),
        _ => None,
    }
}

/// Waits for `child` and returns its exit code.
fn wait_for(child: Pid) -> i32 {
    loop {
        match waitpid(child, None) {
            Ok(status) => {
                if let Some(code) = code_of(status) {
                    return code;
                }
            }
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return fail(&format!("lost the sandbox: {e}")),
        }
    }
}

/// Starts the next stage (`arg`) of the helper; the spec passes in the
/// environment.
fn next_stage(arg: &str) -> std::io::Result<Pid> {
    std::process::Command::new("/proc/self/exe")
        .arg(arg)
        .spawn()
        .map(|child| Pid::from_raw(child.id() as i32))
}
