//! The sandbox helper: the process `shell.exec` starts, already in new
//! namespaces and its cgroup, that finishes the setup and runs the command.
//!
//! The helper joins the call's cgroup, enters new mount, pid, ipc, uts (and
//! network) namespaces, and starts itself again as the first process of
//! the new pid namespace (its init). The init makes the host read-only but
//! for the workspace, mounts a private `/tmp` and a `/proc` of the
//! namespace, starts the command and reaps everything until the command
//! exits. The init lives exactly as long as the command, so no process is
//! ever started in a namespace whose init has gone, and its exit kills
//! whatever the command left behind.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use nix::mount::{MsFlags, mount};
use nix::sched::CloneFlags;
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

/// The first argument that makes a binary act as the helper.
pub const ARG: &str = "__opcode_sandbox";
/// The first argument of the helper's second stage, the namespace's init.
const INIT_ARG: &str = "__opcode_sandbox_init";
/// The variable that carries the [`Spec`].
pub const SPEC_VAR: &str = "OPCODE_SANDBOX_SPEC";
/// The exit code of a setup failure (with a line on stderr starting [`PREFIX`]).
pub const SETUP_FAILED: i32 = 125;
/// How the helper's own messages start.
pub const PREFIX: &str = "opcode-sandbox: ";

/// What to run, and how.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
}

/// Runs the helper and exits if this process was started as one; returns
/// otherwise. Call it first thing in `main`, before any thread starts.
pub fn main_if_sandbox() {
    let stage = std::env::args_os().nth(1);
    let init = match stage.as_ref().and_then(|a| a.to_str()) {
        Some(ARG) => false,
        Some(INIT_ARG) => true,
        _ => return,
    };
    let spec = std::env::var(SPEC_VAR)
        .map_err(|e| e.to_string())
        .and_then(|text| serde_json::from_str::<Spec>(&text).map_err(|e| e.to_string()));
    let code = match spec {
        Ok(spec) if init => self::init(&spec),
        Ok(spec) => enter(&spec),
        Err(e) => fail(&format!("no sandbox spec: {e}")),
    };
    std::process::exit(code);
}

fn fail(message: &str) -> i32 {
    eprintln!("{PREFIX}{message}");
    SETUP_FAILED
}

