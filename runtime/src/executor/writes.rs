//! Whether the store takes writes: the outcome of the last one, and the
//! runs a refused write unloaded, which the background loop loads again
//! until one succeeds (spec/limits.md, R0131).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::store::StoreError;
use crate::time::now_ms;

/// A stranded run is tried again this long after its last try.
pub(crate) const RETRY: Duration = Duration::from_secs(2);

/// Writes have been failing since `since_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteFailure {
    /// The last refusal, as the store put it.
    pub error: String,
    /// When the first of the refusals in a row happened (ms since the epoch).
    pub since_ms: u64,
}

/// The store's write health and the runs waiting on it.
#[derive(Debug, Default)]
pub(crate) struct Writes {
    failure: Mutex<Option<WriteFailure>>,
    /// A commit failed since the last one that succeeded: only a commit
    /// clears the failure then.
    commit_failed: Mutex<bool>,
    stranded: Mutex<HashMap<String, Instant>>,
}

/// Is `error` the store refusing a write (a full disk, a read-only file,
/// a lost server), rather than a refusal of what was written?
pub(crate) fn refused(error: &StoreError) -> bool {
    matches!(error, StoreError::Backend(_))
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Writes {
    /// Notes how a commit went.
    pub(crate) fn record<T>(&self, result: &Result<T, StoreError>) {
        match result {
            Ok(_) => *lock(&self.commit_failed) = false,
            Err(e) if refused(e) => *lock(&self.commit_failed) = true,
            Err(_) => {}
        }
        self.note(result);
    }

    fn note<T>(&self, result: &Result<T, StoreError>) {
        let mut failure = lock(&self.failure);
        match result {
            Ok(_) => *failure = None,
            Err(e) if refused(e) => {
                let since_ms = failure.as_ref().map_or_else(now_ms, |f| f.since_ms);
                *failure = Some(WriteFailure {
                    error: e.to_string(),
                    since_ms,
                });
            }
            Err(_) => {}
        }
    }

    /// Notes how a lease write went. One that succeeds restores the
    /// store's health only if no commit failed since the last good one: a
    /// write that small may fit where a commit does not (a full disk whose
    /// journal space is reused).
    pub(crate) fn record_lease<T>(&self, result: &Result<T, StoreError>) {
        if result.is_err() || !*lock(&self.commit_failed) {
            self.note(result);
        }
    }

    /// Writes are failing: since when, and why.
    pub(crate) fn failure(&self) -> Option<WriteFailure> {
        lock(&self.failure).clone()
    }

    /// `id` was unloaded by a refused write: load it again later.
    pub(crate) fn strand(&self, id: &str) {
        lock(&self.stranded).insert(id.to_owned(), Instant::now());
    }

    /// `id` is loaded again, or has nothing left to load.
    pub(crate) fn settle(&self, id: &str) {
        lock(&self.stranded).remove(id);
    }

    /// The stranded runs last tried at least [`RETRY`] ago, each marked as
    /// tried now.
    pub(crate) fn due(&self) -> Vec<String> {
        let mut stranded = lock(&self.stranded);
        let now = Instant::now();
        let mut due = Vec::new();
        for (id, tried) in stranded.iter_mut() {
            if now.duration_since(*tried) >= RETRY {
                *tried = now;
                due.push(id.clone());
            }
        }
        due.sort();
        due
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_refusal_lasts_until_a_write_succeeds_and_keeps_its_start() {
        let writes = Writes::default();
        writes.record::<()>(&Err(StoreError::Backend("disk full".into())));
        let first = writes.failure().unwrap();
        writes.record::<()>(&Err(StoreError::Backend("still full".into())));
        let second = writes.failure().unwrap();
        assert_eq!(second.since_ms, first.since_ms);
        assert!(second.error.contains("still full"));
        writes.record::<()>(&Err(StoreError::Exists("x".into())));
        assert!(
            writes.failure().is_some(),
            "a refused content is no store failure"
        );
        writes.record(&Ok(()));
        assert_eq!(writes.failure(), None);
    }

    #[test]
    fn a_lease_write_restores_health_only_when_no_commit_failed() {
        let full = || Err::<(), _>(StoreError::Backend("disk full".into()));
        let writes = Writes::default();
        writes.record(&full());
        writes.record_lease(&Ok(()));
        assert!(
            writes.failure().is_some(),
            "a small write fitting is no recovery"
        );
        writes.record(&Ok(()));
        assert_eq!(writes.failure(), None);
        // A lost server seen by a renewal alone: the next renewal clears it.
        writes.record_lease(&full());
        assert!(writes.failure().is_some());
        writes.record_lease(&Ok(()));
        assert_eq!(writes.failure(), None);
    }

    #[test]
    fn stranded_runs_come_due_after_the_retry_delay_until_settled() {
        let writes = Writes::default();
        writes.strand("a");
        assert!(writes.due().is_empty());
        lock(&writes.stranded).insert("a".into(), Instant::now().checked_sub(RETRY).unwrap());
        assert_eq!(writes.due(), ["a"]);
        assert!(writes.due().is_empty(), "tried just now");
        writes.settle("a");
        assert!(lock(&writes.stranded).is_empty());
    }
}
