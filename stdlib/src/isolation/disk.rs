//! The disk a sandboxed call may fill (spec/isolation.md, `disk`): the
//! places it may write (its workspace, writable binds such as an agent's
//! home) are measured while it runs, and the call is stopped once one of
//! them holds more than the policy's `disk`. What a run's earlier steps
//! left in its workspace counts: the quota bounds the run's workspace as
//! well as each call.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Policy;

/// How often the places are measured while a call runs.
const EVERY: Duration = Duration::from_millis(250);
/// Entries counted at most in one place: a tree of more is over its quota
/// whatever its bytes (counting it would cost more than it is worth).
pub const MOST_ENTRIES: u64 = 1_000_000;

/// A place that held more than the quota.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Full {
    /// The place.
    pub place: PathBuf,
    /// What it held when measured, in bytes (at least the quota).
    pub bytes: u64,
}

/// The places `policy` lets a sandboxed call write.
pub fn writable_places(policy: &Policy) -> Vec<PathBuf> {
    let workspace = policy.workspace.iter().filter(|_| policy.writable).cloned();
    let binds = policy
        .binds
        .iter()
        .filter(|b| b.writable)
        .map(|b| b.path.clone());
    workspace.chain(binds).collect()
}

/// Waits until one of `places` holds more than `quota` bytes, and says
/// which; never ends while they all stay under it (nor when there are
/// none).
pub async fn full(places: Vec<PathBuf>, quota: u64) -> Full {
    if places.is_empty() {
        return std::future::pending().await;
    }
    loop {
        let measured = {
            let places = places.clone();
            tokio::task::spawn_blocking(move || {
                places.into_iter().find_map(|place| {
                    let bytes = usage(&place, quota);
                    (bytes > quota).then_some(Full { place, bytes })
                })
            })
            .await
        };
        if let Ok(Some(full)) = measured {
            return full;
        }
        tokio::time::sleep(EVERY).await;
    }
}

/// The bytes `path` takes on disk (allocated blocks, so a sparse file
/// counts what it really holds; links are not followed), counted no
/// further than past `stop`, or [`u64::MAX`] past [`MOST_ENTRIES`].
pub fn usage(path: &Path, stop: u64) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0u64;
    let mut entries = 0u64;
    let mut pending = vec![path.to_path_buf()];
    while let Some(at) = pending.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&at) else {
            continue;
        };
        entries += 1;
        if entries > MOST_ENTRIES {
            return u64::MAX;
        }
        total = total.saturating_add(meta.blocks().saturating_mul(512));
        if total > stop {
            return total;
        }
        if meta.is_dir()
            && let Ok(children) = std::fs::read_dir(&at)
        {
            pending.extend(children.flatten().map(|e| e.path()));
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_counts_what_is_written_and_stops_past_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/a"), vec![1u8; 1 << 20]).unwrap();
        std::fs::write(dir.path().join("b"), vec![2u8; 1 << 20]).unwrap();
        let all = usage(dir.path(), u64::MAX);
        assert!((2 << 20..3 << 20).contains(&all), "{all}");
        assert!(usage(dir.path(), 1 << 20) > 1 << 20);
        // A sparse file holds what it wrote, not its length.
        let sparse = std::fs::File::create(dir.path().join("sparse")).unwrap();
        sparse.set_len(1 << 40).unwrap();
        assert!(usage(dir.path(), u64::MAX) < 4 << 20);
    }

    #[tokio::test]
    async fn a_place_past_its_quota_is_found() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("big"), vec![0u8; 2 << 20]).unwrap();
        let found = tokio::time::timeout(
            Duration::from_secs(10),
            full(vec![dir.path().to_path_buf()], 1 << 20),
        )
        .await
        .unwrap();
        assert_eq!(found.place, dir.path());
        let none = tokio::time::timeout(Duration::from_millis(600), full(Vec::new(), 0)).await;
        assert!(none.is_err(), "no place is never full");
    }
}
