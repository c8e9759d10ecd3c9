//! The VM in memory with no-op actions, on opcode's published scenarios
//! (reference §17: N parallel steps, chains of N steps), plus compiling a
//! 1,000-step workflow and one CEL guard evaluation.
#![allow(clippy::expect_used)] // bench setup

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use opcode_compiler::Compiler;
use opcode_stdlib::cel::CelHost;
use opcode_vm::effect::Effect;
use opcode_vm::event::Event;
use opcode_vm::host::{Host, Vars};
use opcode_vm::{Plan, RunStatus, Vm};
use serde_json::{Value, json};

/// The allocator the shipped binaries use.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn plan(workflow: &Value) -> Arc<Plan> {
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    let (program, _) = compiler.compile(&workflow.to_string(), "bench.json");
    Plan::new(program.expect("compiles"))
}

/// Runs a workflow to completion, answering every dispatch at once with null.
fn run(plan: &Arc<Plan>, host: &dyn Host) -> RunStatus {
    let mut vm = Vm::new(plan.clone());
    let mut effects = Vec::with_capacity(64);
    let mut queue: Vec<u64> = Vec::with_capacity(64);
    let start = Event::Started {
        inputs: Value::Null,
        meta: Box::default(),
        secrets: Vec::new(),
    };
    vm.apply_into(1, &start, host, &mut effects)
        .expect("starts");
    loop {
        for effect in effects.drain(..) {
            if let Effect::Dispatch(d) = effect {
                queue.push(d.effect);
            }
        }
        let Some(effect) = queue.pop() else { break };
        let done = Event::ActionFinished {
            effect,
            result: Ok(Value::Null),
        };
        vm.apply_into(1, &done, host, &mut effects)
            .expect("applies");
    }
    vm.status()
}

fn scenarios(c: &mut Criterion) {
    let mut group = c.benchmark_group("vm");
    for (name, workflow) in [
        ("parallel_10", opcode_benches::parallel(10)),
        ("parallel_100", opcode_benches::parallel(100)),
        ("parallel_500", opcode_benches::parallel(500)),
        ("sequential_5", opcode_benches::sequential(5)),
        ("sequential_50", opcode_benches::sequential(50)),
    ] {
        let plan = plan(&workflow);
        let host = CelHost::new(&plan.program);
        assert_eq!(run(&plan, &host), RunStatus::Completed);
        group.bench_function(name, |b| b.iter(|| run(&plan, &host)));
    }
    group.finish();
}

fn compile(c: &mut Criterion) {
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    let text = serde_json::to_string(&opcode_benches::typical(1_000)).expect("serialises");
    assert!(compiler.compile(&text, "bench.json").0.is_some());
    c.bench_function("compile/1000_steps_typical", |b| {
        b.iter(|| compiler.compile(std::hint::black_box(&text), "bench.json"));
    });
}

fn cel_guard(c: &mut Criterion) {
    let plan = plan(&json!({"steps": [
        {"id": "fetch", "action": "http.get", "params": {"url": "http://localhost/"}},
        {"id": "gate", "action": "workflow.log", "depends_on": ["fetch"],
         "condition": "steps['fetch'].status_code == 200 && inputs.env == 'prod'"}
    ]}));
    let host = CelHost::new(&plan.program);
    let inputs = json!({"env": "prod", "items": [1, 2, 3]});
    let fetch = json!({"status_code": 200, "body": {"ok": true}});
    let steps = [("fetch", &fetch)];
    let workflow = json!({"run_id": "r"});
    let context = json!({});
    let vars = Vars {
        inputs: &inputs,
        steps: &steps,
        workflow: &workflow,
        context: &context,
        iter: None,
    };
    assert_eq!(host.eval(0, &vars), Ok(json!(true)));
    c.bench_function("cel/guard_eval", |b| {
        b.iter(|| host.eval(0, std::hint::black_box(&vars)));
    });
}

/// `expr.eval`'s evaluation (issue 24, item 3): a constant and a read of
/// one step, with 10 and 1,000 steps' outputs in its scope (an
/// expression that names steps dynamically gets them all).
fn expr_eval(c: &mut Criterion) {
    let budget = opcode_stdlib::cel::budget::Budget::default();
    let mut group = c.benchmark_group("expr_eval");
    for steps in [10, 1_000] {
        let outputs: serde_json::Map<String, Value> = (0..steps)
            .map(|i| {
                (
                    format!("s{i}"),
                    json!({"n": i, "body": {"ok": true, "items": [1, 2, 3]}}),
                )
            })
            .collect();
        let scope = json!({"steps": outputs, "inputs": {"env": "prod"}});
        for (name, source) in [("constant", "3"), ("one_step", "steps['s1'].n + 1")] {
            let data = Value::Null;
            assert!(opcode_stdlib::cel::eval_source(source, &scope, &data, budget).is_ok());
            group.bench_function(format!("{name}/{steps}_steps"), |b| {
                b.iter(|| {
                    opcode_stdlib::cel::eval_source(
                        std::hint::black_box(source),
                        &scope,
                        &data,
                        budget,
                    )
                });
            });
        }
    }
    group.finish();
}

/// Cheap actions (issue 24, item 2): `fs.stat` and `fs.read` of a tiny
/// file in the call's workspace, with the daemon's default isolation (its
/// path rules), as the executor calls them (on a multi-thread runtime);
/// `crypto.hash` and `assert.equals`, which run in their round.
fn cheap_actions(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("tiny"), "x").expect("writes");
    let defaults = opcode_stdlib::isolation::Block {
        enabled: Some(true),
        ..opcode_stdlib::isolation::Block::default()
    };
    let isolation = opcode_stdlib::isolation::IsolationConfig::new(
        defaults,
        None,
        vec![std::path::PathBuf::from("/etc/opcode")],
    );
    let call = |action: &str, params: Value| opcode_stdlib::exec::Call {
        action: action.into(),
        params,
        workspace: Some(dir.path().to_path_buf()),
        ..opcode_stdlib::exec::Call::default()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    for name in ["stat", "read"] {
        let call = call(&format!("fs.{name}"), json!({"path": "tiny"}));
        let run = || {
            runtime.block_on(opcode_stdlib::actions::fs::run(
                name,
                &call,
                dir.path(),
                &isolation,
            ))
        };
        assert!(run().is_ok(), "{:?}", run());
        c.bench_function(&format!("actions/fs_{name}"), |b| b.iter(run));
    }
    let hash = call("crypto.hash", json!({"data": "a short text"}));
    assert!(opcode_stdlib::actions::crypto::run("hash", &hash).is_ok());
    c.bench_function("actions/crypto_hash", |b| {
        b.iter(|| opcode_stdlib::actions::crypto::run("hash", &hash));
    });
    let equals = call(
        "assert.equals",
        json!({"expected": {"n": 1, "tags": ["a"]}, "actual": {"n": 1, "tags": ["a"]}}),
    );
    assert!(opcode_stdlib::actions::assert::run("equals", &equals).is_ok());
    c.bench_function("actions/assert_equals", |b| {
        b.iter(|| opcode_stdlib::actions::assert::run("equals", &equals));
    });
}

criterion_group!(
    benches,
    scenarios,
    compile,
    cel_guard,
    expr_eval,
    cheap_actions
);
criterion_main!(benches);
