//! One cgroup per sandboxed call, with memory, pids and cpu limits: cgroup
//! v2 (a `cgroup2fs` at /sys/fs/cgroup) or v1 (one hierarchy per controller).

use std::fs;
use std::path::{Path, PathBuf};

/// Where cgroups are mounted unless the settings say (`isolation.cgroup_root`).
pub const ROOT: &str = "/sys/fs/cgroup";
/// The parent of every cgroup this runtime makes.
const PARENT: &str = "opcode";

/// The limits of one call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Memory in bytes, as asked: a host that cannot limit it fails closed.
    pub memory: Option<u64>,
    /// Memory in bytes when none was asked: set where the host offers the
    /// memory controller, left out where it does not.
    pub default_memory: Option<u64>,
    /// Most processes.
    pub pids: u64,
    /// CPU cores.
    pub cpu: Option<f64>,
}

/// Which cgroup version the host has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// The unified hierarchy.
    V2,
    /// A hierarchy per controller.
    V1,
}

/// The cgroup version of the hierarchy at `root`, if any controller is usable.
pub fn detect(root: &Path) -> Option<Version> {
    if root.join("cgroup.controllers").is_file() {
        Some(Version::V2)
    } else if ["memory", "pids", "cpu"]
        .iter()
        .any(|c| root.join(c).join("tasks").is_file())
    {
        Some(Version::V1)
    } else {
        None
    }
}

/// The controllers the hierarchy at `root` offers: those `cgroup.controllers`
/// lists (v2), or the mounted ones among memory, pids and cpu (v1).
pub fn controllers(root: &Path) -> Vec<String> {
    match detect(root) {
        Some(Version::V2) => fs::read_to_string(root.join("cgroup.controllers"))
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
        Some(Version::V1) => ["memory", "pids", "cpu"]
            .iter()
            .filter(|c| root.join(c).join("tasks").is_file())
            .map(|c| (*c).to_owned())
            .collect(),
        None => Vec::new(),
    }
}

/// A call's cgroup: one directory (v2) or one per controller (v1).
#[derive(Debug)]
pub struct Cgroup {
    version: Version,
    dirs: Vec<(&'static str, PathBuf)>,
}

/// What the limits did to the call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hits {
    /// The memory limit killed a process.
    pub memory: bool,
    /// A fork was refused by the process limit.
    pub pids: bool,
}

impl Cgroup {
    /// Makes the cgroup `name` with `limits` in the hierarchy at `root`;
    /// on failure, the list of what could not be set up (nothing is left
    /// behind).
    pub fn create(root: &Path, name: &str, limits: &Limits) -> Result<Cgroup, Vec<String>> {
        let Some(version) = detect(root) else {
            return Err(vec![format!("no cgroup filesystem at {}", root.display())]);
        };
        let mut group = Cgroup {
            version,
            dirs: Vec::new(),
        };
        let result = match version {
            Version::V2 => group.setup_v2(root, name, limits),
            Version::V1 => group.setup_v1(root, name, limits),
        };
        match result {
            Ok(()) => Ok(group),
            Err(missing) => {
                let _ = group.remove();
                Err(missing)
            }
        }
    }

    fn setup_v2(&mut self, root: &Path, name: &str, limits: &Limits) -> Result<(), Vec<String>> {
        let parent = root.join(PARENT);
        let _ = fs::create_dir_all(&parent);
        // Each controller on its own: one the hierarchy lacks must not keep
        // the others off (its limit is reported missing below).
        for controller in ["+memory", "+pids", "+cpu"] {
            let _ = fs::write(root.join("cgroup.subtree_control"), controller);
            let _ = fs::write(parent.join("cgroup.subtree_control"), controller);
        }
        let dir = parent.join(name);
        fs::create_dir(&dir)
            .map_err(|e| vec![format!("cannot create cgroup {}: {e}", dir.display())])?;
        self.dirs.push(("unified", dir.clone()));
        let mut missing = Vec::new();
        let mut set = |file: &str, value: String, what: &str| {
            if let Err(e) = fs::write(dir.join(file), value) {
                missing.push(format!("{what} limit ({file}: {e})"));
            }
        };
        if let Some(bytes) = limits.memory {
            set("memory.max", bytes.to_string(), "memory");
            set("memory.swap.max", "0".into(), "memory");
        } else if let Some(bytes) = limits.default_memory {
            let _ = fs::write(dir.join("memory.max"), bytes.to_string());
            let _ = fs::write(dir.join("memory.swap.max"), "0");
        }
        set("pids.max", limits.pids.to_string(), "process");
        if let Some(cores) = limits.cpu {
            set("cpu.max", format!("{} 100000", quota(cores)), "cpu");
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(missing)
        }
    }

