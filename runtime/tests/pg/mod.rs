//! A fresh database on the test PostgreSQL cluster: the one whose URL
//! `OPCODE_TEST_POSTGRES` gives (`tests/run` starts a throw-away cluster
//! and sets it; `tests/postgres/cluster start DIR` does by hand).

mod cases;

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// The URL of a new, empty database; `None` (said on stderr) when no test
/// cluster is set.
pub fn fresh_database() -> Option<String> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let Ok(admin) = std::env::var("OPCODE_TEST_POSTGRES") else {
        eprintln!("OPCODE_TEST_POSTGRES is not set: the PostgreSQL cases are left out");
        return None;
    };
    let name = format!(
        "t{}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
    );
    let made = Command::new("psql")
        .args([admin.as_str(), "-qc", &format!("CREATE DATABASE {name}")])
        .status()
        .expect("psql runs");
    assert!(made.success(), "cannot create database {name} on {admin}");
    let base = admin
        .rsplit_once('/')
        .map_or(admin.as_str(), |(base, _)| base);
    Some(format!("{base}/{name}"))
}
