//! The leases this process holds, by workflow, with their epochs: every
//! commit to a run carries its lease as a fence, so a process that lost a
//! lease (paused past its expiry, then taken over) cannot write the run.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::owner;
use crate::store::Fence;

/// The epochs of the leases held.
#[derive(Debug, Default)]
pub(crate) struct Fences {
    held: Mutex<HashMap<String, u64>>,
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

    fn lock(&self) -> MutexGuard<'_, HashMap<String, u64>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
