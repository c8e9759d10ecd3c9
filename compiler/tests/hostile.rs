//! Workflows built to crash the compiler (spec/limits.md): each gets its
//! diagnostic, checked on a thread with the 2 MiB stack of a daemon's
//! worker, where the parsers overflowed before the bounds existed.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic
use opcode_compiler::Compiler;
use opcode_compiler::diagnostics::MAX_PER_CODE;
use serde_json::json;

/// The codes `check` reports for `source`, on a 2 MiB stack.
fn codes(source: String) -> Vec<&'static str> {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
            compiler.check(&source).iter().map(|d| d.code.id).collect()
        })
        .unwrap()
        .join()
        .expect("the compiler did not crash")
}

fn step(action: &str, params: &serde_json::Value) -> String {
    json!({"steps": [{"id": "s", "action": action, "params": params}]}).to_string()
}

fn chain(term: &str, op: &str, n: usize) -> String {
    vec![term; n].join(op)
}

#[test]
fn deep_and_large_expressions_are_diagnostics() {
    let jq = |filter: String| step("json.jq", &json!({"filter": filter}));
    let cel = |expression: String| step("expr.eval", &json!({"expression": expression}));
    let cases = [
        ("jq (×1000", jq("(".repeat(1000) + "." + &")".repeat(1000))),
        ("jq .|×2000", jq(chain(".", "|", 2000))),
        ("jq array of 5000", jq(format!("[{}]", chain("1", ",", 5000)))),
        ("jq nested ifs", jq("if . then ".repeat(500) + "." + &" else . end".repeat(500))),
        ("jq 100 KB", jq(".a ".repeat(40_000))),
        ("CEL 1+1+… 50k", cel(chain("1", "+", 50_000))),
        ("CEL +×10k", cel(chain("1", "+", 10_000))),
        ("CEL (×100k", cel("(".repeat(100_000) + "1" + &")".repeat(100_000))),
        (
            "CEL guard +×10k",
            json!({"steps": [{"id": "s", "action": "workflow.log", "condition": chain("1", "+", 10_000) + " > 0",
                               "params": {"message": "x"}}]})
            .to_string(),
        ),
        (
            "regex (×1000",
            step("assert.matches", &json!({"value": "x", "pattern": "(".repeat(1000) + &")".repeat(1000)})),
        ),
    ];
    for (what, source) in cases {
        let found = codes(source);
        assert!(found.contains(&"E0053"), "{what}: {found:?}");
    }
    assert!(
        codes(format!(
            "{{\"steps\": {}{}}}",
            "[".repeat(5000),
            "]".repeat(5000)
        ))
        .contains(&"E0003")
    );
}

#[test]
fn secrets_never_reach_expressions_or_the_context() {
    let found = codes(
        json!({"steps": [
            {"id": "a", "action": "expr.eval", "params": {"expression": "secrets.TOKEN + 'x'"}},
            {"id": "b", "action": "workflow.log", "depends_on": ["a"], "condition": "secrets['TOKEN'] != ''",
             "params": {"message": "x"}},
            {"id": "c", "action": "workflow.context", "depends_on": ["b"],
             "params": {"action": "update", "data": {"t": "${{secrets.TOKEN}}"}}}]})
        .to_string(),
    );
    assert_eq!(
        found.iter().filter(|c| **c == "E0037").count(),
        3,
        "{found:?}"
    );
}

#[test]
fn repeated_diagnostics_are_counted_not_listed() {
    let members: Vec<String> = (0..200_000).map(|i| format!("\"k\": {i}")).collect();
    let source = format!(
        "{{\"steps\": [{{\"id\": \"s\", \"action\": \"workflow.log\", \"params\": {{\"message\": \"x\", \"data\": {{{}}}}}}}]}}",
        members.join(", ")
    );
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    let diagnostics = compiler.check(&source);
    let duplicates: Vec<_> = diagnostics
        .iter()
        .filter(|d| d.code.id == "E0005")
        .collect();
    assert_eq!(duplicates.len(), MAX_PER_CODE + 1);
    let last = duplicates.last().unwrap();
    assert!(
        last.message.contains("199899 more E0005"),
        "{}",
        last.message
    );
}

/// A cycle of 500 steps is one diagnostic naming its first steps and its
/// last, labelling no more than those: the whole cycle took minutes to
/// render and printed 48 MB.
#[test]
fn a_long_cycle_is_one_short_diagnostic() {
    let n = 500;
    let steps: Vec<_> = (0..n)
        .map(|i| json!({"id": format!("s{i}"), "action": "crypto.uuid", "depends_on": [format!("s{}", (i + n - 1) % n)]}))
        .collect();
    let source = json!({"steps": steps}).to_string();
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    let diagnostics = compiler.check(&source).into_sorted();
    let cycles: Vec<_> = diagnostics
        .iter()
        .filter(|d| d.code.id == "E0024")
        .collect();
    assert_eq!(cycles.len(), 1, "{diagnostics:?}");
    assert!(
        cycles[0].message.contains("of 500 steps"),
        "{}",
        cycles[0].message
    );
    assert!(cycles[0].message.len() < 200, "{}", cycles[0].message);
    let rendered = opcode_compiler::diagnostics::render::human::render(
        &diagnostics,
        "cycle.json",
        &source,
        false,
    );
    assert!(rendered.len() < 200_000, "{} bytes", rendered.len());
}

/// A template that starts itself on every run is E0058 where it is
/// written; one whose recursion can end is not.
#[test]
fn a_template_that_always_runs_itself_is_refused() {
    let template = |steps: serde_json::Value| {
        json!({"name": "crawl", "definition": {"steps": steps}}).to_string()
    };
    let again =
        json!({"id": "again", "action": "workflow.run", "params": {"template_name": "crawl"}});
    let runs_itself = [
        template(json!([again])),
        template(json!([{"id": "p", "type": "parallel", "config": {"branches": [[again]]}}])),
        template(json!([{"id": "each", "action": "workflow.map",
                         "params": {"template_name": "crawl", "items": [1, 2]}}])),
    ];
    for source in runs_itself {
        assert!(codes(source.clone()).contains(&"E0058"), "{source}");
    }
    let guarded = json!({"id": "again", "action": "workflow.run", "condition": "size(inputs.todo) > 0",
                         "params": {"template_name": "crawl"}});
    let may_end = [
        template(json!([guarded])),
        template(
            json!([{"id": "c", "type": "condition", "config": {"expression": "inputs.more",
                         "branches": {"true": [again]}}}]),
        ),
        template(json!([{"id": "each", "action": "workflow.map",
                         "params": {"template_name": "crawl", "items": []}}])),
        template(
            json!([{"id": "other", "action": "workflow.run", "params": {"template_name": "fetch"}}]),
        ),
        json!({"steps": [again]}).to_string(),
    ];
    for source in may_end {
        assert!(!codes(source.clone()).contains(&"E0058"), "{source}");
    }
}
