//! Stage 3, PID 1 of the sandbox's pid namespace: its own `/proc`, the
//! lockdown, the command, and the reaping of every process until the
//! command exits.

use std::path::{Path, PathBuf};

use nix::mount::{MsFlags, mount};
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::wait::waitpid;
use nix::unistd::Pid;

use super::{PREFIX, Spec, code_of, fail, lockdown};

const NONE: Option<&str> = None;

/// Parts of `/proc` that stay read-only even for a process that could
/// write the rest of its own `/proc`.
const PROC_READ_ONLY: &[&str] = &[
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/proc/irq",
    "/proc/bus",
    "/proc/fs",
];

/// Stage 3.
pub(super) fn init(spec: &Spec) -> i32 {
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    if let Err(e) = proc_filesystem() {
        return fail(&e);
    }
    let _ = nix::unistd::sethostname("opcode-sandbox");
    if let Err(e) = lockdown::apply(spec) {
        return fail(&e);
    }
    let command = match start(spec) {
        Ok(pid) => pid,
        Err(code) => return code,
    };
    loop {
        match waitpid(Pid::from_raw(-1), None) {
            Ok(status) if status.pid() == Some(command) => {
                if let Some(code) = code_of(status) {
                    return code;
                }
            }
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return fail("the command vanished"),
        }
    }
}

/// The namespace's own `/proc`, with [`PROC_READ_ONLY`] read-only.
fn proc_filesystem() -> Result<(), String> {
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(Some("proc"), "/proc", Some("proc"), flags, NONE)
        .map_err(|e| format!("cannot mount /proc: {e}"))?;
    for path in PROC_READ_ONLY {
        if !Path::new(path).exists() {
            continue;
        }
        mount(
            Some(*path),
            *path,
            NONE,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            NONE,
        )
        .map_err(|e| format!("cannot bind {path}: {e}"))?;
        let read_only = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | flags;
        mount(NONE, *path, NONE, read_only, NONE)
            .map_err(|e| format!("cannot make {path} read-only: {e}"))?;
    }
    Ok(())
}

/// Starts the command with its rlimits, directory and environment; its
/// pid, or the exit code to report.
fn start(spec: &Spec) -> Result<Pid, i32> {
    let limits = [
        (Resource::RLIMIT_CORE, 0),
        (Resource::RLIMIT_NOFILE, 4096),
        (Resource::RLIMIT_FSIZE, spec.max_file_size),
        (Resource::RLIMIT_NPROC, spec.pids),
    ];
    for (resource, value) in limits {
        let _ = setrlimit(resource, value, value);
    }
    let Some(program) = find_program(spec) else {
        eprintln!("{PREFIX}cannot run `{}`: not found", spec.program);
        return Err(127);
    };
    std::process::Command::new(program)
        .args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&spec.cwd)
        .spawn()
        .map(|child| Pid::from_raw(child.id() as i32))
        .map_err(|e| {
            eprintln!(
                "{PREFIX}cannot run `{}` in {}: {e}",
                spec.program,
                spec.cwd.display()
            );
            if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            }
        })
}

/// The program's path: as given when it has a `/`, else the first match in
/// the `PATH` the command gets.
fn find_program(spec: &Spec) -> Option<PathBuf> {
    if spec.program.contains('/') {
        return Some(spec.cwd.join(&spec.program));
    }
    let path = spec
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map_or("/usr/bin:/bin", |(_, v)| v);
    path.split(':')
        .map(|dir| Path::new(dir).join(&spec.program))
        .find(|candidate| candidate.is_file())
}