/// Joins the cgroup, enters the namespaces, starts the init and relays its
/// exit code.
fn enter(spec: &Spec) -> i32 {
    for procs in &spec.cgroups {
        if let Err(e) = std::fs::write(procs, "0") {
            return fail(&format!("cannot join {}: {e}", procs.display()));
        }
    }
    let mut flags = CloneFlags::CLONE_NEWNS
        | CloneFlags::CLONE_NEWPID
        | CloneFlags::CLONE_NEWIPC
        | CloneFlags::CLONE_NEWUTS;
    if !spec.network {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    if let Err(e) = nix::sched::unshare(flags) {
        return fail(&format!("cannot enter new namespaces: {e}"));
    }
    let init = std::process::Command::new("/proc/self/exe")
        .arg(INIT_ARG)
        .spawn();
    match init {
        Ok(child) => wait_for(Pid::from_raw(child.id() as i32)),
        Err(e) => fail(&format!("cannot start the sandbox's init: {e}")),
    }
}

/// The exit code a shell would report for a wait status.
fn code_of(status: WaitStatus) -> Option<i32> {
    match status {
        WaitStatus::Exited(_, code) => Some(code),
        WaitStatus::Signaled(_, signal, _) => Some(128 + signal as i32),
        _ => None,
    }
}

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

/// PID 1 of the namespace.
fn init(spec: &Spec) -> i32 {
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    if let Err(e) = filesystem(spec) {
        return fail(&e);
    }
    let _ = nix::unistd::sethostname("opcode-sandbox");
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

/// A read-only host but for the workspace; private `/tmp` and `/dev/shm`;
/// the namespace's own `/proc`.
fn filesystem(spec: &Spec) -> Result<(), String> {
    let none: Option<&str> = None;
    let private = MsFlags::MS_REC | MsFlags::MS_PRIVATE;
    mount(none, "/", none, private, none)
        .map_err(|e| format!("cannot make mounts private: {e}"))?;
    let workspace = match &spec.workspace {
        Some(ws) => {
            let bind = MsFlags::MS_BIND | MsFlags::MS_REC;
            mount(Some(ws.as_path()), ws.as_path(), none, bind, none)
                .map_err(|e| format!("cannot mount the workspace {}: {e}", ws.display()))?;
            let handle = std::fs::File::open(ws)
                .map_err(|e| format!("cannot open the workspace {}: {e}", ws.display()))?;
            Some((ws.clone(), handle))
        }
        None => None,
    };
    for (point, options) in mounts()? {
        if point.starts_with("/proc") || workspace.as_ref().is_some_and(|(ws, _)| *ws == point) {
            continue;
        }
        let flags =
            MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | kept_flags(&options);
        if let Err(e) = mount(none, point.as_path(), none, flags, none)
            && point == Path::new("/")
        {
            return Err(format!("cannot make the host read-only: {e}"));
        }
    }
    let tmpfs = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    let size = format!("size={},mode=1777", spec.tmp_size);
    for dir in ["/tmp", "/dev/shm"] {
        if Path::new(dir).is_dir() {
            mount(
                Some("tmpfs"),
                dir,
                Some("tmpfs"),
                tmpfs,
                Some(size.as_str()),
            )
            .map_err(|e| format!("cannot mount a private {dir}: {e}"))?;
        }
    }
    if let Some((ws, handle)) = &workspace {
        if ws.starts_with("/tmp") || ws.starts_with("/dev/shm") {
            // The private tmp hides it: bind it back from the open handle.
            std::fs::create_dir_all(ws)
                .map_err(|e| format!("cannot recreate {}: {e}", ws.display()))?;
            let source = format!("/proc/self/fd/{}", handle.as_raw_fd());
            mount(
                Some(source.as_str()),
                ws.as_path(),
                none,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                none,
            )
            .map_err(|e| format!("cannot mount the workspace {}: {e}", ws.display()))?;
        }
        if !spec.writable {
            let flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
            mount(none, ws.as_path(), none, flags, none)
                .map_err(|e| format!("cannot make the workspace read-only: {e}"))?;
        }
    }
    let proc_flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(Some("proc"), "/proc", Some("proc"), proc_flags, none)
        .map_err(|e| format!("cannot mount /proc: {e}"))?;
    Ok(())
}

/// Mount points and their options, from `/proc/self/mountinfo`.
fn mounts() -> Result<Vec<(PathBuf, String)>, String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let mut points: Vec<(PathBuf, String)> = text
        .lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let point = fields.nth(4)?;
            let options = fields.next()?;
            Some((PathBuf::from(unescape(point)), options.to_owned()))
        })
        .collect();
    points.sort();
    points.dedup_by(|a, b| a.0 == b.0);
    Ok(points)
}

/// Mountinfo escapes spaces and such as `\040`.
fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && let Ok(n) = u8::from_str_radix(&text[i + 1..i + 4], 8)
        {
            out.push(n);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The per-mount flags a read-only remount must keep.
fn kept_flags(options: &str) -> MsFlags {
    options.split(',').fold(MsFlags::empty(), |flags, option| {
        flags
            | match option {
                "nosuid" => MsFlags::MS_NOSUID,
                "nodev" => MsFlags::MS_NODEV,
                "noexec" => MsFlags::MS_NOEXEC,
                "noatime" => MsFlags::MS_NOATIME,
                "nodiratime" => MsFlags::MS_NODIRATIME,
                "relatime" => MsFlags::MS_RELATIME,
                _ => MsFlags::empty(),
            }
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_mountinfo_escapes_and_flags() {
        assert_eq!(unescape(r"/mnt/with\040space"), "/mnt/with space");
        let flags = kept_flags("rw,nosuid,nodev,relatime");
        assert!(flags.contains(MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_RELATIME));
        assert!(!flags.contains(MsFlags::MS_NOEXEC));
    }
}
