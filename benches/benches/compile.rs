//! Front-end speed: `check` of generated workflows (1,000 steps is the target case).
#![allow(clippy::expect_used)] // bench setup

use criterion::{Criterion, criterion_group, criterion_main};

/// The allocator the shipped binaries use.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use opcode_compiler::Compiler;

fn check(c: &mut Criterion) {
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    let mut group = c.benchmark_group("check");
    let inputs = [
        (
            "typical_compact",
            serde_json::to_string(&opcode_benches::typical(1_000)).expect("serialises"),
        ),
        (
            "heavy_pretty",
            serde_json::to_string_pretty(&opcode_benches::realistic(1_000)).expect("serialises"),
        ),
    ];
    for (name, text) in inputs {
        let diagnostics = compiler.check(&text);
        assert!(
            !diagnostics.has_errors(),
            "generated workflow must be valid: {:?}",
            diagnostics.iter().next()
        );
        group.bench_function(format!("1000_steps_{name}_{}kb", text.len() / 1024), |b| {
            b.iter(|| compiler.check(std::hint::black_box(&text)));
        });
    }
    group.finish();
}

criterion_group!(benches, check);
criterion_main!(benches);
