//! Where runs work (spec/security.md, "Workspaces"): a fresh private
//! directory per run under a root, owned by the sandbox user and removed
//! when the run that made it ends; or one directory the operator chose,
//! shared by every run. Child runs work in their parent's workspace.

use std::path::{Path, PathBuf};

/// The workspaces of an executor's runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Workspaces {
    /// `root/<run>` per run, made on first use (mode 0700, owned by
    /// `owner` when this process may give it away).
    Fresh {
        /// Where they are made (mode 0711: searchable, not listable).
        root: PathBuf,
        /// The sandbox user and group.
        owner: Option<(u32, u32)>,
    },
    /// One directory for every run.
    Fixed(PathBuf),
}

impl Workspaces {
    /// The default root: `/var/lib/opcode/workspaces` for root (a path
    /// the sandbox user can reach), else `<data_dir>/workspaces`.
    pub fn default_root(data_dir: &Path) -> PathBuf {
        if nix::unistd::Uid::effective().is_root() {
            PathBuf::from("/var/lib/opcode/workspaces")
        } else {
            data_dir.join("workspaces")
        }
    }

    /// The workspace of a run without a parent.
    pub fn for_run(&self, run_id: &str) -> PathBuf {
        match self {
            Workspaces::Fresh { root, .. } => root.join(dir_name(run_id)),
            Workspaces::Fixed(dir) => dir.clone(),
        }
    }

    /// The root fresh workspaces are made in (hidden from every sandbox
    /// but for its own workspace).
    pub fn root(&self) -> Option<&Path> {
        match self {
            Workspaces::Fresh { root, .. } => Some(root),
            Workspaces::Fixed(_) => None,
        }
    }

    /// Makes `workspace` if it is a fresh one that does not exist yet, at
    /// once: made and given to the sandbox user under a name of its own,
    /// then renamed into place, so that no process dying half-way leaves a
    /// workspace the sandbox cannot use; one an older version left with the
    /// wrong owner is given to the sandbox user. One `lstat` when it exists
    /// (every effectful call asks), the root made only when missing.
    pub fn ensure(&self, workspace: &Path) -> std::io::Result<()> {
        let Workspaces::Fresh { root, owner } = self else {
            return Ok(());
        };
        if workspace.parent() != Some(root.as_path()) {
            return Ok(());
        }
        if let Ok(meta) = std::fs::symlink_metadata(workspace) {
            // One an older version left half made (its owner never set)
            // is given to the sandbox user now.
            use std::os::unix::fs::MetadataExt;
            return match owner {
                Some((uid, gid)) if meta.is_dir() && (meta.uid(), meta.gid()) != (*uid, *gid) => {
                    give(workspace, *owner)
                }
                _ => Ok(()),
            };
        }
        let making = making_name(workspace);
        match make_private(&making) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                make_root(root)?;
                make_private(&making)?;
            }
            made => made?,
        }
        let placed = give(&making, *owner).and_then(|()| {
            nix::fcntl::renameat2(
                nix::fcntl::AT_FDCWD,
                &making,
                nix::fcntl::AT_FDCWD,
                workspace,
                nix::fcntl::RenameFlags::RENAME_NOREPLACE,
            )
            .map_err(std::io::Error::from)
        });
        match placed {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = std::fs::remove_dir(&making);
                // Another call made it meanwhile.
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    Ok(())
                } else {
                    Err(e)
                }
            }
        }
    }

    /// The workspaces under the root, by name (a run id, or a digest of
    /// one), for the sweep at start: what a process killed after its run
    /// ended left behind. Workspaces a dead process was making are removed
    /// here; another live process's are left alone.
    pub fn made(&self) -> Vec<(String, PathBuf)> {
        let Some(root) = self.root() else {
            return Vec::new();
        };
        let Ok(entries) = std::fs::read_dir(root) else {
            return Vec::new();
        };
        let mut made = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            match making_pid(&name) {
                Some(pid) if !alive(pid) => remove_now(&entry.path()),
                Some(_) => {}
                None => made.push((name, entry.path())),
            }
        }
        made
    }

    /// Removes `workspace` if it is a fresh one, on a blocking thread: a
    /// removal may wait on the disk (ext4 mounted with `discard` trims the
    /// freed blocks before `rmdir` returns). A run that never made its
    /// workspace costs one `lstat`.
    pub async fn remove(&self, workspace: &Path) {
        let Workspaces::Fresh { root, .. } = self else {
            return;
        };
        if workspace.parent() != Some(root.as_path())
            || std::fs::symlink_metadata(workspace).is_err()
        {
            return;
        }
        let workspace = workspace.to_path_buf();
        let _ = tokio::task::spawn_blocking(move || remove_now(&workspace)).await;
    }
}

