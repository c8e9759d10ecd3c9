//! Semantics of the checks that are easy to get subtly wrong: which step
//! outputs are available where.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test helpers may panic

use opcode_compiler::Compiler;

fn codes(src: &str) -> Vec<&'static str> {
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    compiler
        .check(src)
        .into_sorted()
        .into_iter()
        .map(|d| d.code.id)
        .collect()
}

fn log(id: &str, message: &str) -> String {
    format!(r#"{{"id": "{id}", "action": "workflow.log", "params": {{"message": "{message}"}}}}"#)
}

#[test]
fn transitive_dependencies_are_available() {
    let src = format!(
        r#"{{"steps": [{}, {{"id": "b", "action": "workflow.log", "depends_on": ["a"]}}, {{"id": "c", "action": "workflow.log", "depends_on": ["b"], "params": {{"message": "a: ${{{{steps.a.output.logged}}}}"}}}}]}}"#,
        log("a", "x")
    );
    assert_eq!(codes(&src), Vec::<&str>::new());
}

#[test]
fn steps_inside_a_finished_parallel_all_are_available_but_not_race() {
    let parallel = |mode: &str| {
        format!(
            r#"{{"steps": [
                {{"id": "p", "type": "parallel", "config": {{"mode": "{mode}", "branches": [[{}], [{}]]}}}},
                {{"id": "after", "action": "workflow.log", "depends_on": ["p"], "params": {{"message": "x: ${{{{steps.x.output.logged}}}}"}}}}
            ]}}"#,
            log("x", "1"),
            log("y", "2")
        )
    };
    assert_eq!(codes(&parallel("all")), Vec::<&str>::new());
    assert_eq!(codes(&parallel("race")), vec!["E0035"]);
}

#[test]
fn branch_steps_are_not_available_after_the_condition() {
    let src = format!(
        r#"{{"steps": [
            {{"id": "c", "type": "condition", "config": {{"expression": "true", "branches": {{"true": [{}]}}}}}},
            {{"id": "after", "action": "workflow.log", "depends_on": ["c"], "params": {{"message": "${{{{steps.x.output}}}}"}}}}
        ]}}"#,
        log("x", "1")
    );
    assert!(codes(&src).contains(&"E0035"));
}

#[test]
fn earlier_steps_of_a_branch_and_the_enclosing_dependencies_are_available() {
    let src = format!(
        r#"{{"steps": [
            {},
            {{"id": "loop", "type": "loop", "depends_on": ["a"], "config": {{"over": "[1, 2]", "body": [
                {},
                {{"id": "second", "action": "workflow.log", "params": {{"message": "${{{{steps.first.output.logged}}}} ${{{{steps.a.output.logged}}}} ${{{{loop.index}}}}"}}}}
            ]}}}}
        ]}}"#,
        log("a", "x"),
        log("first", "y")
    );
    assert_eq!(codes(&src), Vec::<&str>::new());
}

#[test]
fn loop_body_steps_are_not_available_outside_but_the_until_condition_sees_them() {
    let src = r#"{"steps": [
        {"id": "l", "type": "loop", "config": {"mode": "until", "max_iter": 3, "condition": "steps['n'].result > 2", "body": [
            {"id": "n", "action": "expr.eval", "params": {"expression": "iter.index"}}
        ]}},
        {"id": "after", "action": "workflow.log", "depends_on": ["l"], "params": {"message": "${{steps.n.output.result}}"}}
    ]}"#;
    assert_eq!(codes(src), vec!["E0035"]);
}

#[test]
fn workflow_output_and_hooks_may_read_any_step_outside_loops() {
    let src = format!(
        r#"{{"on_complete": {{"id": "done", "action": "workflow.log", "params": {{"message": "x: ${{{{steps.x.output.logged}}}}"}}}},
            "steps": [{{"id": "c", "type": "condition", "config": {{"expression": "true", "branches": {{"true": [{}]}}}}}}],
            "output": {{"x": "${{{{steps.x.output}}}}"}}}}"#,
        log("x", "1")
    );
    assert_eq!(codes(&src), Vec::<&str>::new());
}