    fn setup_v1(&mut self, root: &Path, name: &str, limits: &Limits) -> Result<(), Vec<String>> {
        let mut missing = Vec::new();
        let mut wanted: Vec<(&'static str, Vec<(&str, String)>)> =
            vec![("pids", vec![("pids.max", limits.pids.to_string())])];
        let default_memory = limits
            .default_memory
            .filter(|_| limits.memory.is_none() && root.join("memory").join("tasks").is_file());
        if let Some(bytes) = limits.memory.or(default_memory) {
            wanted.push((
                "memory",
                vec![
                    ("memory.limit_in_bytes", bytes.to_string()),
                    ("memory.memsw.limit_in_bytes", bytes.to_string()),
                ],
            ));
        }
        if let Some(cores) = limits.cpu {
            wanted.push((
                "cpu",
                vec![
                    ("cpu.cfs_period_us", "100000".into()),
                    ("cpu.cfs_quota_us", quota(cores).to_string()),
                ],
            ));
        }
        for (controller, files) in wanted {
            let dir = root.join(controller).join(PARENT).join(name);
            if let Err(e) = fs::create_dir_all(&dir) {
                missing.push(format!("{controller} cgroup ({}: {e})", dir.display()));
                continue;
            }
            self.dirs.push((controller, dir.clone()));
            for (file, value) in files {
                let path = dir.join(file);
                // Swap accounting may be off: then the memory limit alone holds.
                if file == "memory.memsw.limit_in_bytes" && !path.exists() {
                    continue;
                }
                if let Err(e) = fs::write(&path, value) {
                    missing.push(format!("{controller} limit ({file}: {e})"));
                }
            }
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(missing)
        }
    }

    /// The `cgroup.procs` files a process writes `0` to, to join.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs
            .iter()
            .map(|(_, d)| d.join("cgroup.procs"))
            .collect()
    }

    /// Which limits were hit.
    pub fn hits(&self) -> Hits {
        let mut hits = Hits::default();
        for (controller, dir) in &self.dirs {
            let read = |file: &str| fs::read_to_string(dir.join(file)).unwrap_or_default();
            let counter = |text: &str, key: &str| {
                text.lines()
                    .filter_map(|l| l.split_once(' '))
                    .any(|(k, v)| k == key && v.trim().parse::<u64>().unwrap_or(0) > 0)
            };
            match (self.version, *controller) {
                (Version::V2, _) => {
                    hits.memory |= counter(&read("memory.events"), "oom_kill");
                    hits.pids |= counter(&read("pids.events"), "max");
                }
                (Version::V1, "memory") => {
                    hits.memory |= counter(&read("memory.oom_control"), "oom_kill")
                        || read("memory.failcnt").trim().parse::<u64>().unwrap_or(0) > 0;
                }
                (Version::V1, "pids") => hits.pids |= counter(&read("pids.events"), "max"),
                _ => {}
            }
        }
        hits
    }

