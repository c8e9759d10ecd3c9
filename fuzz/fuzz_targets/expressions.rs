//! Hostile CEL, Expr, jq and regex through our own entry points, on a stack
//! smaller than any the daemon evaluates on: the compiler's checks of a
//! workflow holding the text, then for CEL the evaluation `expr.eval` runs
//! (`eval_source`: bounds, budget, engine), for Expr its evaluation (the
//! `expr-lang` crate stops on some texts its grammar takes: map literals of
//! computed values were one), for regex the match
//! `assert.matches` makes. Nothing may panic, overflow the stack or run away.
//! jq is checked and compiled here as the daemon does; its evaluation runs
//! only in a process of its own, whose death is the handled case
//! (tests/hostile covers it).
#![no_main]

use libfuzzer_sys::fuzz_target;
use opcode_compiler::Compiler;
use opcode_stdlib::cel::{budget::Budget, eval_source};
use serde_json::json;

/// Half the 2 MiB tokio gives its threads.
const STACK: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let Some((&kind, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let text = text.to_owned();
    std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || match kind % 4 {
            0 => cel(&text),
            1 => jq(&text),
            2 => regex(&text),
            _ => expr_text(&text),
        })
        .expect("a thread")
        .join()
        .expect("no panic escapes our entry points");
});

/// A one-step workflow of `action` with `params`, checked by the compiler.
fn check(action: &str, params: serde_json::Value) {
    let workflow = json!({"steps": [{"id": "s", "action": action, "params": params}]});
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    let _ = compiler.check(&workflow.to_string());
}

fn cel(source: &str) {
    check("expr.eval", json!({ "expression": source }));
    let scope = json!({"inputs": {"n": 3, "s": "text", "list": [1, 2, 3]}});
    let data = json!({"a": [1, 2.5, "x", null, {"k": [true]}]});
    let budget = Budget {
        cost: 1_000_000,
        memory: 8 << 20,
    };
    let _ = eval_source(source, &scope, &data, budget);
}

fn expr_text(source: &str) {
    check("expr.eval", json!({ "expression": source, "language": "expr" }));
    let variables = json!({"inputs": {"n": 3, "s": "text", "list": [1, 2, 3]},
                           "steps": {"a": {"items": [{"score": 0.5}]}}});
    let _ = opcode_stdlib::expr_lang::evaluate(source, &variables);
}

fn jq(filter: &str) {
    check("json.jq", json!({ "filter": filter, "data": [1, 2] }));
}

fn regex(pattern: &str) {
    check("assert.matches", json!({ "value": "abc", "pattern": pattern }));
    // As `assert.matches` does at run time, with a pattern only known then.
    if let Ok(re) = regex::Regex::new(pattern) {
        let _ = re.find("abc");
    }
}
