//! What this host can give a sandbox, read once from the kernel's files.

use std::path::Path;
use std::sync::OnceLock;

use super::cgroup;

/// The protections this host provides.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "independent facts about the host"
)]
pub struct Host {
    /// This process runs as root.
    pub root: bool,
    /// The kernel has namespaces.
    pub namespaces: bool,
    /// User namespaces may be created.
    pub user_namespaces: bool,
    /// Seccomp filters may be installed.
    pub seccomp: bool,
    /// The cgroup hierarchy, if a usable one is mounted.
    pub cgroup: Option<cgroup::Version>,
}

impl Host {
    /// This host, probed once per process.
    pub fn get() -> &'static Host {
        static HOST: OnceLock<Host> = OnceLock::new();
        HOST.get_or_init(Host::probe)
    }

    fn probe() -> Host {
        let max_user_namespaces = std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok());
        Host {
            root: nix::unistd::Uid::effective().is_root(),
            namespaces: Path::new("/proc/self/ns/pid").exists(),
            user_namespaces: Path::new("/proc/self/ns/user").exists()
                && max_user_namespaces.is_some_and(|n| n > 0),
            seccomp: Path::new("/proc/sys/kernel/seccomp/actions_avail").exists(),
            cgroup: cgroup::detect(Path::new(cgroup::ROOT)),
        }
    }

    /// Each protection as (name, provided), for reports such as `opcode doctor`.
    pub fn protections(&self) -> Vec<(&'static str, bool)> {
        vec![
            ("running as root", self.root),
            ("namespaces", self.namespaces),
            ("user namespaces", self.user_namespaces),
            ("seccomp filters", self.seccomp),
            ("cgroups", self.cgroup.is_some()),
        ]
    }
}
