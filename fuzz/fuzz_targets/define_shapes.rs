//! The define path on generated workflows: each input byte adds to a
//! workflow (a step depending on the one before, a step with no
//! dependency, a loop, a parallel or a condition opened, a block closed),
//! so inputs grow chains, fan-outs and nesting of any shape. Compiled on a
//! 256 KiB stack, it never panics or overflows: it compiles, or is refused
//! with a diagnostic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use opcode_compiler::Compiler;
use serde_json::{Value, json};

/// Builds the workflow `data` describes.
fn workflow(data: &[u8]) -> Value {
    // Open blocks: the kind of step that owns each, and its steps so far.
    let mut open: Vec<(u8, Vec<Value>)> = vec![(0, Vec::new())];
    for (i, byte) in data.iter().enumerate() {
        let id = format!("s{i}");
        match byte % 6 {
            0 | 1 => {
                let steps = &mut open.last_mut().expect("the root stays open").1;
                let mut step = json!({"id": id, "action": "crypto.uuid"});
                if byte % 6 == 0
                    && let Some(before) = steps.last().and_then(|s| s["id"].as_str())
                {
                    step["depends_on"] = json!([before]);
                }
                steps.push(step);
            }
            2..=4 => open.push((byte % 6, Vec::new())),
            _ if open.len() > 1 => {
                let (kind, body) = open.pop().expect("more than the root");
                let id = format!("b{i}");
                let block = match kind {
                    2 => json!({"id": id, "type": "loop", "config": {"over": "[1]", "body": body}}),
                    3 => json!({"id": id, "type": "parallel", "config": {"branches": [body]}}),
                    _ => json!({"id": id, "type": "condition",
                                "config": {"expression": "'a'", "branches": {"a": body}}}),
                };
                open.last_mut().expect("the root stays open").1.push(block);
            }
            _ => {}
        }
    }
    while open.len() > 1 {
        let (_, body) = open.pop().expect("more than the root");
        let id = format!("b{}", open.len());
        let block = json!({"id": id, "type": "loop", "config": {"over": "[1]", "body": body}});
        open.last_mut().expect("the root stays open").1.push(block);
    }
    json!({"steps": open.pop().expect("the root").1})
}

fuzz_target!(|data: &[u8]| {
    let text = workflow(data).to_string();
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
            let (program, diagnostics) = compiler.compile(&text, "shape.json");
            assert!(program.is_some() || diagnostics.has_errors(), "refused without an error");
        })
        .expect("a thread")
        .join()
        .expect("the compiler panicked");
});
