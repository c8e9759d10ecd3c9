//! Templates kept in memory for `opcode.run`. A version never changes once
//! defined; "the latest" taken from here may be stale (another process may
//! have defined a newer one), which the run's creating commit checks
//! ([`opcode_runtime::store::NewWorkflow::template_latest`]): a stale entry costs a
//! retry, never a run of an old version.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use opcode_runtime::store::TemplateRow;

/// The template's own fields kept beside its definition in the stored
/// wrapper, read without building the rest of it.
#[derive(Debug, Default, serde::Deserialize)]
pub struct Head {
    /// Listed as a tool of its own?
    #[serde(default)]
    pub expose: bool,
    /// Its runs' priority.
    pub priority: Option<u8>,
}

impl Head {
    /// The head of `row`'s stored wrapper (the defaults when it has none).
    pub fn of(row: &TemplateRow) -> Head {
        serde_json::from_str(&row.definition).unwrap_or_default()
    }
}

/// At most this many entries are kept; then the cache starts over.
const KEPT: usize = 256;

/// A template's name and version (`None`: the latest).
type Key = (String, Option<i64>);

/// Template rows by name and version.
#[derive(Debug, Default)]
pub struct TemplateCache {
    rows: Mutex<HashMap<Key, Arc<TemplateRow>>>,
}

impl TemplateCache {
    /// The row kept for `name` at `version` (`None`: the latest).
    pub fn get(&self, name: &str, version: Option<i64>) -> Option<Arc<TemplateRow>> {
        let rows = self.rows.lock().unwrap_or_else(PoisonError::into_inner);
        rows.get(&(name.to_owned(), version)).cloned()
    }

    /// Keeps `row`, as its name's latest version too when `latest`.
    pub fn keep(&self, row: TemplateRow, latest: bool) -> Arc<TemplateRow> {
        let row = Arc::new(row);
        let mut rows = self.rows.lock().unwrap_or_else(PoisonError::into_inner);
        if rows.len() >= KEPT {
            rows.clear();
        }
        if latest {
            rows.insert((row.name.clone(), None), row.clone());
        }
        rows.insert((row.name.clone(), Some(row.version)), row.clone());
        row
    }

    /// Forgets which version of `name` is the latest.
    pub fn forget_latest(&self, name: &str) {
        let mut rows = self.rows.lock().unwrap_or_else(PoisonError::into_inner);
        rows.remove(&(name.to_owned(), None));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, version: i64) -> TemplateRow {
        TemplateRow {
            name: name.into(),
            version,
            ..TemplateRow::default()
        }
    }

    #[test]
    fn keeps_versions_and_the_latest() {
        let cache = TemplateCache::default();
        cache.keep(row("a", 1), true);
        cache.keep(row("a", 2), false);
        assert_eq!(cache.get("a", None).unwrap().version, 1);
        assert_eq!(cache.get("a", Some(2)).unwrap().version, 2);
        cache.forget_latest("a");
        assert!(cache.get("a", None).is_none());
        assert_eq!(cache.get("a", Some(1)).unwrap().version, 1);
        for v in 0..KEPT as i64 {
            cache.keep(row("b", v), false);
        }
        assert!(cache.rows.lock().unwrap().len() <= KEPT);
    }
}
