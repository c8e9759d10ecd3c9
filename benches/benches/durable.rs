//! Durable execution on the libSQL store, end to end: per-workflow latency
//! (p50, p99) of seq10, fan10 and fan100 (`workflow.emit`, immediate: many
//! steps share a commit), of seq10-stat and fan100-stat (`fs.stat` of a
//! tiny file, an effect: each result committed in a round of its own, as
//! the peers' steps are), throughput with 16 workflows at once (seq10 and
//! seq10-stat), raw event appends, and replay of 1,000 events. Each figure
//! is labelled with its durability mode. Run with
//! `cargo bench -p opcode-benches --bench durable` (add `-- quick` for a
//! short run); results are recorded in `benches/README.md`.
#![allow(clippy::expect_used, clippy::unwrap_used)] // bench setup

use std::sync::Arc;
use std::time::{Duration, Instant};

use opcode_runtime::executor::Config;
use opcode_runtime::store::libsql::LibsqlStore;
use opcode_runtime::store::memory::MemoryStore;
use opcode_runtime::store::{Commit, EntryKind, NewEntry, NewWorkflow, WorkflowStatus};
use opcode_runtime::{Durability, EventStore, Executor, StartRequest, Until};
use opcode_stdlib::cel::CelHost;
use opcode_stdlib::exec::EnvSecrets;
use opcode_vm::{Plan, Program, Vm};
use serde_json::{Value, json};

/// The allocator the daemon uses.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn compile(workflow: &Value) -> (String, Program) {
    let text = workflow.to_string();
    let compiler = opcode_compiler::Compiler::new().with_actions(opcode_stdlib::catalog());
    let (program, _) = compiler.compile(&text, "bench.json");
    (text, program.expect("compiles"))
}

/// The libSQL store in `dir`, or with `memory` the in-memory one (which
/// tells the store's share of a figure from the executor's).
fn open(
    dir: &tempfile::TempDir,
    name: &str,
    durability: Durability,
    memory: bool,
) -> Arc<dyn EventStore> {
    if memory {
        return Arc::new(MemoryStore::new());
    }
    Arc::new(LibsqlStore::open(&dir.path().join(name), durability).expect("opens"))
}

fn executor(store: Arc<dyn EventStore>) -> Executor {
    let config = Config {
        max_actions: 1024,
        ..Config::default()
    };
    Executor::new(store, Arc::new(EnvSecrets), config)
}

async fn run_once(exec: &Executor, text: &str, program: &Program) -> Duration {
    let started = Instant::now();
    let request = StartRequest {
        definition: text.to_owned(),
        program: Some(program.clone()),
        inputs: json!({}),
        ..StartRequest::default()
    };
    let id = exec.start(request).await.expect("starts");
    let status = exec.wait(&id, Until::Ended).await.expect("ends");
    assert_eq!(status, WorkflowStatus::Completed);
    started.elapsed()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// p50 and p99 of `runs` runs, one at a time.
async fn latency(exec: &Executor, workflow: &Value, runs: usize) -> (Duration, Duration) {
    let (text, program) = compile(workflow);
    for _ in 0..runs / 10 {
        run_once(exec, &text, &program).await;
    }
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        times.push(run_once(exec, &text, &program).await);
    }
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.99))
}

/// Steps per second with `workers` runs of `workflow` (ten steps) at once.
async fn throughput(
    exec: &Executor,
    workflow: &Value,
    workers: usize,
    for_how_long: Duration,
) -> f64 {
    let (text, program) = compile(workflow);
    let deadline = Instant::now() + for_how_long;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (exec, text, program) = (exec.clone(), text.clone(), program.clone());
        tasks.push(tokio::spawn(async move {
            let mut steps = 0u64;
            while Instant::now() < deadline {
                run_once(&exec, &text, &program).await;
                steps += 10;
            }
            steps
        }));
    }
    let mut steps = 0;
    for task in tasks {
        steps += task.await.expect("worker");
    }
    steps as f64 / started.elapsed().as_secs_f64()
}

fn entry(at: &str, n: usize) -> NewEntry {
    NewEntry {
        at: at.to_owned(),
        kind: EntryKind::Record,
        event_type: "step_completed",
        step_id: Some(format!("s{n}")),
        version: 1,
        payload: "{\"output\":{\"emitted\":true}}".into(),
    }
}

/// Events per second appended by `writers` workflows, `batch` per commit.
async fn appends(store: &Arc<dyn EventStore>, writers: usize, batch: usize, commits: usize) -> f64 {
    let at = opcode_runtime::time::rfc3339(opcode_runtime::time::now_ms());
    for w in 0..writers {
        let commit = Commit {
            workflow_id: format!("append-{w}"),
            create: Some(NewWorkflow {
                id: format!("append-{w}"),
                source: opcode_runtime::store::Source {
                    hash: "append".into(),
                    definition: "{}".into(),
                    program: Vec::new(),
                },
                inputs: "{}".into(),
                created_at: at.clone(),
                ..NewWorkflow::default()
            }),
            ..Commit::default()
        };
        store.commit(commit).await.expect("creates");
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let (store, at) = (store.clone(), at.clone());
        tasks.push(tokio::spawn(async move {
            for c in 0..commits {
                let commit = Commit {
                    workflow_id: format!("append-{w}"),
                    after_seq: (c * batch) as u64,
                    entries: (0..batch).map(|n| entry(&at, n)).collect(),
                    ..Commit::default()
                };
                store.commit(commit).await.expect("appends");
            }
        }));
    }
    for task in tasks {
        task.await.expect("writer");
    }
    (writers * batch * commits) as f64 / started.elapsed().as_secs_f64()
}

