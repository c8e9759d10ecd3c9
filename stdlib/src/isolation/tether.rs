//! Processes tied to the one that started them: each asks the kernel for
//! SIGKILL when its parent dies, so no command outlives a daemon that
//! crashed or was killed, and a re-dispatch after the restart never runs
//! beside its predecessor. A command outside a sandbox is started through
//! the helper [`main`], which ties itself to the daemon, then becomes the
//! command.

use std::os::unix::process::CommandExt;
use std::path::Path;

/// The first argument that makes a binary start a command tied to it.
pub const ARG: &str = "__opcode_exec";
/// How the helper's own message starts when the command cannot start.
pub const PREFIX: &str = "opcode-exec: ";

/// Asks for SIGKILL when the parent dies (the setting does not survive a
/// change of credentials: call it after the last one), then checks the
/// parent is still `parent`: it may have died before.
pub(crate) fn die_with(parent: u32) -> Result<(), String> {
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
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

/// The helper's side: `ARG PARENT PROGRAM ARGS...`. Returns only if the
/// program cannot start (the exit code a shell would give).
pub fn main() -> i32 {
    let mut args = std::env::args_os().skip(2);
    let parent = args
        .next()
        .and_then(|p| p.to_str().and_then(|p| p.parse::<u32>().ok()));
    let (Some(parent), Some(program)) = (parent, args.next()) else {
        eprintln!("{PREFIX}usage: {ARG} PARENT_PID PROGRAM [ARGS...]");
        return 2;
    };
    if let Err(e) = die_with(parent) {
        eprintln!("{PREFIX}{e}");
        return 126;
    }
    let error = std::process::Command::new(&program).args(args).exec();
    let cwd = std::env::current_dir().unwrap_or_default();
    eprintln!(
        "{PREFIX}cannot start `{}` in {}: {error}",
        program.to_string_lossy(),
        cwd.display()
    );
    if error.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}
