//! The define path on large generated workflows (issue: "no recursion on
//! the define path that input size can overflow"): chains, fan-outs, wide
//! joins and nested blocks, as long or as deep as the JSON limits allow,
//! compiled on a 512 KiB stack (a quarter of a tokio worker's). None may
//! overflow it or panic; each compiles, or is refused with a diagnostic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use opcode_compiler::Compiler;
use proptest::prelude::*;
use serde_json::{Value, json};

/// What a generated workflow looks like.
#[derive(Debug, Clone)]
enum Shape {
    /// `n` steps, each depending on the one before.
    Chain(usize),
    /// One parallel step of `n` one-step branches.
    Fan(usize),
    /// `n` independent steps and one that depends on them all.
    Join(usize),
    /// Blocks nested `n` deep (loops, parallels, conditions in turn),
    /// `width` steps at each level.
    Nest(usize, usize),
}

fn leaf(id: &str) -> Value {
    json!({"id": id, "action": "crypto.uuid"})
}

fn workflow(shape: &Shape) -> (Value, usize) {
    let steps: Vec<Value> = match *shape {
        Shape::Chain(n) => (0..n)
            .map(|i| {
                let mut step = leaf(&format!("s{i}"));
                if i > 0 {
                    step["depends_on"] = json!([format!("s{}", i - 1)]);
                }
                step
            })
            .collect(),
        Shape::Fan(n) => {
            let branches: Vec<Value> = (0..n).map(|i| json!([leaf(&format!("b{i}"))])).collect();
            vec![json!({"id": "fan", "type": "parallel", "config": {"branches": branches}})]
        }
        Shape::Join(n) => {
            let mut steps: Vec<Value> = (0..n).map(|i| leaf(&format!("s{i}"))).collect();
            let all: Vec<String> = (0..n).map(|i| format!("s{i}")).collect();
            let mut join = leaf("join");
            join["depends_on"] = json!(all);
            steps.push(join);
            steps
        }
        Shape::Nest(depth, width) => {
            let mut body: Vec<Value> = (0..width).map(|i| leaf(&format!("x{i}"))).collect();
            for level in 0..depth {
                let id = format!("n{level}");
                let block = match level % 3 {
                    0 => {
                        json!({"id": id, "type": "loop", "config": {"over": "[1, 2]", "body": body}})
                    }
                    1 => json!({"id": id, "type": "parallel", "config": {"branches": [body]}}),
                    _ => json!({"id": id, "type": "condition",
                                "config": {"expression": "'a'", "branches": {"a": body}}}),
                };
                body = vec![block];
                body.extend((0..width).map(|i| leaf(&format!("y{level}_{i}"))));
            }
            body
        }
    };
    let count = match *shape {
        Shape::Chain(n) | Shape::Fan(n) => n + usize::from(matches!(shape, Shape::Fan(_))),
        Shape::Join(n) => n + 1,
        Shape::Nest(depth, width) => depth + width * (depth + 1),
    };
    (json!({"steps": steps}), count)
}

fn shapes() -> impl Strategy<Value = Shape> {
    prop_oneof![
        (1usize..30_000).prop_map(Shape::Chain),
        (1usize..10_000).prop_map(Shape::Fan),
        (1usize..10_000).prop_map(Shape::Join),
        ((1usize..70), (1usize..4)).prop_map(|(d, w)| Shape::Nest(d, w)),
    ]
}

/// Compiles `text` on a thread with a 512 KiB stack: its step count, or
/// whether it was refused with a diagnostic.
fn compile_small_stack(text: String) -> Result<usize, usize> {
    compile_as(text, "shape.json")
}

/// [`compile_small_stack`] of a file named `file` (its syntax by extension).
fn compile_as(text: String, file: &'static str) -> Result<usize, usize> {
    std::thread::Builder::new()
        .stack_size(512 * 1024)
        .spawn(move || {
            let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
            let (program, diagnostics) = compiler.compile(&text, file);
            match program {
                Some(program) if !diagnostics.has_errors() => Ok(program.steps.len()),
                _ => Err(diagnostics.error_count()),
            }
        })
        .unwrap()
        .join()
        .expect("the compiler panicked or overflowed its stack")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn large_and_deep_workflows_compile_on_a_small_stack(shape in shapes()) {
        let (workflow, count) = workflow(&shape);
        match compile_small_stack(workflow.to_string()) {
            Ok(steps) => prop_assert_eq!(steps, count, "{:?}", shape),
            // Nested past the JSON limit: refused, with its reason.
            Err(errors) => prop_assert!(
                errors > 0 && matches!(shape, Shape::Nest(..)),
                "{:?} refused without an error",
                shape
            ),
        }
    }
}

/// The sizes the issue reported, whatever the generator draws.
#[test]
fn the_reported_chain_compiles_on_a_small_stack() {
    let (workflow, count) = workflow(&Shape::Chain(21_875));
    assert_eq!(compile_small_stack(workflow.to_string()), Ok(count));
}

/// Nesting written as `.opc` (its own parser, chumsky's), compiled on
/// the small stack: 20 levels compile as their JSON does; 60, which JSON
/// takes, `.opc` refuses with a diagnostic (its own bound), never a crash.
#[test]
fn deep_opc_compiles_on_a_small_stack() {
    for depth in [20, 60] {
        let (json, count) = workflow(&Shape::Nest(depth, 1));
        let opc = opcode_compiler::syntax::opc::from_json(&json.to_string()).unwrap();
        let from_opc = compile_as(opc, "shape.opc");
        assert!(from_opc.is_ok() || from_opc.is_err_and(|errors| errors > 0));
        if depth == 20 {
            assert_eq!(from_opc, Ok(count));
        }
    }
}
