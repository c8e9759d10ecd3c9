//! Run trees (spec/limits.md, "Run trees"): the budgets a child's start is
//! held to (how deep its tree goes, how many runs the tree has made, what
//! its runs have taken in of action outputs), the cancel of a tree that
//! passes its byte budget, and the cancel that reaches every descendant of
//! a run that ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use opcode_stdlib::exec::tree_root;
use opcode_stdlib::limits::Limits;
use opcode_vm::error::ActionError;
use opcode_vm::event::Event;
use opcode_vm::limits::exceeded;

use super::{ExecError, Inner};
use crate::store::{EventStore, Listing, WorkflowFilter, WorkflowStatus};

/// Roots whose counts are kept at most; past it the counts are read from
/// the store again as they are needed.
const ROOTS_KEPT: usize = 10_000;

/// How many runs each tree has made, by root, as this process has counted
/// them since it first read the tree's count from the store; and what the
/// runs of each tree have taken in, as this process has seen them.
#[derive(Default)]
pub(crate) struct Trees {
    made: Mutex<HashMap<String, u64>>,
    taken: Mutex<HashMap<String, Taken>>,
}

/// The bytes of action outputs the runs of one tree have taken in.
#[derive(Default)]
struct Taken {
    /// Each run's count, as its VM last said (it only grows).
    runs: HashMap<String, u64>,
    /// Their sum.
    total: u64,
    /// Has the tree passed its budget (and been cancelled)?
    over: bool,
}

impl Trees {
    /// Checks that run `parent` may start one more child, and counts it:
    /// R0130 when the child would be deeper than `limits.run_depth` or the
    /// tree would hold more than `limits.run_tree` runs besides its root.
    pub(crate) async fn admit(
        &self,
        store: &dyn EventStore,
        limits: &Limits,
        parent: &str,
    ) -> Result<(), ActionError> {
        let depth = depth_of(store, parent, limits.run_depth).await? + 1;
        if depth > limits.run_depth {
            let message = format!(
                "a child here would be {depth} runs deep; a run tree may nest at most {} \
                 (limits.run_depth): does a template start itself without an end?",
                limits.run_depth
            );
            return Err(exceeded("run_depth", depth, limits.run_depth, message));
        }
        let root = tree_root(parent);
        let known = self.lock().get(root).copied();
        let stored = match known {
            Some(n) => n,
            None => descendants_stored(store, root).await?,
        };
        let mut made = self.lock();
        if made.len() >= ROOTS_KEPT && !made.contains_key(root) {
            made.clear();
        }
        let count = made.entry(root.to_owned()).or_insert(stored);
        *count = (*count).max(stored);
        if *count >= limits.run_tree {
            let message = format!(
                "the run tree of `{root}` has made {count} runs, the most one tree may make \
                 (limits.run_tree)"
            );
            return Err(exceeded("run_tree", *count + 1, limits.run_tree, message));
        }
        *count += 1;
        drop(made);
        let taken = self.taken_by(root);
        if taken >= limits.tree_outputs {
            let message = format!(
                "the runs of the tree of `{root}` have taken in {taken} bytes of action outputs, \
                 the most one tree may (limits.tree_outputs)"
            );
            return Err(exceeded(
                "tree_outputs",
                taken,
                limits.tree_outputs,
                message,
            ));
        }
        Ok(())
    }

    /// What the runs of the tree of `root` have taken in, as counted here.
    pub(crate) fn taken_by(&self, root: &str) -> u64 {
        self.lock_taken().get(root).map_or(0, |t| t.total)
    }

    /// Notes that run `id` has taken in `bytes` in all (its VM's count);
    /// the tree's new total when it first passes `limit`, which the caller
    /// answers by cancelling the tree.
    pub(crate) fn charge(&self, id: &str, bytes: u64, limit: u64) -> Option<u64> {
        let root = tree_root(id);
        let mut taken = self.lock_taken();
        if taken.len() >= ROOTS_KEPT && !taken.contains_key(root) {
            taken.clear();
        }
        let tree = taken.entry(root.to_owned()).or_default();
        let run = tree.runs.entry(id.to_owned()).or_default();
        if bytes <= *run {
            return None;
        }
        tree.total += bytes - *run;
        *run = bytes;
        if tree.total <= limit || tree.over {
            return None;
        }
        tree.over = true;
        Some(tree.total)
    }

