//! The settings' `retention` (spec/store.md, "Retention"), and the loop
//! that sweeps an engine's finished runs by it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use opcode_runtime::executor::Executor;
use opcode_runtime::retention::{Retention, sweep};
use opcode_runtime::time::now_ms;

/// How long a pruned run's tombstone is kept unless the settings say.
const DEFAULT_TOMBSTONE_DAYS: u32 = 90;

/// How often the sweep runs unless the settings say.
const DEFAULT_EVERY: Duration = Duration::from_mins(10);

/// A retention policy and how often it is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sweeps {
    /// What to keep, and where pruned runs go.
    pub policy: Retention,
    /// The time between two sweeps.
    pub every: Duration,
}

/// `retention` as written in the settings.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Written {
    #[serde(default)]
    days: Option<u32>,
    #[serde(default)]
    keep_last: Option<u32>,
    #[serde(default)]
    export: Option<Value>,
    #[serde(default)]
    every: Option<String>,
    #[serde(default)]
    tombstone_days: Option<u32>,
}

/// The settings' `retention` block for the engine whose data directory is
/// `data_dir` (`tenant`: whose it is); `None` when it prunes nothing.
/// `export: true` exports to `<data_dir>/exports`; a folder exports there,
/// each tenant to `<folder>/tenants/<name>`. Tombstones are forgotten
/// `tombstone_days` (default 90; 0: at the next sweep) after pruning.
pub fn parse(
    value: Option<&Value>,
    data_dir: &Path,
    tenant: Option<&str>,
) -> Result<Option<Sweeps>, String> {
    let Some(value) = value else {
        return Ok(None);
    };
    let written: Written = serde_json::from_value(value.clone()).map_err(|e| {
        format!(
            "`retention` is {{\"days\", \"keep_last\", \"export\", \"every\", \"tombstone_days\"}}: {e}"
        )
    })?;
    if written.days == Some(0) {
        return Err("retention `days` is at least 1".into());
    }
    if written.keep_last == Some(0) {
        return Err("retention `keep_last` is at least 1".into());
    }
    let export = match written.export {
        None | Some(Value::Bool(false)) => None,
        Some(Value::Bool(true)) => Some(data_dir.join("exports")),
        Some(Value::String(dir)) if !dir.is_empty() => {
            let dir = absolute(PathBuf::from(dir));
            Some(match tenant {
                Some(name) => dir.join("tenants").join(name),
                None => dir,
            })
        }
        Some(other) => {
            return Err(format!(
                "retention `export` is true, false or a folder, not {other}"
            ));
        }
    };
    let every = match written.every.as_deref() {
        None => DEFAULT_EVERY,
        Some(text) => match humantime::parse_duration(text) {
            Ok(every) if every >= Duration::from_secs(1) => every,
            Ok(_) => return Err(format!("retention `every` `{text}` is under a second")),
            Err(e) => {
                return Err(format!(
                    "retention `every` `{text}` is not a duration such as 10m: {e}"
                ));
            }
        },
    };
    let policy = Retention {
        days: written.days,
        keep_last: written.keep_last,
        export,
        tombstone_days: Some(written.tombstone_days.unwrap_or(DEFAULT_TOMBSTONE_DAYS)),
    };
    Ok(policy.prunes().then_some(Sweeps { policy, every }))
}

fn absolute(path: PathBuf) -> PathBuf {
    if path.is_absolute() {
        path
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    }
}

/// Sweeps `exec`'s finished runs by `sweeps` until `stop`: once at start,
/// then every `sweeps.every`.
pub async fn run(exec: Executor, sweeps: Sweeps, stop: CancellationToken) {
    loop {
        match sweep(exec.store().as_ref(), &sweeps.policy, now_ms()).await {
            Ok(swept) => {
                if !swept.pruned.is_empty() || swept.forgotten > 0 {
                    tracing::info!(
                        count = swept.pruned.len(),
                        tombstones_forgotten = swept.forgotten,
                        "pruned finished runs"
                    );
                }
                for (id, why) in swept.kept {
                    tracing::warn!(workflow = %id, error = %why, "kept a run retention would prune: its export failed");
                }
            }
            Err(e) => tracing::warn!(error = %e, "retention sweep failed; will retry"),
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(sweeps.every) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_block_becomes_a_policy_with_its_export_folder() {
        let data = Path::new("/data");
        let sweeps = parse(Some(&json!({"days": 30, "export": true})), data, None)
            .unwrap()
            .unwrap();
        assert_eq!(sweeps.policy.days, Some(30));
        assert_eq!(
            sweeps.policy.export.as_deref(),
            Some(Path::new("/data/exports"))
        );
        assert_eq!(sweeps.every, DEFAULT_EVERY);
        assert_eq!(sweeps.policy.tombstone_days, Some(DEFAULT_TOMBSTONE_DAYS));
        let tenant = parse(
            Some(&json!({"keep_last": 5, "export": "/archive", "every": "1m"})),
            data,
            Some("acme"),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            tenant.policy.export.as_deref(),
            Some(Path::new("/archive/tenants/acme"))
        );
        assert_eq!(tenant.every, Duration::from_mins(1));
        assert_eq!(parse(Some(&json!({"export": true})), data, None), Ok(None));
    }

    #[test]
    fn bad_blocks_are_refused_with_what_is_wrong() {
        let data = Path::new("/data");
        for (block, says) in [
            (json!({"days": 0}), "at least 1"),
            (json!({"keep_last": 0}), "at least 1"),
            (json!({"days": 1, "export": 3}), "true, false or a folder"),
            (json!({"days": 1, "every": "soon"}), "not a duration"),
            (json!({"day": 1}), "unknown field"),
        ] {
            let error = parse(Some(&block), data, None).unwrap_err();
            assert!(error.contains(says), "{block}: {error}");
        }
    }
}
