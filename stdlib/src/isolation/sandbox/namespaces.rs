//! Stage 2: new namespaces, the sandbox user, the file system view, then
//! the namespace's init.

use std::time::{Duration, Instant};

use caps::{CapSet, Capability};
use nix::sched::CloneFlags;
use nix::unistd::{Gid, Uid, setgroups, setresgid, setresuid};

use super::{INIT_ARG, Spec, fail, filesystem, next_stage, wait_for};
use crate::isolation::tether::die_with;

/// How long stage 1 may take to write the id maps.
const MAP_WAIT: Duration = Duration::from_secs(10);

/// Stage 2.
pub(super) fn namespaces(spec: &Spec) -> i32 {
    let stage1 = std::os::unix::process::parent_id();
    // Root's supplementary groups would follow it into the sandbox.
    if let Err(e) = setgroups(&[]) {
        return fail(&format!("cannot leave the supplementary groups: {e}"));
    }
    let mut flags = CloneFlags::CLONE_NEWNS
        | CloneFlags::CLONE_NEWPID
        | CloneFlags::CLONE_NEWIPC
        | CloneFlags::CLONE_NEWUTS
        | CloneFlags::CLONE_NEWCGROUP;
    if !spec.network {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    if spec.user_namespace {
        flags |= CloneFlags::CLONE_NEWUSER;
    }
    if let Err(e) = nix::sched::unshare(flags) {
        let what = if spec.user_namespace {
            "a user namespace and new namespaces"
        } else {
            "new namespaces"
        };
        return fail(&format!("cannot enter {what}: {e}"));
    }
    if spec.user_namespace
        && let Err(e) = become_sandbox_user(spec)
    {
        return fail(&e);
    }
    if let Err(e) = filesystem::build(spec) {
        return fail(&e);
    }
    // After the last change of credentials, which would clear it.
    if let Err(e) = die_with(stage1) {
        return fail(&e);
    }
    match next_stage(INIT_ARG) {
        Ok(init) => wait_for(init),
        Err(e) => fail(&format!("cannot start the sandbox's init: {e}")),
    }
}

/// Waits for the id maps, then takes the sandbox user's ids: from here on
/// this process is that user on the host, with capabilities only over the
/// namespaces it owns.
fn become_sandbox_user(spec: &Spec) -> Result<(), String> {
    let started = Instant::now();
    while std::fs::read_to_string("/proc/self/uid_map").map_or(true, |m| m.trim().is_empty()) {
        if started.elapsed() > MAP_WAIT {
            return Err("the user namespace's ids were never mapped".into());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let (uid, gid) = (Uid::from_raw(spec.uid), Gid::from_raw(spec.gid));
    setresgid(gid, gid, gid).map_err(|e| format!("cannot become group {}: {e}", spec.gid))?;
    setresuid(uid, uid, uid).map_err(|e| format!("cannot become user {}: {e}", spec.uid))?;
    // A user other than root keeps no capability across `execve` but the
    // ambient ones: the init needs these two (to mount `/proc` and to empty
    // the bounding set) and drops them before the command starts.
    for cap in [Capability::CAP_SYS_ADMIN, Capability::CAP_SETPCAP] {
        caps::raise(None, CapSet::Inheritable, cap)
            .and_then(|()| caps::raise(None, CapSet::Ambient, cap))
            .map_err(|e| format!("cannot keep {cap} for the init: {e}"))?;
    }
    Ok(())
}
