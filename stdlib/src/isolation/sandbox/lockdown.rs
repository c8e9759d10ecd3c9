//! What a sandboxed command may no longer do: no capability in any set
//! (the bounding set included, so no `execve` brings one back), the
//! sandbox user's ids, `no_new_privs`, and a seccomp filter that refuses
//! the system calls a command has no business making (spec/security.md).

use std::collections::BTreeMap;

use caps::CapSet;
use nix::unistd::{Gid, Uid, setgroups, setresgid, setresuid};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::Spec;

/// System calls refused with `EPERM`: mounting and namespaces, tracing
/// other processes, the kernel's keyrings, modules, kexec, BPF, perf,
/// handles that bypass path checks, io_uring (whose operations no filter
/// sees), and the host's clock, swap, accounting and reboot.
const REFUSED: &[i64] = &[
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_setns,
    libc::SYS_unshare,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_kcmp,
    libc::SYS_pidfd_getfd,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_userfaultfd,
    libc::SYS_fanotify_init,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_syslog,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_iopl,
    libc::SYS_ioperm,
    libc::SYS_lookup_dcookie,
    libc::SYS_uselib,
    libc::SYS_vhangup,
];

/// `clone` flags that make new namespaces.
const NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWTIME as u64,
];

/// The x32 ABI's system call numbers are the x86-64 ones with this bit:
/// each refused call is refused under both.
const X32_BIT: i64 = 0x4000_0000;

/// Applies the lockdown to this process; what it starts inherits it.
pub(super) fn apply(spec: &Spec) -> Result<(), String> {
    let caps_error = |e: caps::errors::CapsError| format!("cannot drop capabilities: {e}");
    caps::clear(None, CapSet::Bounding).map_err(caps_error)?;
    if !spec.user_namespace {
        // Root until here (for the mounts): become the sandbox user.
        let (uid, gid) = (Uid::from_raw(spec.uid), Gid::from_raw(spec.gid));
        setgroups(&[]).map_err(|e| format!("cannot leave the supplementary groups: {e}"))?;
        setresgid(gid, gid, gid).map_err(|e| format!("cannot become group {}: {e}", spec.gid))?;
        setresuid(uid, uid, uid).map_err(|e| format!("cannot become user {}: {e}", spec.uid))?;
    }
    for set in [
        CapSet::Ambient,
        CapSet::Inheritable,
        CapSet::Effective,
        CapSet::Permitted,
    ] {
        caps::clear(None, set).map_err(caps_error)?;
    }
    nix::sys::prctl::set_dumpable(false)
        .map_err(|e| format!("cannot make the init undumpable: {e}"))?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| format!("cannot set no_new_privs: {e}"))?;
    // Set again: dropping the capabilities (and the user) cleared it.
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
        .map_err(|e| format!("cannot tie the init to its parent: {e}"))?;
    if spec.seccomp {
        for filter in filters()? {
            seccompiler::apply_filter(&filter)
                .map_err(|e| format!("cannot install the seccomp filter: {e}"))?;
        }
    }
    Ok(())
}

/// The seccomp filters: [`REFUSED`] and namespace-making `clone` calls get
/// `EPERM`; `clone3`, whose flags a filter cannot read, gets `ENOSYS`, so
/// the C library falls back to `clone`.
pub fn filters() -> Result<Vec<BpfProgram>, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| format!("no seccomp filter for this architecture: {e:?}"))?;
    let mut refused: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let x32 = |nr: i64| {
        if arch == TargetArch::x86_64 {
            vec![nr, nr | X32_BIT]
        } else {
            vec![nr]
        }
    };
    for &nr in REFUSED {
        for nr in x32(nr) {
            refused.insert(nr, Vec::new());
        }
    }
    let mut namespace_rules = Vec::new();
    for &flag in NAMESPACE_FLAGS {
        let condition = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(flag),
            flag,
        )
        .map_err(|e| format!("seccomp: {e}"))?;
        namespace_rules
            .push(SeccompRule::new(vec![condition]).map_err(|e| format!("seccomp: {e}"))?);
    }
    for nr in x32(libc::SYS_clone) {
        refused.insert(nr, namespace_rules.clone());
    }
    let clone3: BTreeMap<i64, Vec<SeccompRule>> = x32(libc::SYS_clone3)
        .into_iter()
        .map(|nr| (nr, Vec::new()))
        .collect();
    let build = |rules, errno: i32| -> Result<BpfProgram, String> {
        let errno = u32::try_from(errno).unwrap_or(1);
        SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(errno),
            arch,
        )
        .and_then(TryInto::try_into)
        .map_err(|e| format!("seccomp: {e}"))
    };
    Ok(vec![
        build(refused, libc::EPERM)?,
        build(clone3, libc::ENOSYS)?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_compile_for_this_architecture() {
        let filters = filters().unwrap();
        assert_eq!(filters.len(), 2);
        // Each refused call and its x32 twin is one comparison at least.
        assert!(filters[0].len() > REFUSED.len() * 2, "{}", filters[0].len());
    }
}
