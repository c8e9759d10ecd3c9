//! The leases this process holds, by workflow, with their epochs: every
//! commit to a run carries its lease as a fence, so a process that lost a
//! lease (paused past its expiry, then taken over) cannot write the run.
//! And the runs whose task is leaving: a new load of one waits until the
//! old task has given its lease up, or that late release would take the
//! lease from under the new task.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How long a load waits for the task leaving its run at most.
const LEAVING_WAIT: Duration = Duration::from_secs(5);

use crate::owner;
use crate::store::Fence;

/// The epochs of the leases held.
#[derive(Debug, Default)]
pub(crate) struct Fences {
    held: Mutex<HashMap<String, u64>>,
    leaving: Mutex<HashSet<String>>,
}

impl Fences {
    /// This process holds the lease of `id` at `epoch`.
    pub(crate) fn hold(&self, id: &str, epoch: u64) {
        self.lock().insert(id.to_owned(), epoch);
    }

    /// This process gave the lease of `id` up.
    pub(crate) fn forget(&self, id: &str) {
        self.lock().remove(id);
    }

    /// The fence of a commit to `id`, when this process holds its lease.
    pub(crate) fn of(&self, id: &str) -> Option<Fence> {
        self.lock().get(id).map(|&epoch| Fence {
            owner: owner::current().to_owned(),
            epoch,
        })
    }

    /// The task of `id` left the runs map and is letting its lease go.
    pub(crate) fn leaving(&self, id: &str) {
        self.leaving_set().insert(id.to_owned());
    }

    /// The task of `id` has let its lease go.
    pub(crate) fn left(&self, id: &str) {
        self.leaving_set().remove(id);
    }

    /// Waits until no task is leaving `id` (at most [`LEAVING_WAIT`]).
    pub(crate) async fn wait_left(&self, id: &str) {
        let deadline = Instant::now() + LEAVING_WAIT;
        while self.leaving_set().contains(id) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, u64>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn leaving_set(&self) -> MutexGuard<'_, HashSet<String>> {
        self.leaving.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_load_waits_for_the_task_leaving_its_run() {
        let fences = std::sync::Arc::new(Fences::default());
        fences.leaving("w");
        let waiting = {
            let fences = fences.clone();
            tokio::spawn(async move { fences.wait_left("w").await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "it waited");
        fences.left("w");
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("it goes on once the lease is let go")
            .expect("joins");
        // Nobody leaving: no wait.
        fences.wait_left("v").await;
    }
}
