//! One writer per worktree (spec/agents.md, "Roles"): a worker holds its
//! worktree `active` while its agent works and `cleaning` while the call's
//! processes and home go; a failed cleanup leaves it `quarantined` until
//! the daemon restarts. Kept in this process's memory; where the
//! embedding names a directory for them, in a lock file per worktree that
//! other daemons on the host respect (`flock`; a quarantined worktree
//! keeps its lock until this process ends); and, through the embedding's
//! [`Services`](crate::call::Services), as a lease in the store that
//! daemons on other hosts respect, kept while [`held`] names it.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use opcode_vm::error::ActionError;
use serde_json::json;

/// Where a worktree is in its writer's life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// A worker's agent is working in it.
    Active {
        /// The run and step holding it.
        holder: String,
    },
    /// The worker's processes and home are being removed.
    Cleaning,
    /// The cleanup failed: why.
    Quarantined(String),
}

static WORKTREES: Mutex<Option<HashMap<PathBuf, State>>> = Mutex::new(None);

fn with<T>(f: impl FnOnce(&mut HashMap<PathBuf, State>) -> T) -> T {
    let mut guard = WORKTREES.lock().unwrap_or_else(PoisonError::into_inner);
    f(guard.get_or_insert_with(HashMap::new))
}

/// The worktree a workspace belongs to: the top of the Git checkout
/// holding it (the nearest directory with `.git`), else the workspace,
/// both with links resolved.
pub fn canonical(workspace: &Path) -> PathBuf {
    let resolved = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    resolved
        .ancestors()
        .find(|dir| dir.join(".git").exists())
        .map_or_else(|| resolved.clone(), Path::to_path_buf)
}

/// The worktrees this process holds: written, being cleaned, or
/// quarantined (the leases its store keeps for it).
pub fn held() -> Vec<PathBuf> {
    with(|all| all.keys().cloned().collect())
}

/// The refusal of a writer because `holder` (a run and step of another
/// daemon) holds `worktree` (R0132).
pub fn held_by(worktree: &Path, holder: String) -> ActionError {
    busy(worktree, &State::Active { holder })
}

/// The state of `worktree`, if any writer left one.
#[cfg(test)]
fn state(worktree: &Path) -> Option<State> {
    with(|all| all.get(worktree).cloned())
}

/// Lock files of quarantined worktrees, held until this process ends.
static KEPT: Mutex<Vec<Flock<File>>> = Mutex::new(Vec::new());

/// A worktree held by one writer; dropped without [`Writer::release`] or
/// [`Writer::quarantine`], it is quarantined (fail closed).
#[derive(Debug)]
pub struct Writer {
    worktree: PathBuf,
    lock: Option<Flock<File>>,
    done: bool,
}

impl Writer {
    /// Takes `worktree` for `holder`, or says why not (R0132); with
    /// `locks`, its lock file there too.
    pub fn acquire(
        worktree: PathBuf,
        holder: &str,
        locks: Option<&Path>,
    ) -> Result<Writer, ActionError> {
        with(|all| {
            if let Some(state) = all.get(&worktree) {
                return Err(busy(&worktree, state));
            }
            all.insert(
                worktree.clone(),
                State::Active {
                    holder: holder.to_owned(),
                },
            );
            Ok(())
        })?;
        let mut writer = Writer {
            worktree,
            lock: None,
            done: false,
        };
        if let Some(dir) = locks {
            match lock_file(dir, &writer.worktree, holder) {
                Ok(lock) => writer.lock = Some(lock),
                Err(error) => {
                    writer.done = true;
                    with(|all| all.remove(&writer.worktree));
                    return Err(error);
                }
            }
        }
        Ok(writer)
    }

    /// The agent has ended; its processes and home are being removed.
    pub fn cleaning(&self) {
        with(|all| all.insert(self.worktree.clone(), State::Cleaning));
    }

    /// Cleaned up: the next writer may come.
    pub fn release(mut self) {
        self.done = true;
        self.lock = None;
        with(|all| all.remove(&self.worktree));
    }

    /// The cleanup failed: no writer until the daemon restarts.
    pub fn quarantine(mut self, why: &str) {
        self.keep(why);
    }

    fn keep(&mut self, why: &str) {
        self.done = true;
        if let Some(lock) = self.lock.take() {
            KEPT.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(lock);
        }
        with(|all| all.insert(self.worktree.clone(), State::Quarantined(why.to_owned())));
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if !self.done {
            self.keep("its last worker was stopped before its cleanup finished");
        }
    }
}

