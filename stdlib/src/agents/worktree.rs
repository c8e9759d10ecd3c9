//! One writer per worktree (spec/agents.md, "Roles"): a worker holds its
//! worktree `active` while its agent works and `cleaning` while the call's
//! processes and home go; a failed cleanup leaves it `quarantined` until
//! the daemon restarts. Kept in this process's memory.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

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

/// The state of `worktree`, if any writer left one.
pub fn state(worktree: &Path) -> Option<State> {
    with(|all| all.get(worktree).cloned())
}

/// A worktree held by one writer; dropped without [`Writer::release`] or
/// [`Writer::quarantine`], it is quarantined (fail closed).
#[derive(Debug)]
pub struct Writer {
    worktree: PathBuf,
    done: bool,
}

impl Writer {
    /// Takes `worktree` for `holder`, or says why not (R0132).
    pub fn acquire(worktree: PathBuf, holder: &str) -> Result<Writer, ActionError> {
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
            Ok(Writer {
                worktree,
                done: false,
            })
        })
    }

    /// The worktree.
    pub fn worktree(&self) -> &Path {
        &self.worktree
    }

    /// The agent has ended; its processes and home are being removed.
    pub fn cleaning(&self) {
        with(|all| all.insert(self.worktree.clone(), State::Cleaning));
    }

    /// Cleaned up: the next writer may come.
    pub fn release(mut self) {
        self.done = true;
        with(|all| all.remove(&self.worktree));
    }

    /// The cleanup failed: no writer until the daemon restarts.
    pub fn quarantine(mut self, why: &str) {
        self.done = true;
        with(|all| all.insert(self.worktree.clone(), State::Quarantined(why.to_owned())));
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if !self.done {
            with(|all| {
                all.insert(
                    self.worktree.clone(),
                    State::Quarantined(
                        "its last worker was stopped before its cleanup finished".into(),
                    ),
                )
            });
        }
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
        let first = Writer::acquire(tree.clone(), "r1/fix").unwrap();
        let second = Writer::acquire(tree.clone(), "r2/fix").unwrap_err();
        assert_eq!(second.code, "R0132");
        assert!(
            second.retryable && second.message.contains("r1/fix"),
            "{}",
            second.message
        );
        first.cleaning();
        assert_eq!(state(&tree), Some(State::Cleaning));
        first.release();
        let again = Writer::acquire(tree.clone(), "r2/fix").unwrap();
        drop(again);
        let stuck = Writer::acquire(tree.clone(), "r3/fix").unwrap_err();
        assert!(
            !stuck.retryable && stuck.message.contains("quarantined"),
            "{}",
            stuck.message
        );
        assert_eq!(stuck.details.unwrap()["state"], "quarantined");
    }
}