#[test]
fn a_fallback_step_stands_in_and_cannot_be_depended_on() {
    let src = r#"{"steps": [
        {"id": "main", "action": "workflow.fail", "on_error": {"strategy": "fallback_step", "fallback_step": "alt"}},
        {"id": "alt", "action": "expr.eval", "params": {"expression": "1"}},
        {"id": "use", "action": "workflow.log", "depends_on": ["main"], "params": {"message": "${{steps.main.output.result}}"}},
        {"id": "bad", "action": "workflow.log", "depends_on": ["alt"]}
    ]}"#;
    assert_eq!(codes(src), vec!["E0025"]);
}

#[test]
fn secrets_only_in_action_params() {
    let src = r#"{"steps": [
        {"id": "a", "action": "http.get", "params": {"url": "https://x", "headers": {"Authorization": "Bearer ${{secrets.TOKEN}}"}}}
    ], "output": {"leak": "${{secrets.TOKEN}}"}}"#;
    assert_eq!(codes(src), vec!["E0037"]);
}

#[test]
fn guards_and_conditions_are_checked_like_interpolation() {
    let src = r#"{"steps": [
        {"id": "a", "action": "workflow.log"},
        {"id": "b", "action": "workflow.log", "condition": "steps['a'].logged && iter.index > 0"}
    ]}"#;
    assert_eq!(codes(src), vec!["E0035", "E0036"]);
}

