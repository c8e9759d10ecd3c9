//! Who owns a workflow: lease owners are processes, named
//! `host:pid:start` (`start` is the process's start time in clock ticks
//! since boot, so a reused pid is a different owner). A lease held by a
//! process of this host that no longer exists is taken over at once; any
//! other lease is waited out until it expires.

use std::sync::OnceLock;

/// This process's owner name.
pub fn current() -> &'static str {
    static OWNER: OnceLock<String> = OnceLock::new();
    OWNER.get_or_init(|| {
        let pid = std::process::id();
        format!("{}:{pid}:{}", hostname(), start_ticks(pid).unwrap_or(0))
    })
}

/// Is `owner` a process of this host that has exited?
pub fn is_dead(owner: &str) -> bool {
    let mut parts = owner.rsplitn(3, ':');
    let (Some(start), Some(pid), Some(host)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    if host != hostname() {
        return false;
    }
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
        return false;
    };
    if !std::path::Path::new("/proc/self/stat").exists() {
        // No procfs: cannot tell, so wait for the lease to expire.
        return false;
    }
    start_ticks(pid) != Some(start)
}

/// State letter and start time of a process, from `/proc/<pid>/stat`;
/// `None` when there is no such process or it has exited (a zombie
/// waiting to be reaped has exited too).
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; fields after it don't.
    let mut fields = stat[stat.rfind(')')? + 2..].split_whitespace();
    let state = fields.next()?;
    if matches!(state, "Z" | "X" | "x") {
        return None;
    }
    // Field 22 (starttime) is the 19th after the state (field 3).
    fields.nth(18)?.parse().ok()
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive() {
        assert!(!is_dead(current()));
        assert!(start_ticks(std::process::id()).is_some());
    }

    #[test]
    fn a_finished_process_is_dead() {
        let mut child = std::process::Command::new("true").spawn().expect("spawns");
        let pid = child.id();
        let owner = format!("{}:{pid}:{}", hostname(), start_ticks(pid).unwrap_or(1));
        child.wait().expect("waits");
        assert!(is_dead(&owner));
    }

    #[test]
    fn other_hosts_are_never_presumed_dead() {
        assert!(!is_dead("elsewhere:1:1"));
        assert!(!is_dead("garbage"));
    }
}
