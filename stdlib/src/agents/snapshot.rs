//! What changed in a workspace while an agent worked: a snapshot of every
//! file before and after, `.git` left out. A file is modified when its
//! contents changed: compared by digest for files up to [`HASHED_FILE`]
//! (while a snapshot has hashed less than [`HASHED_TOTAL`]), by size,
//! modification and change times and inode for the others (the change
//! time moves on every write and cannot be set back, so an edit that keeps
//! the size and restores the modification time is still seen).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sha2::Digest;

/// The most files a snapshot records.
pub const MAX_FILES: usize = 50_000;
/// Files up to this size are compared by contents.
pub const HASHED_FILE: u64 = 1 << 20;
/// The most bytes one snapshot reads to hash files.
pub const HASHED_TOTAL: u64 = 256 << 20;

/// What a snapshot knows of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    /// Its contents' SHA-256.
    Contents([u8; 32]),
    /// Size, modification time, change time (each seconds and
    /// nanoseconds) and inode.
    Metadata(u64, i64, i64, i64, i64, u64),
}

/// The files of a workspace, by path relative to it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Snapshot {
    files: BTreeMap<PathBuf, Seen>,
    /// More files than [`MAX_FILES`] were there.
    pub cut: bool,
}

impl Snapshot {
    /// Records the files under `root` (symbolic links as links).
    pub fn take(root: &Path) -> Snapshot {
        let mut snapshot = Snapshot::default();
        let mut hashed = 0u64;
        let mut pending = vec![root.to_path_buf()];
        while let Some(dir) = pending.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                if entry.file_name() == ".git" {
                    continue;
                }
                let path = entry.path();
                let Ok(meta) = std::fs::symlink_metadata(&path) else {
                    continue;
                };
                if meta.is_dir() {
                    pending.push(path);
                    continue;
                }
                if snapshot.files.len() >= MAX_FILES {
                    snapshot.cut = true;
                    return snapshot;
                }
                let relative = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
                let small = meta.is_file() && meta.len() <= HASHED_FILE;
                let digest = (small && hashed + meta.len() <= HASHED_TOTAL)
                    .then(|| std::fs::read(&path).ok())
                    .flatten();
                let seen = match digest {
                    Some(bytes) => {
                        hashed += bytes.len() as u64;
                        Seen::Contents(sha2::Sha256::digest(&bytes).into())
                    }
                    None => Seen::Metadata(
                        meta.len(),
                        meta.mtime(),
                        meta.mtime_nsec(),
                        meta.ctime(),
                        meta.ctime_nsec(),
                        meta.ino(),
                    ),
                };
                snapshot.files.insert(relative, seen);
            }
        }
        snapshot
    }

    /// [`Snapshot::take`] on a blocking thread, off the runtime's workers.
    pub async fn of(root: &Path) -> Snapshot {
        let root = root.to_path_buf();
        tokio::task::spawn_blocking(move || Snapshot::take(&root))
            .await
            .unwrap_or_default()
    }

    /// What changed from `self` to `after`: `[{path, change}]`, change
    /// `added`, `modified` or `deleted`.
    pub fn changes(&self, after: &Snapshot) -> Vec<Value> {
        let mut changes = Vec::new();
        for (path, before) in &self.files {
            match after.files.get(path) {
                None => changes.push(change(path, "deleted")),
                Some(now) if now != before => changes.push(change(path, "modified")),
                Some(_) => {}
            }
        }
        for path in after.files.keys() {
            if !self.files.contains_key(path) {
                changes.push(change(path, "added"));
            }
        }
        changes.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
        changes
    }
}

fn change(path: &Path, kind: &str) -> Value {
    json!({"path": path.to_string_lossy(), "change": kind})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_modified_and_deleted_files_but_not_git() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join("src/a.rs"), "a").unwrap();
        std::fs::write(root.join("b.txt"), "b").unwrap();
        let before = Snapshot::take(root);
        std::fs::write(root.join("src/a.rs"), "changed").unwrap();
        std::fs::remove_file(root.join("b.txt")).unwrap();
        std::fs::write(root.join("c.txt"), "c").unwrap();
        std::fs::write(root.join(".git/index"), "x").unwrap();
        let after = Snapshot::take(root);
        assert_eq!(
            before.changes(&after),
            vec![
                json!({"path": "b.txt", "change": "deleted"}),
                json!({"path": "c.txt", "change": "added"}),
                json!({"path": "src/a.rs", "change": "modified"}),
            ]
        );
        assert!(after.changes(&Snapshot::take(root)).is_empty());
    }

    /// An edit that keeps the size and sets the modification time back is
    /// seen; a file only touched is not.
    #[test]
    fn contents_decide_what_is_modified() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("same.txt"), "aaaa").unwrap();
        std::fs::write(root.join("touched.txt"), "bbbb").unwrap();
        let mtime = |p: &str| std::fs::metadata(root.join(p)).unwrap().modified().unwrap();
        let (same_at, touched_at) = (mtime("same.txt"), mtime("touched.txt"));
        let before = Snapshot::take(root);
        std::fs::write(root.join("same.txt"), "zzzz").unwrap();
        let file = std::fs::File::options()
            .write(true)
            .open(root.join("same.txt"))
            .unwrap();
        file.set_modified(same_at).unwrap();
        let file = std::fs::File::options()
            .write(true)
            .open(root.join("touched.txt"))
            .unwrap();
        file.set_modified(touched_at + std::time::Duration::from_mins(1))
            .unwrap();
        assert_eq!(
            before.changes(&Snapshot::take(root)),
            vec![json!({"path": "same.txt", "change": "modified"})]
        );
    }
}