#[test]
fn agent_budgets_that_cannot_be_met_are_refused() {
    let agent = |params: &str, step: &str| {
        format!(
            r#"{{"steps": [{{"id": "fix", "action": "agent.worker"{step}, "params": {{"prompt": "p"{params}}}}}]}}"#
        )
    };
    assert_eq!(codes(&agent("", "")), Vec::<&str>::new());
    assert_eq!(codes(&agent(r#", "max_steps": 2"#, "")), vec!["E0057"]);
    assert_eq!(codes(&agent(r#", "max_steps": 300"#, "")), vec!["E0057"]);
    assert_eq!(codes(&agent(r#", "timeout": "3s""#, "")), vec!["E0057"]);
    // The worker's default 10 minutes do not fit in a 1-minute step.
    assert_eq!(codes(&agent("", r#", "timeout": "1m""#)), vec!["E0057"]);
    assert_eq!(
        codes(&agent(r#", "timeout": "30s""#, r#", "timeout": "1m""#)),
        Vec::<&str>::new()
    );
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    let fixed = compiler
        .check(&agent(r#", "max_steps": 2"#, ""))
        .into_sorted();
    let fix = fixed[0].fix.as_ref().expect("a fix");
    assert!(fix.message.contains('4'), "{}", fix.message);
}

#[test]
fn an_expr_map_of_computed_values_is_located_not_a_panic() {
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    for expression in [r#"{\"n\": sum([1])}"#, r#"{\"a\": {\"b\": 1}}"#] {
        let src = format!(
            r#"{{"steps": [{{"id": "e", "action": "expr.eval", "params": {{"language": "expr", "expression": "{expression}"}}}}]}}"#
        );
        let found = compiler.check(&src).into_sorted();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].code.id, "E0054");
        assert!(
            found[0]
                .message
                .contains("map literal's values must be constants"),
            "{found:?}"
        );
        assert_eq!(
            found[0].pointer.as_deref(),
            Some("/steps/0/params/expression")
        );
        // The character where the computed value begins.
        let at = found[0].span().start as usize;
        assert!(
            src[at..].starts_with("sum") || src[at..].starts_with('{'),
            "{}",
            &src[at..]
        );
    }
}

#[test]
fn a_param_that_is_exactly_a_reference_is_said_only_when_it_names_one() {
    let found = codes(
        r#"{"steps": [{"id": "fetch", "action": "crypto.uuid"},
        {"id": "a", "action": "workflow.log", "depends_on": ["fetch"], "params": {"message": "steps.fetch.output.uuid"}},
        {"id": "b", "action": "workflow.log", "params": {"message": "steps.txt"}},
        {"id": "c", "action": "workflow.log", "params": {"message": "see steps.fetch"}}]}"#,
    );
    assert_eq!(found, ["W0012"]);
    let declared = codes(
        r#"{"inputs": {"user": "ann"}, "steps": [
        {"id": "a", "action": "workflow.log", "params": {"message": "inputs.user"}},
        {"id": "b", "action": "workflow.log", "params": {"message": "inputs.nobody"}}]}"#,
    );
    assert_eq!(declared, ["W0012"]);
}

#[test]
fn interpolation_where_it_is_never_read_is_an_error_at_the_field() {
    let found = codes(
        r#"{"context": {"who": "${{inputs.user}}", "n": 1}, "steps": [
        {"id": "ask", "type": "reasoning", "config": {"prompt_context": "Ship?",
         "options": [{"id": "${{inputs.choice}}"}, {"id": "no"}], "target_agent": "${{inputs.agent}}"}}]}"#,
    );
    assert_eq!(found, ["E0062", "E0062", "E0062"]);
}

#[test]
fn an_input_tested_with_has_is_not_an_undeclared_read() {
    let found = codes(
        r#"{"inputs": {"user": "ann"}, "steps": [
        {"id": "a", "action": "workflow.log", "condition": "has(inputs.region) && inputs.region == 'eu'",
         "params": {"message": "hi"}},
        {"id": "b", "action": "workflow.log", "condition": "inputs.zone == 'x'", "params": {"message": "hi"}}]}"#,
    );
    assert_eq!(found, ["W0004"]);
}

#[test]
fn expr_functions_in_text_read_as_cel_say_it_is_expr_with_a_fix() {
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    let src = r#"{"steps": [{"id": "e", "action": "expr.eval", "params": {"expression": "sum([1, 2]) > 2"}}]}"#;
    let found = compiler.check(src).into_sorted();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].code.id, "E0048");
    let (fixed, applied) = opcode_compiler::diagnostics::apply_fixes(src, &found);
    assert_eq!(applied, 1);
    assert!(fixed.contains(r#""language": "expr""#), "{fixed}");
    assert!(compiler.check(&fixed).is_empty(), "{fixed}");
}

#[test]
fn a_race_field_read_past_its_wrapper_is_fixed_to_the_winners_output() {
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    let src = r#"{"steps": [{"id": "fastest", "type": "parallel", "config": {"mode": "race", "branches": [
        [{"id": "a", "action": "crypto.uuid"}], [{"id": "b", "action": "crypto.uuid"}]]}},
        {"id": "use", "action": "workflow.log", "depends_on": ["fastest"], "params": {"message": "${{steps.fastest.output.result}}"}}]}"#;
    let found = compiler.check(src).into_sorted();
    let race = found.iter().find(|d| d.code.id == "E0037").expect("E0037");
    let (fixed, _) = opcode_compiler::diagnostics::apply_fixes(src, [race]);
    assert!(
        fixed.contains("steps.fastest.output.output.result"),
        "{fixed}"
    );
}

#[test]
fn a_reasoning_steps_settings_under_params_are_one_error_with_a_rename() {
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    let src = r#"{"steps": [{"id": "review", "type": "reasoning", "params": {"prompt_context": "Ship?", "options": [{"id": "yes"}, {"id": "no"}]}}]}"#;
    let found = compiler.check(src).into_sorted();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].code.id, "E0011");
    let (fixed, _) = opcode_compiler::diagnostics::apply_fixes(src, &found);
    assert!(compiler.check(&fixed).is_empty(), "{fixed}");
}

