//! Retention (spec/store.md, "Retention"): finished runs are kept for a
//! number of days, or only the newest of each template, and then pruned:
//! exported first when asked (the test file `opcode export` writes), then
//! deleted with everything kept of them, leaving a tombstone that says
//! when they went and where their export is.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::golden;
use crate::store::{EventStore, Expiry, Prune, StoreError};
use crate::time::rfc3339;

/// How many runs one transaction prunes.
const BATCH: u32 = 100;

/// A day, in milliseconds.
const DAY_MS: u64 = 86_400_000;

/// Which finished runs to keep, and where pruned runs are exported.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Retention {
    /// Keep runs for this many days after they ended.
    pub days: Option<u32>,
    /// Keep only this many of each template's finished runs, the newest.
    pub keep_last: Option<u32>,
    /// Export each run here before it is pruned.
    pub export: Option<PathBuf>,
    /// Forget a pruned run's tombstone this many days after it was pruned
    /// (`None`: keep tombstones).
    pub tombstone_days: Option<u32>,
}

impl Retention {
    /// Does this policy prune anything?
    pub fn prunes(&self) -> bool {
        self.days.is_some() || self.keep_last.is_some()
    }

    /// The runs it lets go at `now` (milliseconds), a batch at a time.
    fn expiry(&self, now: u64) -> Expiry {
        Expiry {
            ended_before: self
                .days
                .map(|days| rfc3339(now.saturating_sub(u64::from(days) * DAY_MS))),
            keep_last: self.keep_last,
            limit: BATCH,
        }
    }
}

/// What a sweep did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Swept {
    /// The runs pruned.
    pub pruned: Vec<String>,
    /// How many tombstones were forgotten.
    pub forgotten: u64,
    /// Runs kept because their export could not be written, with why.
    pub kept: Vec<(String, String)>,
}

/// Prunes, at time `now` (milliseconds), every finished run `policy` lets
/// go. A run whose export cannot be written stays (the sweep stops there,
/// to try again next time); nothing is deleted before its export is on
/// disk.
pub async fn sweep(
    store: &dyn EventStore,
    policy: &Retention,
    now: u64,
) -> Result<Swept, StoreError> {
    let mut swept = Swept::default();
    if !policy.prunes() {
        return Ok(swept);
    }
    let at = rfc3339(now);
    if let Some(days) = policy.tombstone_days {
        let before = rfc3339(now.saturating_sub(u64::from(days) * DAY_MS));
        swept.forgotten = store.forget_pruned(before).await?;
    }
    loop {
        let ids = store.expired(policy.expiry(now)).await?;
        let full = ids.len() == BATCH as usize;
        let mut runs = Vec::with_capacity(ids.len());
        for id in ids {
            match &policy.export {
                None => runs.push(Prune { id, export: None }),
                Some(dir) => match export(store, &id, dir).await {
                    Ok(path) => runs.push(Prune {
                        id,
                        export: Some(path.display().to_string()),
                    }),
                    Err(why) => {
                        swept.kept.push((id, why));
                        break;
                    }
                },
            }
        }
        let stalled = !swept.kept.is_empty();
        if !runs.is_empty() {
            swept.pruned.extend(store.prune(runs, at.clone()).await?);
        }
        if !full || stalled {
            return Ok(swept);
        }
    }
}

/// Writes run `id`'s test file to `dir/<id>.test.json` (whole, or not at
/// all) and answers its path.
async fn export(store: &dyn EventStore, id: &str, dir: &Path) -> Result<PathBuf, String> {
    let case = golden::export(store, id).await.map_err(|e| e.to_string())?;
    let file = golden::test_file(&[case], None);
    let text = serde_json::to_string_pretty(&file).map_err(|e| e.to_string())?;
    let path = dir.join(format!("{}.test.json", file_name(id)));
    let written = path.clone();
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || write_whole(&dir, &path, text.as_bytes()))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("cannot write {}: {e}", written.display()))?;
    Ok(written)
}

/// `id` as a file name: its letters, digits, `-`, `_` and `.` (not
/// leading), anything else as `_`.
fn file_name(id: &str) -> String {
    id.chars()
        .enumerate()
        .map(|(i, c)| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' => c,
            '.' if i > 0 => c,
            _ => '_',
        })
        .collect()
}

/// Writes `bytes` to `path` through a temporary file in `dir`, synced
/// before it takes the name, so a crash leaves the whole file or none.
fn write_whole(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let mut file = std::fs::File::create(&partial)?;
    file.write_all(bytes)?;
    file.write_all(b"\n")?;
    file.sync_all()?;
    std::fs::rename(&partial, path)?;
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_id_is_a_file_name_in_the_export_folder() {
        assert_eq!(
            file_name("sched-nightly-1700000000000"),
            "sched-nightly-1700000000000"
        );
        assert_eq!(file_name("../../etc/passwd"), "_._.._etc_passwd");
        assert_eq!(file_name(".hidden"), "_hidden");
    }

    #[test]
    fn days_become_a_cutoff_and_no_policy_prunes_nothing() {
        let policy = Retention {
            days: Some(2),
            ..Retention::default()
        };
        let now = 3 * 86_400_000;
        assert_eq!(
            policy.expiry(now).ended_before.as_deref(),
            Some("1970-01-02T00:00:00.000Z")
        );
        assert!(!Retention::default().prunes());
    }
}
