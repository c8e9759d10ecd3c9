//! Workflow generators shared by the benchmarks.

use serde_json::{Value, json};

/// A workflow of `n` steps shaped like the examples: mostly action steps
/// whose params interpolate inputs and the previous step's output, a
/// dependency on the previous step (fan-in every 7th), and every tenth step
/// a condition or loop with a nested step.
pub fn typical(n: usize) -> Value {
    let mut steps = Vec::with_capacity(n);
    for i in 0..n {
        let id = format!("s{i}");
        let mut step = match i % 10 {
            0 if i > 0 => json!({
                "id": id, "type": "condition",
                "config": {
                    "expression": format!("steps['s{}'].status_code == 200", i - 1),
                    "branches": {"true": [{"id": format!("{id}-ok"), "action": "workflow.log", "params": {"message": "ok"}}]}
                }
            }),
            5 => json!({
                "id": id, "type": "loop",
                "config": {"over": "inputs.items", "max_iter": 10,
                    "body": [{"id": format!("{id}-each"), "action": "crypto.hash", "params": {"data": "${{loop.item}}"}}]}
            }),
            _ => json!({
                "id": id, "action": "http.get",
                "params": {"url": format!("${{{{inputs.base}}}}/items/{i}")}
            }),
        };
        if i > 0 {
            step["depends_on"] = if i % 7 == 0 && i >= 3 {
                json!([format!("s{}", i - 1), format!("s{}", i - 3)])
            } else {
                json!([format!("s{}", i - 1)])
            };
        }
        steps.push(step);
    }
    json!({"input_schema": {"type": "object", "properties": {"base": {"type": "string"}, "items": {"type": "array"}}},
           "definition": {"steps": steps}})
}

/// A heavier workflow of `n` steps: every step has a retry policy and a
/// timeout, every third a CEL guard, and params interpolate inputs.
pub fn realistic(n: usize) -> Value {
    let mut steps = Vec::with_capacity(n);
    let mut i = 0;
    while steps.len() < n {
        let id = format!("s{i}");
        let mut step = match i % 10 {
            0 if i > 0 => json!({
                "id": id,
                "type": "condition",
                "config": {
                    "expression": format!("steps['s{}'].hash != ''", i - 1),
                    "branches": {"true": [
                        {"id": format!("{id}-yes"), "action": "workflow.log", "params": {"message": format!("yes ${{{{steps.s{}.output.hash}}}}", i - 1)}}
                    ]},
                    "default": [{"id": format!("{id}-no"), "action": "workflow.log", "params": {"message": "no"}}]
                }
            }),
            5 => json!({
                "id": id,
                "type": "loop",
                "config": {
                    "over": "inputs.items",
                    "max_iter": 10,
                    "body": [{"id": format!("{id}-each"), "action": "crypto.hash", "params": {"data": "${{loop.item}}"}}]
                }
            }),
            _ => json!({
                "id": id,
                "action": "crypto.hash",
                "params": {"data": format!("${{{{inputs.seed}}}}-{i}"), "algorithm": "sha256"},
                "retry": {"max": 2, "backoff": "exponential", "delay": "1s"},
                "timeout": "30s"
            }),
        };
        if i > 0 {
            let deps: Vec<String> = if i % 7 == 0 && i >= 3 {
                vec![
                    format!("s{}", i - 1),
                    format!("s{}", i - 2),
                    format!("s{}", i - 3),
                ]
            } else {
                vec![format!("s{}", i - 1)]
            };
            step["depends_on"] = json!(deps);
            if i % 3 == 0 {
                step["condition"] =
                    json!(format!("inputs.enabled && size(inputs.items) > {}", i % 5));
            }
        }
        steps.push(step);
        i += 1;
    }
    json!({
        "name": "bench",
        "input_schema": {"type": "object", "properties": {"seed": {"type": "string"}, "items": {"type": "array"}, "enabled": {"type": "boolean"}}},
        "definition": {"timeout": "1h", "steps": steps}
    })
}

/// `n` independent no-op steps (one level; `workflow.emit` with no listener).
pub fn parallel(n: usize) -> Value {
    let steps: Vec<Value> = (0..n)
        .map(|i| json!({"id": format!("s{i}"), "action": "workflow.emit"}))
        .collect();
    json!({"steps": steps})
}

/// `n` steps started together, each an `fs.stat` of `path`: the cheapest
/// action dispatched as an effect, each result committed in a round of
/// its own (the peers' checkpointed step).
pub fn parallel_stat(n: usize, path: &str) -> Value {
    let steps: Vec<Value> = (0..n)
        .map(|i| json!({"id": format!("s{i}"), "action": "fs.stat", "params": {"path": path}}))
        .collect();
    json!({"steps": steps})
}

/// A chain of `n` `fs.stat` steps of `path` (see [`parallel_stat`]).
pub fn sequential_stat(n: usize, path: &str) -> Value {
    let steps: Vec<Value> = (0..n)
        .map(|i| {
            let mut step =
                json!({"id": format!("s{i}"), "action": "fs.stat", "params": {"path": path}});
            if i > 0 {
                step["depends_on"] = json!([format!("s{}", i - 1)]);
            }
            step
        })
        .collect();
    json!({"steps": steps})
}

/// A chain of `n` no-op steps.
pub fn sequential(n: usize) -> Value {
    let steps: Vec<Value> = (0..n)
        .map(|i| {
            let mut step = json!({"id": format!("s{i}"), "action": "workflow.emit"});
            if i > 0 {
                step["depends_on"] = json!([format!("s{}", i - 1)]);
            }
            step
        })
        .collect();
    json!({"steps": steps})
}
