//! Stage 1, on the host: tie itself to the daemon, join the cgroup, start
//! stage 2, map its user namespace's ids, relay its exit code.

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::{NAMESPACES_ARG, Spec, fail, next_stage, wait_for};
use crate::isolation::tether::die_with;

/// How long stage 2 may take to enter its namespaces.
const UNSHARE_WAIT: Duration = Duration::from_secs(10);

/// Stage 1.
pub(super) fn enter(spec: &Spec) -> i32 {
    if let Err(e) = die_with(spec.parent) {
        return fail(&e);
    }
    for procs in &spec.cgroups {
        if let Err(e) = std::fs::write(procs, "0") {
            return fail(&format!("cannot join {}: {e}", procs.display()));
        }
    }
    let child = match next_stage(NAMESPACES_ARG) {
        Ok(child) => child,
        Err(e) => return fail(&format!("cannot start the sandbox: {e}")),
    };
    if spec.user_namespace
        && let Err(e) = map_ids(child, spec)
    {
        let _ = kill(child, Signal::SIGKILL);
        let _ = wait_for(child);
        return fail(&e);
    }
    wait_for(child)
}

/// Waits until `child` has its own user namespace, then maps the sandbox
/// user and group, and nothing else, into it.
fn map_ids(child: Pid, spec: &Spec) -> Result<(), String> {
    let own = std::fs::read_link("/proc/self/ns/user")
        .map_err(|e| format!("cannot read this process's user namespace: {e}"))?;
    let proc = Path::new("/proc").join(child.to_string());
    let started = Instant::now();
    loop {
        match std::fs::read_link(proc.join("ns/user")) {
            Ok(theirs) if theirs != own => break,
            Ok(_) if started.elapsed() < UNSHARE_WAIT => {
                std::thread::sleep(Duration::from_micros(200));
            }
            Ok(_) => return Err("the sandbox did not enter its user namespace".into()),
            // It exited: its own message says why.
            Err(_) => return Ok(()),
        }
    }
    let write = |file: &str, text: String| {
        std::fs::write(proc.join(file), text)
            .map_err(|e| format!("cannot write the user namespace's {file}: {e}"))
    };
    write("setgroups", "deny".into())?;
    write("gid_map", format!("{0} {0} 1\n", spec.gid))?;
    write("uid_map", format!("{0} {0} 1\n", spec.uid))
}
