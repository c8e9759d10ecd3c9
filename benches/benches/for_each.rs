//! A `for_each` over N input items through the daemon's executor on the
//! libSQL store, one `expr.eval` per item: the time should grow linearly
//! with N (it was quadratic: 16k items took 25 s; the target is ≤ 1 s).
//! Run with `cargo bench -p opcode-benches --bench for_each`; results are
//! recorded in `benches/README.md`.
#![allow(clippy::expect_used)] // bench setup

use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use opcode_runtime::executor::Config;
use opcode_runtime::store::WorkflowStatus;
use opcode_runtime::store::libsql::LibsqlStore;
use opcode_runtime::{Durability, EventStore, Executor, StartRequest, Until};
use opcode_stdlib::exec::EnvSecrets;
use serde_json::json;

/// The allocator the daemon uses.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn for_each(c: &mut Criterion) {
    opcode_daemon::allocator::return_freed_memory();
    let workflow = json!({"steps": [{"id": "each", "type": "loop", "config": {
        "over": "inputs.items",
        "body": [{"id": "b", "action": "expr.eval", "params": {"expression": "iter.item + 1"}}]}}]});
    let text = workflow.to_string();
    let compiler = opcode_compiler::Compiler::new().with_actions(opcode_stdlib::catalog());
    let program = compiler.compile(&text, "bench.json").0.expect("compiles");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("a directory");
    let store: Arc<dyn EventStore> = Arc::new(
        LibsqlStore::open(&dir.path().join("bench.db"), Durability::Normal).expect("opens"),
    );
    let exec =
        runtime.block_on(async { Executor::new(store, Arc::new(EnvSecrets), Config::default()) });
    let mut group = c.benchmark_group("for_each");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    for items in [2_000u64, 4_000, 8_000, 16_000] {
        let request = StartRequest {
            definition: text.clone(),
            program: Some(program.clone()),
            inputs: json!({ "items": (0..items).collect::<Vec<_>>() }),
            ..StartRequest::default()
        };
        group.bench_with_input(
            BenchmarkId::from_parameter(items),
            &request,
            |b, request| {
                b.iter(|| {
                    runtime.block_on(async {
                        let id = exec.start(request.clone()).await.expect("starts");
                        let status = exec.wait(&id, Until::Ended).await.expect("ends");
                        assert_eq!(status, WorkflowStatus::Completed);
                    });
                });
            },
        );
    }
    group.finish();
}

criterion_group!(benches, for_each);
criterion_main!(benches);
