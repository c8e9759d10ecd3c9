//! Run trees (spec/limits.md, "Run trees"): the budgets a child's start is
//! held to (how deep its tree goes, how many runs the tree has made), and
//! the cancel that reaches every descendant of a run that ends.

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
/// them since it first read the tree's count from the store.
#[derive(Default)]
pub(crate) struct Trees {
    made: Mutex<HashMap<String, u64>>,
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
        Ok(())
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