    fn lock_taken(&self) -> std::sync::MutexGuard<'_, HashMap<String, Taken>> {
        self.taken.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, u64>> {
        self.made.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How many ancestors run `id` has (a root has none), counting no
/// further than `stop`.
async fn depth_of(store: &dyn EventStore, id: &str, stop: u64) -> Result<u64, ActionError> {
    let mut depth = 0;
    let mut at = id.to_owned();
    while depth <= stop {
        let row = store.workflow(&at).await.map_err(|e| storage(&e))?;
        match row.and_then(|r| r.parent_id) {
            Some(parent) => {
                depth += 1;
                at = parent;
            }
            None => break,
        }
    }
    Ok(depth)
}

/// The runs stored under `root` (every descendant's id starts `root.`).
async fn descendants_stored(store: &dyn EventStore, root: &str) -> Result<u64, ActionError> {
    let filter = WorkflowFilter {
        id_contains: Some(format!("{root}.")),
        ..WorkflowFilter::default()
    };
    store
        .count(Listing::Workflows(filter))
        .await
        .map_err(|e| storage(&e))
}

fn storage(error: &crate::store::StoreError) -> ActionError {
    ActionError::execution(format!("reading the run tree: {error}"))
}

/// Cancels the tree of run `id`, whose runs have taken in `total` bytes
/// of action outputs, more than `limit`: its root is cancelled, and every
/// descendant with it. Runs in the background.
pub(crate) fn cancel_over_budget(inner: &Arc<Inner>, id: &str, total: u64, limit: u64) {
    let (inner, root) = (inner.clone(), tree_root(id).to_owned());
    let reason = format!(
        "R0130: the runs of this tree have taken in {total} bytes of action outputs, more than \
         one tree may (limits.tree_outputs: {limit})"
    );
    tracing::warn!(workflow = %root, total, limit, "cancelling a run tree past its byte budget");
    tokio::spawn(async move {
        if let Err(error) = inner.deliver(&root, Event::Cancel { reason }).await {
            tracing::debug!(workflow = %root, %error, "tree not cancelled");
        }
    });
}

/// Cancels, at start, the runs whose parent ended while they had not
/// (the process died between the parent's end and its children's
/// cancel): pending, active or suspended, they would wait for ever.
pub(crate) async fn cancel_orphans(inner: &Arc<Inner>) -> Result<(), ExecError> {
    let filter = WorkflowFilter {
        statuses: vec![
            WorkflowStatus::Pending,
            WorkflowStatus::Active,
            WorkflowStatus::Suspended,
        ],
        ..WorkflowFilter::default()
    };
    let rows = inner.store.workflows(filter).await?;
    let mut ended: HashMap<String, Option<WorkflowStatus>> = HashMap::new();
    for row in rows {
        let Some(parent) = row.parent_id else {
            continue;
        };
        let status = if let Some(status) = ended.get(&parent) {
            *status
        } else {
            let status = inner
                .store
                .workflow(&parent)
                .await?
                .map(|p| p.status)
                .filter(|s| s.is_ended());
            ended.insert(parent.clone(), status);
            status
        };
        let Some(status) = status else {
            continue;
        };
        let reason = format!("its parent `{parent}` ended {status}");
        match inner.deliver(&row.id, Event::Cancel { reason }).await {
            Ok(_) | Err(ExecError::Held { .. } | ExecError::Ended { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Cancels the children of run `id`, which ended `status`, that have not
/// ended; each cancels its own as it ends. Runs in the background: the
/// run's end does not wait for its children's.
pub(crate) fn cancel_children(inner: &Arc<Inner>, id: &str, status: WorkflowStatus) {
    let (inner, id) = (inner.clone(), id.to_owned());
    tokio::spawn(async move {
        let filter = WorkflowFilter {
            parent_id: Some(id.clone()),
            statuses: vec![
                WorkflowStatus::Pending,
                WorkflowStatus::Active,
                WorkflowStatus::Suspended,
                WorkflowStatus::Quarantined,
            ],
            ..WorkflowFilter::default()
        };
        let children = match inner.store.workflows(filter).await {
            Ok(children) => children,
            Err(error) => {
                tracing::warn!(workflow = %id, %error, "could not list the children to cancel");
                return;
            }
        };
        for child in children {
            let cancel = Event::Cancel {
                reason: format!("its parent `{id}` ended {status}"),
            };
            if let Err(error) = inner.deliver(&child.id, cancel).await {
                tracing::debug!(workflow = %child.id, %error, "child not cancelled");
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trees_runs_are_added_up_and_it_passes_its_budget_once() {
        let trees = Trees::default();
        assert_eq!(trees.charge("root", 40, 100), None);
        assert_eq!(trees.charge("root.a", 30, 100), None);
        // A run's count only grows; the same count again adds nothing.
        assert_eq!(trees.charge("root.a", 30, 100), None);
        assert_eq!(trees.charge("other", 90, 100), None, "another tree");
        assert_eq!(trees.taken_by("root"), 70);
        assert_eq!(trees.charge("root.b", 31, 100), Some(101));
        assert_eq!(trees.charge("root.b", 50, 100), None, "told once");
        assert_eq!(trees.taken_by("root"), 120);
        assert_eq!(trees.taken_by("other"), 90);
    }
}