/// Applies every fix of `src` as text edits and, separately, as RFC 6902
/// patches (with `json-patch`, as a client would): both give the same
/// document, which checks clean.
fn fixes_clean(src: &str) {
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    let found = compiler.check(src).into_sorted();
    assert!(!found.is_empty(), "no diagnostic in {src}");
    let (edited, _) = opcode_compiler::diagnostics::apply_fixes(src, &found);
    let left = compiler.check(&edited).into_sorted();
    assert!(left.is_empty(), "{src}\nfixed to {edited}\nleaves {left:?}");
    let mut patched: serde_json::Value = serde_json::from_str(src).unwrap();
    for fix in found.iter().filter_map(|d| d.fix.as_ref()) {
        let patch: json_patch::Patch =
            serde_json::from_value(serde_json::to_value(&fix.patch).unwrap()).unwrap();
        json_patch::patch(&mut patched, &patch).unwrap_or_else(|e| panic!("{src}: {e}"));
    }
    assert_eq!(
        patched,
        serde_json::from_str::<serde_json::Value>(&edited).unwrap(),
        "{src}"
    );
}

#[test]
fn the_obvious_edits_are_fixes_that_apply_as_text_and_as_patches() {
    for src in [
        r#"{"steps": [{"id": "a", "action": "crypto.uuid", "on_error": "ignore"}]}"#,
        r#"{"steps": [{"id": "a", "action": "crypto.uuid"}, {"id": "b", "action": "crypto.uuid", "depends_on": ["a"], "condition": "steps.a.uuid = 'x'"}]}"#,
        r#"{"steps": [{"id": "a", "action": "crypto.uuid", "on_error": {"strategy": "fallback_step", "fallback": "b"}}, {"id": "b", "action": "crypto.uuid"}]}"#,
        r#"{"steps": [{"id": "l", "type": "loop", "config": {"mode": "for_each", "over": [1, 2], "body": [{"id": "x", "action": "crypto.uuid"}]}}]}"#,
        r#"{"steps": [{"id": "a", "action": "crypto.sha512", "params": {"data": "x"}}]}"#,
        r#"{"steps": [{"id": "a", "action": "expr.eval", "params": {"language": "expr", "expression": "uppercase('x')"}}]}"#,
        // Four reads of a parallel's steps from a step without depends_on:
        // one dependency on the parallel, added as an array.
        r#"{"steps": [{"id": "p", "type": "parallel", "config": {"branches": [
            [{"id": "b1", "action": "crypto.uuid"}], [{"id": "b2", "action": "crypto.uuid"}]]}},
            {"id": "use", "action": "workflow.log", "params": {"message": "${{steps.b1.output.uuid}} ${{steps.b2.output.uuid}} ${{steps.b1.output.uuid}} ${{steps.b2.output.uuid}}"}}]}"#,
    ] {
        fixes_clean(src);
    }
}

#[test]
fn a_broken_text_in_exprs_syntax_gets_exprs_error_not_cels() {
    let found = codes(
        r#"{"steps": [{"id": "a", "action": "expr.eval", "params": {"expression": "filter(inputs.xs, {.x > })"}}]}"#,
    );
    assert_eq!(found, ["E0054"]);
    let plain = codes(
        r#"{"steps": [{"id": "a", "action": "expr.eval", "params": {"expression": "a > > 1"}}]}"#,
    );
    assert_eq!(plain, ["E0030"]);
}