    /// Kills every process left in the cgroup.
    pub fn kill_all(&self) {
        for (_, dir) in &self.dirs {
            if self.version == Version::V2 && write_existing(&dir.join("cgroup.kill"), "1") {
                continue;
            }
            for _ in 0..50 {
                let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
                let pids: Vec<i32> = procs
                    .lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect();
                if pids.is_empty() {
                    break;
                }
                for pid in pids {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
    }

    /// Kills what is left and removes the directories; the error names
    /// those that stayed (a process in them survived).
    pub fn remove(&mut self) -> Result<(), String> {
        self.kill_all();
        let mut stayed = Vec::new();
        for (_, dir) in self.dirs.drain(..) {
            for _ in 0..50 {
                if fs::remove_dir(&dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            if dir.exists() {
                stayed.push(dir.display().to_string());
            }
        }
        if stayed.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "processes survived in its cgroup {}",
                stayed.join(", ")
            ))
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

/// Kills what is left in the cgroups of processes that have died (a daemon
/// killed before it could remove its own) and removes them; how many.
/// Call it at start, before interrupted steps are dispatched again.
pub fn sweep(root: &Path) -> usize {
    let Some(version) = detect(root) else {
        return 0;
    };
    let parents = match version {
        Version::V2 => vec![root.join(PARENT)],
        Version::V1 => ["memory", "pids", "cpu"]
            .iter()
            .map(|c| root.join(c).join(PARENT))
            .collect(),
    };
    let mut swept = 0;
    for parent in parents {
        let Ok(children) = fs::read_dir(&parent) else {
            continue;
        };
        for child in children.flatten() {
            let name = child.file_name();
            let Some(owner) = name.to_str().and_then(owner_of) else {
                continue;
            };
            if owner != std::process::id() && Path::new("/proc").join(owner.to_string()).exists() {
                continue;
            }
            let mut stale = Cgroup {
                version,
                dirs: vec![("stale", child.path())],
            };
            let _ = stale.remove();
            swept += 1;
        }
    }
    swept
}

/// The process that made cgroup `name` (named `PID-N-NANOS`).
fn owner_of(name: &str) -> Option<u32> {
    let (pid, rest) = name.split_once('-')?;
    rest.contains('-').then_some(())?;
    pid.parse().ok()
}

/// Writes `text` to `file` if it exists (never creates one).
fn write_existing(file: &Path, text: &str) -> bool {
    use std::io::Write;
    fs::OpenOptions::new()
        .write(true)
        .open(file)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .is_ok()
}

/// CPU quota in microseconds per 100 ms period.
fn quota(cores: f64) -> u64 {
    ((cores * 100_000.0).round() as u64).max(1000)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_cgroups_of_dead_processes_are_swept_and_the_living_ones_kept() {
        let root = tempfile::tempdir().unwrap();
        fs::write(root.path().join("cgroup.controllers"), "pids\n").unwrap();
        let parent = root.path().join(PARENT);
        // No process has pid 4194304 (the kernel's limit is below it).
        let dead = parent.join("4194304-0-1");
        let alive = parent.join("1-0-1");
        let mine = parent.join(format!("{}-3-4", std::process::id()));
        let other = parent.join("not-ours");
        for dir in [&dead, &alive, &mine, &other] {
            fs::create_dir_all(dir).unwrap();
        }
        assert_eq!(sweep(root.path()), 2);
        assert!(!dead.exists() && !mine.exists());
        assert!(alive.exists() && other.exists());
    }

    #[test]
    fn the_controllers_of_each_hierarchy() {
        let v2 = tempfile::tempdir().unwrap();
        fs::write(v2.path().join("cgroup.controllers"), "cpuset cpu pids\n").unwrap();
        assert_eq!(controllers(v2.path()), ["cpuset", "cpu", "pids"]);
        let v1 = tempfile::tempdir().unwrap();
        fs::create_dir(v1.path().join("pids")).unwrap();
        fs::write(v1.path().join("pids/tasks"), "").unwrap();
        assert_eq!(controllers(v1.path()), ["pids"]);
        assert!(controllers(&v1.path().join("none")).is_empty());
    }

    #[test]
    fn only_names_this_runtime_gives_have_an_owner() {
        assert_eq!(owner_of("123-4-5678"), Some(123));
        assert_eq!(owner_of("123-4"), None);
        assert_eq!(owner_of("user.slice"), None);
        assert_eq!(owner_of("x-4-5"), None);
    }
}