/// Takes the lock file of `worktree` in `dir`, naming `holder` in it; a
/// lock another process holds is R0132.
fn lock_file(dir: &Path, worktree: &Path, holder: &str) -> Result<Flock<File>, ActionError> {
    use sha2::{Digest, Sha256};
    use std::io::{Read, Seek, Write};
    let fail = |e: &dyn std::fmt::Display| {
        ActionError::execution(format!(
            "cannot take the worktree's lock in {}: {e}",
            dir.display()
        ))
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| fail(&e))?;
    let digest = Sha256::digest(worktree.as_os_str().as_encoded_bytes());
    let name = crate::actions::crypto::hex(&digest[..16]);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join(format!("{name}.lock")))
        .map_err(|e| fail(&e))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(mut lock) => {
            let _ = lock.set_len(0);
            let _ = lock.rewind();
            let _ = write!(lock, "{holder} (process {})", std::process::id());
            Ok(lock)
        }
        Err((mut file, Errno::EWOULDBLOCK)) => {
            let mut other = String::new();
            let _ = file.read_to_string(&mut other);
            let holder = if other.trim().is_empty() {
                "another process on this host".to_owned()
            } else {
                other.trim().to_owned()
            };
            Err(busy(worktree, &State::Active { holder }))
        }
        Err((_, e)) => Err(fail(&e)),
    }
}

/// The refusal of a second writer (R0132).
fn busy(worktree: &Path, state: &State) -> ActionError {
    let shown = worktree.display();
    let (name, message, retryable) = match state {
        State::Active { holder } => (
            "active",
            format!(
                "another worker ({holder}) is writing the worktree {shown}; one writer per worktree at a time"
            ),
            true,
        ),
        State::Cleaning => (
            "cleaning",
            format!("the last worker of the worktree {shown} is still being cleaned up"),
            true,
        ),
        State::Quarantined(why) => (
            "quarantined",
            format!(
                "the worktree {shown} is quarantined: {why}; check that no process of that agent \
                 still runs and that the worktree is as it should be, then restart the daemon"
            ),
            false,
        ),
    };
    ActionError::new(opcode_vm::codes::R0132, "WORKTREE_BUSY", message, retryable)
        .with_details(json!({"worktree": worktree.to_string_lossy(), "state": name}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_writer_then_the_next_and_quarantine_fails_closed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("repo/.git")).unwrap();
        std::fs::create_dir_all(dir.path().join("repo/src")).unwrap();
        let tree = canonical(&dir.path().join("repo/src"));
        assert_eq!(
            tree,
            std::fs::canonicalize(dir.path().join("repo")).unwrap()
        );
        let first = Writer::acquire(tree.clone(), "r1/fix", None).unwrap();
        let second = Writer::acquire(tree.clone(), "r2/fix", None).unwrap_err();
        assert_eq!(second.code, "R0132");
        assert!(
            second.retryable && second.message.contains("r1/fix"),
            "{}",
            second.message
        );
        first.cleaning();
        assert_eq!(state(&tree), Some(State::Cleaning));
        first.release();
        let again = Writer::acquire(tree.clone(), "r2/fix", None).unwrap();
        drop(again);
        let stuck = Writer::acquire(tree.clone(), "r3/fix", None).unwrap_err();
        assert!(
            !stuck.retryable && stuck.message.contains("quarantined"),
            "{}",
            stuck.message
        );
        assert_eq!(stuck.details.unwrap()["state"], "quarantined");
    }

    #[test]
    fn another_process_holding_the_lock_file_is_a_writer_too() {
        let dir = tempfile::tempdir().unwrap();
        let locks = dir.path().join("locks");
        let tree = dir.path().join("elsewhere");
        let mine = Writer::acquire(tree.clone(), "r1/fix", Some(&locks)).unwrap();
        // Another daemon: a separate open file description, as another
        // process would have; the in-memory registry does not know it.
        with(|all| all.remove(&tree));
        let theirs = Writer::acquire(tree.clone(), "r2/fix", Some(&locks)).unwrap_err();
        assert!(
            theirs.message.contains("r1/fix (process"),
            "{}",
            theirs.message
        );
        assert_eq!(state(&tree), None, "a refused writer leaves nothing behind");
        with(|all| all.insert(tree.clone(), State::Cleaning));
        mine.release();
        Writer::acquire(tree, "r2/fix", Some(&locks))
            .unwrap()
            .release();
    }
}
