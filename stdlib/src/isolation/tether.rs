//! Processes tied to the one that started them: each asks the kernel for
//! a signal when its parent dies, so no command outlives a daemon that
//! crashed or was killed, and a re-dispatch after the restart never runs
//! beside its predecessor. A command outside a sandbox is started through
//! the helper [`main`]: it leads the command's process group, starts the
//! command in it and waits; when the daemon dies the kernel tells the
//! helper (SIGTERM), and it kills the whole group, the command's own
//! children and theirs included, then itself. (A sandboxed command dies
//! with its PID namespace instead.)

use std::path::Path;

/// The first argument that makes a binary start a command tied to it.
pub const ARG: &str = "__opcode_exec";
/// How the helper's own message starts when the command cannot start.
pub const PREFIX: &str = "opcode-exec: ";

/// Asks for SIGKILL when the parent dies (the setting does not survive a
/// change of credentials: call it after the last one), then checks the
/// parent is still `parent`: it may have died before.
pub(crate) fn die_with(parent: u32) -> Result<(), String> {
    signal_with(parent, nix::sys::signal::Signal::SIGKILL)
}

/// Asks for `signal` when the parent dies, then checks the parent is
/// still `parent`.
fn signal_with(parent: u32, signal: nix::sys::signal::Signal) -> Result<(), String> {
    nix::sys::prctl::set_pdeathsig(signal)
        .map_err(|e| format!("cannot tie the process to its parent: {e}"))?;
    if std::os::unix::process::parent_id() == parent {
        Ok(())
    } else {
        Err("the process that started it has gone".into())
    }
}

/// `program args` started through `helper`, tied to this process (set its
/// directory and environment as for the program itself); without a
/// helper, the program itself.
pub fn command(helper: Option<&Path>, program: &str, args: &[String]) -> tokio::process::Command {
    let Some(helper) = helper else {
        let mut command = tokio::process::Command::new(program);
        command.args(args);
        return command;
    };
    let mut command = tokio::process::Command::new(helper);
    command
        .arg(ARG)
        .arg(std::process::id().to_string())
        .arg(program)
        .args(args);
    command
}

/// The helper's side: `ARG PARENT PROGRAM ARGS...`, run as the leader of
/// the command's process group. Returns the command's exit code (128 + N
/// for a command ended by signal N), or the code a shell would give when
/// the program cannot start.
pub fn main() -> i32 {
    let mut args = std::env::args_os().skip(2);
    let parent = args
        .next()
        .and_then(|p| p.to_str().and_then(|p| p.parse::<u32>().ok()));
    let (Some(parent), Some(program)) = (parent, args.next()) else {
        eprintln!("{PREFIX}usage: {ARG} PARENT_PID PROGRAM [ARGS...]");
        return 2;
    };
    if let Err(e) = kill_group_on(nix::sys::signal::Signal::SIGTERM) {
        eprintln!("{PREFIX}{e}");
        return 126;
    }
    if let Err(e) = signal_with(parent, nix::sys::signal::Signal::SIGTERM) {
        eprintln!("{PREFIX}{e}");
        return 126;
    }
    let started = std::process::Command::new(&program).args(args).spawn();
    let mut command = match started {
        Ok(command) => command,
        Err(error) => {
            let cwd = std::env::current_dir().unwrap_or_default();
            eprintln!(
                "{PREFIX}cannot start `{}` in {}: {error}",
                program.to_string_lossy(),
                cwd.display()
            );
            return if error.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
        }
    };
    match command.wait() {
        Ok(status) => {
            use std::os::unix::process::ExitStatusExt;
            status
                .code()
                .or_else(|| status.signal().map(|n| 128 + n))
                .unwrap_or(126)
        }
        Err(e) => {
            eprintln!("{PREFIX}cannot wait for the command: {e}");
            126
        }
    }
}

/// Kills this process's whole group, itself included, when `signal`
/// arrives: the signal is blocked here (a command started later begins
/// with the mask reset) and waited for on a thread of its own. Call it
/// before any other thread starts.
fn kill_group_on(signal: nix::sys::signal::Signal) -> Result<(), String> {
    let set = nix::sys::signal::SigSet::from(signal);
    set.thread_block()
        .map_err(|e| format!("cannot watch for the daemon's end: {e}"))?;
    std::thread::Builder::new()
        .name("tether".into())
        .spawn(move || {
            if set.wait().is_ok() {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::getpgrp(),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        })
        .map(|_| ())
        .map_err(|e| format!("cannot watch for the daemon's end: {e}"))
}