#[test]
fn a_has_test_picks_true_or_false_too() {
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    let src = r#"{"steps": [{"id": "pick", "type": "condition", "config": {"expression": "has(inputs.region)",
        "branches": {"on": [{"id": "a", "action": "workflow.log", "params": {"message": "x"}}]}}}]}"#;
    let found = compiler.check(src).into_sorted();
    assert_eq!(
        found.iter().map(|d| d.code.id).collect::<Vec<_>>(),
        ["E0060"]
    );
    let (fixed, _) = opcode_compiler::diagnostics::apply_fixes(src, &found);
    assert!(fixed.contains(r#""true": ["#), "{fixed}");
}

#[test]
fn a_concurrency_block_is_checked_field_by_field() {
    let with = |block: &str| {
        codes(&format!(
            r#"{{"concurrency": {block}, "inputs": {{"env": "prod"}}, "steps": [{}]}}"#,
            log("a", "x")
        ))
    };
    let none: Vec<&str> = Vec::new();
    assert_eq!(
        with(r#"{"key": "deploy-${{inputs.env}}", "limit": 2}"#),
        none
    );
    assert_eq!(
        with(r#"{"key": "${{workflow.agent_id}}", "limit": 1, "on_limit": "refuse_newest"}"#),
        none
    );
    assert_eq!(with(r#"{"limit": 1, "on_limit": "cancel_running"}"#), none);
    assert_eq!(with(r#"{"key": "x", "limit": 0}"#), ["E0017"]);
    assert_eq!(with(r#"{"key": "x"}"#), ["E0017"]);
    assert_eq!(with(r#"{"limit": 1, "on_limit": "queued"}"#), ["E0014"]);
    assert_eq!(
        with(r#"{"key": "${{workflow.run_id}}", "limit": 1}"#),
        ["E0063"]
    );
    assert_eq!(
        with(r#"{"key": "${{context.env}}-${{secrets.T}}", "limit": 1}"#),
        ["E0063", "E0063"]
    );
    assert_eq!(with(r#"{"key": 7, "limit": 1}"#), ["E0010"]);
}

#[test]
fn a_concurrency_block_compiles_the_same_from_opc() {
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    let json = r#"{"concurrency": {"key": "deploy-${{inputs.env}}", "limit": 1}, "steps": [{"id": "a", "action": "workflow.log", "params": {"message": "x"}}]}"#;
    let opc = "concurrency { key: \"deploy-${{inputs.env}}\", limit: 1 }\nstep a workflow.log { params { message: \"x\" } }\n";
    let (from_json, d1) = compiler.compile(json, "w.json");
    let (from_opc, d2) = compiler.compile(opc, "w.opc");
    let (from_json, from_opc) = (
        from_json.unwrap_or_else(|| panic!("{d1:?}")),
        from_opc.unwrap_or_else(|| panic!("{d2:?}")),
    );
    assert!(from_json.run.concurrency.is_some());
    assert_eq!(from_json.run.concurrency, from_opc.run.concurrency);
}

#[test]
fn a_rate_limit_is_checked_field_by_field() {
    let with = |block: &str| {
        codes(&format!(
            r#"{{"inputs": {{"tenant": "acme"}}, "steps": [{{"id": "a", "action": "workflow.log",
              "rate_limit": {block}, "params": {{"message": "x"}}}}]}}"#
        ))
    };
    let none: Vec<&str> = Vec::new();
    assert_eq!(with(r#"{"limit": 10, "per": "1m"}"#), none);
    assert_eq!(with(r#"{"key": "host", "limit": 10, "per": "1s"}"#), none);
    assert_eq!(
        with(r#"{"key": "api-${{inputs.tenant}}", "limit": 1, "per": "1h"}"#),
        none
    );
    assert_eq!(with(r#"{"limit": 10, "per": "500ms"}"#), ["E0017"]);
    assert_eq!(with(r#"{"limit": 10}"#), ["E0017"]);
    assert_eq!(with(r#"{"limit": 0, "per": "1m"}"#), ["E0017"]);
    assert_eq!(
        with(r#"{"key": "${{steps.x.output}}", "limit": 1, "per": "1m"}"#),
        ["E0063"]
    );
    assert_eq!(with(r#"{"limit": 1, "per": "1m", "burst": 2}"#), ["W0001"]);
}