/// Loading a 1,000-event log and replaying it into a fresh VM.
async fn replay(exec: &Executor, store: &Arc<dyn EventStore>) -> (usize, Duration, Duration) {
    let (text, program) = compile(&opcode_benches::sequential(999));
    let request = StartRequest {
        definition: text,
        program: Some(program.clone()),
        inputs: json!({}),
        ..StartRequest::default()
    };
    let id = exec.start(request).await.expect("starts");
    exec.wait(&id, Until::Ended).await.expect("ends");
    let plan = Plan::new(program);
    let host = CelHost::new(&plan.program);
    let inputs = store.entries(&id, 0, true).await.expect("reads").len();
    let mut times = Vec::new();
    let mut reads = Vec::new();
    for _ in 0..50 {
        let started = Instant::now();
        let entries = store.entries(&id, 0, true).await.expect("reads");
        reads.push(started.elapsed());
        let mut vm = Vm::new(plan.clone());
        let mut sink = Vec::new();
        for e in &entries {
            let (at, event) = opcode_runtime::log::decode(e).expect("decodes");
            vm.apply_into(at, &event, &host, &mut sink)
                .expect("applies");
            sink.clear();
        }
        assert!(vm.status().is_terminal());
        times.push(started.elapsed());
    }
    times.sort();
    reads.sort();
    (inputs, percentile(&reads, 0.5), percentile(&times, 0.5))
}

async fn bench(durability: Durability, quick: bool, only: Option<&str>, memory: bool) {
    let label = if memory {
        "MEMORY".to_owned()
    } else {
        durability.as_str().to_uppercase()
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open(&dir, "bench.db", durability, memory);
    let exec = executor(store.clone());
    let runs = if quick { 50 } else { 300 };
    let tiny = dir.path().join("tiny");
    std::fs::write(&tiny, "x").expect("writes");
    let tiny = tiny.display().to_string();
    for (name, workflow) in [
        ("seq10", opcode_benches::sequential(10)),
        ("fan10", opcode_benches::parallel(10)),
        ("fan100", opcode_benches::parallel(100)),
        ("seq10-stat", opcode_benches::sequential_stat(10, &tiny)),
        ("fan100-stat", opcode_benches::parallel_stat(100, &tiny)),
    ] {
        if only.is_some_and(|o| o != name) {
            continue;
        }
        let (p50, p99) = latency(&exec, &workflow, runs).await;
        println!(
            "{label:<6} {name:<28} p50 {:>12}   p99 {:>12}",
            ms(p50),
            ms(p99)
        );
    }
    let skip = |name: &str| only.is_some_and(|o| o != name);
    let secs = Duration::from_secs(if quick { 1 } else { 5 });
    let workers = std::env::var("WORKERS")
        .ok()
        .and_then(|w| w.parse().ok())
        .unwrap_or(16);
    for (name, runs, workflow) in [
        ("concurrent", "seq10", opcode_benches::sequential(10)),
        (
            "concurrent-stat",
            "seq10-stat",
            opcode_benches::sequential_stat(10, &tiny),
        ),
    ] {
        if skip(name) {
            continue;
        }
        let rate = throughput(&exec, &workflow, workers, secs).await;
        let what = format!("{workers} concurrent {runs}");
        println!("{label:<6} {what:<28} {rate:>12.0} steps/s");
    }
    if !skip("append") {
        let rate = appends(&store, 16, 64, if quick { 20 } else { 200 }).await;
        println!(
            "{label:<6} {:<28} {rate:>12.0} events/s",
            "append (16 writers x 64)"
        );
    }
    if !skip("replay") {
        let (events, read, took) = replay(&exec, &store).await;
        println!(
            "{label:<6} {:<28} {:>12}   ({events} input events; reading them {})",
            "replay 1,000 events",
            ms(took),
            ms(read)
        );
    }
}

fn main() {
    opcode_daemon::allocator::return_freed_memory();
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "quick");
    // `only=NAME` runs one scenario (seq10, fan10, fan100, seq10-stat,
    // fan100-stat, concurrent, concurrent-stat, append or replay), for
    // profiling.
    let only = args.iter().find_map(|a| a.strip_prefix("only="));
    // `memory` runs on the in-memory store instead of libSQL.
    let memory = args.iter().any(|a| a == "memory");
    // `cargo bench` passes `--bench`; a test run (`cargo test --benches`) does not.
    if !args.iter().any(|a| a == "--bench") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        bench(Durability::Normal, quick, only, memory).await;
        if only.is_none() && !memory {
            bench(Durability::Full, quick, only, memory).await;
        }
    });
}
