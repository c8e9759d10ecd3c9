//! What `opcode doctor` checks of the database: it opens, its schema, its
//! journal and durability, the disk under it, the clock beside its runs,
//! and the vault key.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use opcode_daemon::settings::Settings;
use opcode_runtime::EventStore;
use opcode_runtime::store::{Durability, SCHEMA_VERSION, StoreHealth};
use opcode_runtime::vault::{Vault, passphrase};

use super::Check;
use crate::cli::database::Database;
use crate::cli::serve::{database_of, durability_of};

/// Below this, the database's disk fails the check; below [`DISK_LOW`], it warns.
const DISK_FULL: u64 = 64 << 20;
/// See [`DISK_FULL`].
const DISK_LOW: u64 = 1 << 30;
/// A clock before this is wrong (this build is newer).
const CLOCK_FLOOR: &str = "2026-01-01T00:00:00.000Z";
/// How far a server's clock may be from this machine's before leases and
/// timers misjudge each other.
const SKEW_LIMIT_MS: u64 = 2_000;

/// The database, then what depends on it opening.
pub async fn checks(settings: &Settings) -> Vec<Check> {
    let mut checks = Vec::new();
    let durability = match durability_of(settings) {
        Ok(durability) => durability,
        Err(e) => {
            checks.push(Check::fail("durability", e, "give normal or full"));
            return checks;
        }
    };
    let db = match database_of(settings) {
        Ok(db) => db,
        Err(e) => {
            checks.push(Check::fail(
                "database",
                e,
                "give a file path or a postgres:// URL",
            ));
            return checks;
        }
    };
    if let Database::File(path) = &db {
        checks.push(disk(path));
        if !path.exists() {
            checks.push(match creatable(path) {
                Ok(()) => Check::ok(
                    "database",
                    format!(
                        "{} does not exist yet: opcode serve creates it (schema {SCHEMA_VERSION})",
                        path.display()
                    ),
                ),
                Err(e) => Check::fail(
                    "database",
                    format!("{} cannot be created: {e}", path.display()),
                    "give a --db in a folder the daemon's user can write",
                ),
            });
            checks.push(clock(None));
            checks.push(Check::ok(
                "vault key",
                "no vault yet: the first secret creates one with the key given then",
            ));
            return checks;
        }
    }
    let store = match db.open(durability).await {
        Ok(store) => store,
        Err(e) => {
            checks.push(Check::fail(
                "database",
                e,
                match db {
                    Database::File(_) => "check the path and its permissions, or give another --db",
                    Database::Server(_) => {
                        "start the server, or correct the URL's host, port, user and password"
                    }
                },
            ));
            return checks;
        }
    };
    let health = match store.health().await {
        Ok(health) => health,
        Err(e) => {
            checks.push(Check::fail(
                "database",
                e.to_string(),
                "check the database server's logs",
            ));
            return checks;
        }
    };
    checks.push(Check::ok(
        "database",
        format!(
            "{} opens at schema version {}",
            db.shown(),
            health.schema_version
        ),
    ));
    checks.push(journal(&health, durability));
    checks.push(clock(Some(&health)));
    checks.push(vault(store, settings).await);
    checks
}

/// WAL, and what the durability setting promises.
fn journal(health: &StoreHealth, durability: Durability) -> Check {
    let Some(mode) = &health.journal_mode else {
        return Check::ok("journal", "the server's own (its fsync settings decide)");
    };
    if mode != "wal" {
        return Check::fail(
            "journal",
            format!("the database is in {mode} mode, not WAL: the filesystem may not support it"),
            "keep the database on a local filesystem (not NFS or a FUSE mount)",
        );
    }
    let synchronous = health.synchronous.as_deref().unwrap_or("unknown");
    match durability {
        Durability::Normal => Check::ok(
            "journal",
            format!(
                "WAL, synchronous={synchronous}: a commit survives the process dying; the last \
                 ones before a power loss may be lost (durability full fsyncs each)"
            ),
        ),
        Durability::Full => Check::ok(
            "journal",
            format!("WAL, synchronous={synchronous}: every commit survives a power loss"),
        ),
    }
}

