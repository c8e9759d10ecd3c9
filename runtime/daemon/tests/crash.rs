//! Crash test: `opcode run` is killed with SIGKILL at random moments, then
//! `opcode resume --all` finishes the work. Every workflow must complete,
//! every completed step must have appended its line exactly once, unless
//! the log shows the step was in flight at the kill and ran again (allowed:
//! actions run at least once; these are reported). A completed step is
//! never logged twice.
//!
//! `OPCODE_CRASH_ITERATIONS` (default 50) sets the number of iterations,
//! `OPCODE_CRASH_SEED` the kill-time seed; `tests/crash-soak` runs 500.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use opcode_runtime::store::libsql::LibsqlStore;
use opcode_runtime::store::{Durability, EntryKind, RunLog};
use serde_json::json;

const OPCODE: &str = env!("CARGO_BIN_EXE_opcode");

/// A chain, a fan-out and a join; every step appends `<run id> <step>` and naps.
fn workflow(appends: &Path) -> String {
    let step = |id: &str, deps: &[&str]| {
        json!({
            "id": id,
            "action": "shell.exec",
            "depends_on": deps,
            "params": {
                "shell": true,
                "command": format!(
                    "echo \"${{{{workflow.run_id}}}} {id}\" >> '{}'; sleep 0.01",
                    appends.display()
                )
            }
        })
    };
    json!({"name": "crash", "steps": [
        step("s1", &[]), step("s2", &["s1"]), step("s3", &["s2"]),
        step("f1", &["s3"]), step("f2", &["s3"]), step("f3", &["s3"]),
        step("join", &["f1", "f2", "f3"]), step("end", &["join"])
    ]})
    .to_string()
}

/// A small deterministic generator (xorshift64*), so a failing seed replays.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

fn spawn(args: &[&str]) -> std::process::Child {
    Command::new(OPCODE)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("opcode starts")
}

fn kill_after(mut child: std::process::Child, ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
    let _ = child.kill();
    let _ = child.wait();
}

#[derive(Default)]
struct Tally {
    completed: usize,
    killed_before_start: usize,
    reran_in_flight: usize,
    failures: Vec<String>,
}

#[test]
fn killed_runs_resume_without_losing_or_repeating_completed_steps() {
    let iterations: usize = std::env::var("OPCODE_CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let seed: u64 = std::env::var("OPCODE_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5EED);
    let mut rng = Rng(seed | 1);
    // Its shell steps run isolated, as the sandbox user, in this folder.
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let db = dir.path().join("crash.db");
    let appends = dir.path().join("appends.log");
    let file = dir.path().join("crash.json");
    std::fs::write(&file, workflow(&appends)).unwrap();
    let (db_arg, file_arg) = (db.to_str().unwrap(), file.to_str().unwrap());
    let started = Instant::now();
    let mut ids = Vec::new();
    for i in 0..iterations {
        let id = format!("crash-{i}");
        let run = spawn(&["run", file_arg, "--db", db_arg, "--id", &id]);
        kill_after(run, 20 + rng.below(180));
        // Sometimes the recovery is killed too.
        if rng.below(4) == 0 {
            let resume = spawn(&["resume", "--all", "--db", db_arg]);
            kill_after(resume, rng.below(120));
        }
        let status = Command::new(OPCODE)
            .args(["resume", "--all", "--db", db_arg])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(
            status.code().is_some_and(|c| c <= 1),
            "resume --all: {status}"
        );
        ids.push(id);
    }
    let tally = check(&db, &appends, &ids);
    eprintln!(
        "crash test: {iterations} iterations (seed {seed}) in {:.1}s: {} completed, {} killed before \
         the workflow was stored, {} steps ran twice because they were in flight at a kill",
        started.elapsed().as_secs_f64(),
        tally.completed,
        tally.killed_before_start,
        tally.reran_in_flight
    );
    assert!(tally.failures.is_empty(), "{}", tally.failures.join("\n"));
    assert_eq!(tally.completed + tally.killed_before_start, iterations);
}

fn check(db: &Path, appends: &Path, ids: &[String]) -> Tally {
    let mut counts: HashMap<(String, String), usize> = HashMap::new();
    for line in std::fs::read_to_string(appends).unwrap_or_default().lines() {
        if let Some((id, step)) = line.split_once(' ') {
            *counts.entry((id.to_owned(), step.to_owned())).or_default() += 1;
        }
    }
    let store = LibsqlStore::open(db, Durability::Normal).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut tally = Tally::default();
    for id in ids {
        let Some(row) = rt.block_on(store.workflow(id)).unwrap() else {
            tally.killed_before_start += 1;
            continue;
        };
        if row.status.as_str() != "completed" {
            tally.failures.push(format!("{id} ended {}", row.status));
            continue;
        }
        tally.completed += 1;
        let log = rt.block_on(store.entries(id, 0, false)).unwrap();
        for step in ["s1", "s2", "s3", "f1", "f2", "f3", "join", "end"] {
            let of_step = |kind: EntryKind, event: &str| {
                log.iter()
                    .filter(|e| e.kind == kind && e.event_type == event)
                    .filter(|e| e.step_id.as_deref() == Some(step))
                    .count()
            };
            let completed = of_step(EntryKind::Record, "step_completed");
            let redispatched = of_step(EntryKind::Note, "action_redispatched");
            let appended = counts
                .get(&(id.clone(), step.to_owned()))
                .copied()
                .unwrap_or(0);
            if completed != 1 {
                tally
                    .failures
                    .push(format!("{id}/{step}: logged completed {completed} times"));
            }
            if appended == 0 {
                tally
                    .failures
                    .push(format!("{id}/{step}: lost (never appended)"));
            } else if appended > 1 + redispatched {
                tally.failures.push(format!(
                    "{id}/{step}: appended {appended} times, re-dispatched {redispatched} times"
                ));
            } else if appended > 1 {
                tally.reran_in_flight += appended - 1;
            }
        }
    }
    tally
}