/// Removes a run's workspace and what the run left in it.
fn remove_now(workspace: &Path) {
    // Most runs leave their workspace empty (one `rmdir`).
    let removed = match std::fs::remove_dir(workspace) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => std::fs::remove_dir_all(workspace),
        _ => Ok(()),
    };
    if let Err(e) = removed
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(workspace = %workspace.display(), error = %e, "cannot remove a run's workspace");
    }
}

/// The name a workspace is made under before it is renamed into place:
/// `.NAME.PID.N.making`.
fn making_name(workspace: &Path) -> PathBuf {
    static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = workspace.file_name().unwrap_or_default().to_string_lossy();
    workspace.with_file_name(format!(".{name}.{}.{n}.making", std::process::id()))
}

/// The process making `name`, if it is a workspace being made.
fn making_pid(name: &str) -> Option<i32> {
    let rest = name.strip_prefix('.')?.strip_suffix(".making")?;
    let mut parts = rest.rsplitn(3, '.');
    let _n = parts.next()?;
    parts.next()?.parse().ok()
}

/// Is process `pid` alive (it may be another user's)?
fn alive(pid: i32) -> bool {
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(e) => e == nix::errno::Errno::EPERM,
    }
}

/// Gives `dir` to the sandbox user, when this process may.
fn give(dir: &Path, owner: Option<(u32, u32)>) -> std::io::Result<()> {
    if let Some((uid, gid)) = owner
        && nix::unistd::Uid::effective().is_root()
    {
        nix::unistd::chown(
            dir,
            Some(nix::unistd::Uid::from_raw(uid)),
            Some(nix::unistd::Gid::from_raw(gid)),
        )
        .map_err(std::io::Error::from)?;
    }
    Ok(())
}

/// Makes `dir` with mode 0700 (its parent must exist).
fn make_private(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(dir)
}

/// Makes the root of fresh workspaces, mode 0711: searchable, not listable.
fn make_root(root: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o711)
        .create(root)?;
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o711))
}

/// A run id as a directory name: itself when it is a plain name, else a
/// digest of it (an id is never a path).
fn dir_name(run_id: &str) -> String {
    let plain = !run_id.is_empty()
        && !run_id.starts_with('.')
        && run_id.len() <= 128
        && run_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if plain {
        return run_id.to_owned();
    }
    let digest = <sha2::Sha256 as sha2::Digest>::digest(run_id.as_bytes());
    opcode_stdlib::actions::crypto::hex(&digest[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fresh_workspaces_are_private_and_removed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let workspaces = Workspaces::Fresh {
            root: dir.path().join("ws"),
            owner: None,
        };
        let ws = workspaces.for_run("01a2-run");
        workspaces.ensure(&ws).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&dir.path().join("ws")), mode(&ws)), (0o711, 0o700));
        workspaces.remove(&ws).await;
        assert!(!ws.exists());
        // Made again (the root is there now), and removed with what a
        // run left in it.
        workspaces.ensure(&ws).unwrap();
        workspaces.ensure(&ws).unwrap();
        std::fs::create_dir(ws.join("out")).unwrap();
        std::fs::write(ws.join("out/report.txt"), "done").unwrap();
        workspaces.remove(&ws).await;
        assert!(!ws.exists());
        // Ids that are not plain names never become paths.
        assert_eq!(
            workspaces.for_run("../../etc").parent(),
            Some(dir.path().join("ws").as_path())
        );
        // Only workspaces it made are removed.
        workspaces.remove(dir.path()).await;
        assert!(dir.path().exists());
    }

    #[test]
    fn a_workspace_half_made_by_a_dead_process_is_swept_and_never_used() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let workspaces = Workspaces::Fresh {
            root: root.clone(),
            owner: None,
        };
        let ws = workspaces.for_run("run-1");
        workspaces.ensure(&ws).unwrap();
        // A dead process's making (no pid is this large) and a live one's.
        let dead = root.join(".run-2.2147483646.0.making");
        let live = root.join(format!(".run-3.{}.7.making", std::process::id()));
        for making in [&dead, &live] {
            std::fs::create_dir(making).unwrap();
        }
        let made = workspaces.made();
        assert_eq!(made, vec![("run-1".to_owned(), ws.clone())]);
        assert!(!dead.exists() && live.exists());
        // Nothing made under its own name is left once it is in place.
        let names: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    /// A workspace an older version left owned by the daemon (killed
    /// between its `mkdir` and its `chown`) is given to the sandbox user.
    #[test]
    fn a_workspace_left_with_the_wrong_owner_is_repaired() {
        use std::os::unix::fs::MetadataExt;
        if !nix::unistd::Uid::effective().is_root() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let workspaces = Workspaces::Fresh {
            root: dir.path().to_path_buf(),
            owner: Some((65534, 65534)),
        };
        let ws = workspaces.for_run("left-behind");
        std::fs::create_dir(&ws).unwrap();
        assert_eq!(std::fs::metadata(&ws).unwrap().uid(), 0);
        workspaces.ensure(&ws).unwrap();
        let meta = std::fs::metadata(&ws).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (65534, 65534));
    }
}