/// The free space of the disk the database file is (or will be) on.
fn disk(path: &Path) -> Check {
    let folder = nearest_existing(path);
    match nix::sys::statvfs::statvfs(&folder) {
        Ok(stat) => {
            let free = stat.blocks_available() * stat.fragment_size();
            let shown = format!("{} free under {}", bytes(free), folder.display());
            if free < DISK_FULL {
                Check::fail(
                    "disk",
                    shown,
                    "free space there: a full disk stops every run at its next step",
                )
            } else if free < DISK_LOW {
                Check::warn("disk", shown, "free space there before it fills")
            } else {
                Check::ok("disk", shown)
            }
        }
        Err(e) => Check::fail(
            "disk",
            format!("cannot read {}: {e}", folder.display()),
            "check the database path",
        ),
    }
}

/// Whether a file can be made where `path` would be: a file is made and
/// removed in the nearest folder that exists.
fn creatable(path: &Path) -> std::io::Result<()> {
    let folder = nearest_existing(path);
    let probe = folder.join(format!(".opcode-doctor-{}", std::process::id()));
    std::fs::File::create_new(&probe)?;
    std::fs::remove_file(&probe)
}

/// The folder `path` is in, or the nearest one of its ancestors that exists.
fn nearest_existing(path: &Path) -> PathBuf {
    let mut folder = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    while !folder.as_os_str().is_empty() && !folder.exists() {
        folder = folder.parent().map_or_else(PathBuf::new, Path::to_path_buf);
    }
    if folder.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        folder
    }
}

fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / f64::from(1u32 << 30)),
        n => format!("{} MiB", n >> 20),
    }
}

/// This machine's clock: after this build, after the newest run, and close
/// to a server's.
fn clock(health: Option<&StoreHealth>) -> Check {
    let now_ms = opcode_runtime::time::now_ms();
    let now = opcode_runtime::time::rfc3339(now_ms);
    let fix = "set the clock (timedatectl set-ntp true, or chrony)";
    if now.as_str() < CLOCK_FLOOR {
        return Check::fail("clock", format!("it says {now}, before this build"), fix);
    }
    let newest = health.and_then(|h| h.newest_run_at.as_deref());
    if let Some(newest) = newest.filter(|newest| *newest > now.as_str()) {
        return Check::fail(
            "clock",
            format!("it says {now}, before the newest run ({newest}): timers would fire late"),
            fix,
        );
    }
    if let Some(theirs) = health.and_then(|h| opcode_runtime::time::parse_ms(&h.clock)) {
        let skew = theirs.abs_diff(now_ms);
        if skew > SKEW_LIMIT_MS {
            return Check::fail(
                "clock",
                format!("{skew} ms from the database server's: leases would lapse early or late"),
                "synchronise both clocks with NTP",
            );
        }
    }
    Check::ok("clock", now)
}

/// The vault key is there when there is a vault, and opens it.
async fn vault(store: Arc<dyn EventStore>, settings: &Settings) -> Check {
    let from_env = std::env::var_os("OPCODE_VAULT_KEY_FILE").map(PathBuf::from);
    let key_file = settings.vault_key_file.clone().or(from_env);
    let given = match passphrase(key_file.as_deref()) {
        Ok(given) => given,
        Err(e) => {
            return Check::fail(
                "vault key",
                format!("R0124: {e}"),
                "give a readable file whose first line is the passphrase",
            );
        }
    };
    let has_vault = match store.vault_header().await {
        Ok(header) => header.is_some(),
        Err(e) => return Check::fail("vault key", e.to_string(), "check the database"),
    };
    match (given, has_vault) {
        (None, false) => Check::ok(
            "vault key",
            "no vault and no key: secrets come from OPCODE_SECRET_* only",
        ),
        (None, true) => Check::warn(
            "vault key",
            "the database has a vault but no key is given: steps that read a secret fail",
            "give the key with --vault-key-file, OPCODE_VAULT_KEY_FILE or OPCODE_VAULT_KEY",
        ),
        (Some(_), false) => Check::ok(
            "vault key",
            "given; the first secret creates the vault with it",
        ),
        (Some(key), true) => match Vault::existing(store, &key).await {
            Ok(_) => Check::ok("vault key", "opens the vault"),
            Err(e) => Check::fail(
                "vault key",
                format!("R0124: {e}"),
                "give the key the vault was created with (a vault's key cannot change)",
            ),
        },
    }
}
