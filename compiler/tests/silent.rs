//! Cases that used to pass silently (spec/language.md; issue 20): each now
//! reads as a value or gets a diagnostic. The snapshot shows the source,
//! the diagnostics as people read them, and, where they carry fixes, the
//! source with the fixes applied, which must check clean.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test helpers may panic

use std::fmt::Write as _;

use opcode_compiler::Compiler;
use opcode_compiler::diagnostics::apply_fixes;
use opcode_compiler::diagnostics::render::human;

fn compiler() -> Compiler {
    Compiler::new().with_actions(opcode_stdlib::catalog())
}

/// The snapshot text of `source`: its diagnostics, then the fixed source
/// when a fix applies (asserting that what remains is exactly the
/// diagnostics that had no fix).
fn reviewed(source: &str) -> String {
    let compiler = compiler();
    let diagnostics = compiler.check(source).into_sorted();
    assert!(!diagnostics.is_empty(), "no diagnostic for {source}");
    let rendered = human::render(&diagnostics, "workflow.json", source, false);
    let mut out = format!("--- SOURCE\n{source}\n--- DIAGNOSTICS\n{rendered}");
    let (fixed, applied) = apply_fixes(source, &diagnostics);
    if applied > 0 {
        let left: Vec<_> = compiler
            .check(&fixed)
            .into_sorted()
            .iter()
            .map(|d| d.code.id)
            .collect();
        let unfixed: Vec<_> = diagnostics
            .iter()
            .filter(|d| d.fix.is_none())
            .map(|d| d.code.id)
            .collect();
        assert_eq!(
            left, unfixed,
            "the fixes did not remove their own diagnostics: {fixed}"
        );
        let _ = writeln!(out, "--- FIXED ({applied})\n{fixed}");
    }
    out
}

#[test]
fn a_secret_as_an_inputs_default_is_refused() {
    insta::assert_snapshot!(reviewed(
        r#"{"inputs": {"token": "${{secrets.API_TOKEN}}", "note": "for ${{inputs.who}}"},
 "steps": [{"id": "call", "action": "http.get", "params": {"url": "https://example.com", "headers": {"Authorization": "${{inputs.token}}"}}}]}"#
    ));
}

#[test]
fn an_undeclared_input_gets_the_nearest_declared_name() {
    insta::assert_snapshot!(reviewed(
        r#"{"inputs": {"target": "prod"},
 "steps": [{"id": "go", "action": "workflow.log", "condition": "inputs.targt != ''", "params": {"message": "to ${{inputs.targt}}"}}]}"#
    ));
}

#[test]
fn opcodes_workdir_is_renamed_to_cwd() {
    insta::assert_snapshot!(reviewed(
        r#"{"steps": [{"id": "build", "action": "shell.exec", "params": {"command": "make", "workdir": "/src"}}]}"#
    ));
}

#[test]
fn a_decisions_texts_are_checked_like_interpolation() {
    insta::assert_snapshot!(reviewed(
        r#"{"steps": [{"id": "probe", "action": "crypto.uuid"},
 {"id": "review", "type": "reasoning", "depends_on": ["probe"], "config": {
   "prompt_context": "Ship ${{steps.prob.output.uuid}}?",
   "options": [{"id": "ship", "description": "with ${{secrets.KEY}}"}]}}]}"#
    ));
}

#[test]
fn a_decisions_texts_that_read_values_compile() {
    let source = r#"{"steps": [{"id": "probe", "action": "crypto.uuid"},
 {"id": "review", "type": "reasoning", "depends_on": ["probe"], "config": {
   "prompt_context": "Ship ${{steps.probe.output.uuid}}?",
   "options": [{"id": "ship", "description": "deploy ${{inputs.build}}"}]}}]}"#;
    let diagnostics = compiler().check(source).into_sorted();
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
}

#[test]
fn cel_paths_are_checked_against_output_shapes() {
    insta::assert_snapshot!(reviewed(
        r#"{"steps": [{"id": "fetch", "action": "http.get", "params": {"url": "https://example.com"}},
 {"id": "ok", "action": "workflow.log", "depends_on": ["fetch"],
  "condition": "steps.fetch.statuscode == 200 && steps.fetch.output.body != ''", "params": {"message": "up"}}]}"#
    ));
}

#[test]
fn cel_paths_that_exist_pass() {
    let source = r#"{"steps": [{"id": "fetch", "action": "http.get", "params": {"url": "https://example.com"}},
 {"id": "route", "type": "condition", "depends_on": ["fetch"], "config": {"expression": "steps['fetch']['status_code'] == 200",
   "branches": {"true": [{"id": "t", "action": "workflow.log", "params": {"message": "up"}}]}}},
 {"id": "after", "action": "workflow.log", "depends_on": ["route"],
  "condition": "steps.route.output != null && steps.fetch.headers['x'] != ''", "params": {"message": "done"}}]}"#;
    let diagnostics = compiler().check(source).into_sorted();
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
}

#[test]
fn unknown_cel_functions_are_errors_with_cels_name() {
    insta::assert_snapshot!(reviewed(
        r#"{"steps": [{"id": "count", "action": "expr.eval", "params": {"expression": "len(inputs.items)"}},
 {"id": "any", "action": "workflow.log", "depends_on": ["count"],
  "condition": "inputs.items.exsts(i, i > 1) && upper(inputs.name) == 'X' && timestamp(inputs.at) > timestamp('2020-01-01T00:00:00Z')",
  "params": {"message": "x"}}]}"#
    ));
}

#[test]
fn other_languages_logic_words_get_cels_operators() {
    insta::assert_snapshot!(reviewed(
        r#"{"steps": [{"id": "go", "action": "workflow.log", "condition": "inputs.ready and not inputs.paused or inputs.force", "params": {"message": "x"}}]}"#
    ));
}

#[test]
fn expr_eval_reads_steps_as_a_guard_does() {
    insta::assert_snapshot!(reviewed(
        r#"{"steps": [{"id": "fetch", "action": "http.get", "params": {"url": "https://example.com"}},
 {"id": "calc", "action": "expr.eval", "params": {"expression": "steps.fetch.statuscode == 200"}}]}"#
    ));
}

#[test]
fn expr_is_checked_like_cel() {
    insta::assert_snapshot!(reviewed(
        r#"{"inputs": {"threshold": 0.5},
 "steps": [{"id": "fetch", "action": "http.get", "params": {"url": "https://example.com"}},
 {"id": "calc", "action": "expr.eval", "depends_on": ["fetch"], "params": {"expression": "filter(step.fetch.body, {.score > thresold}) | lenn()"}},
 {"id": "code", "action": "expr.eval", "params": {"expression": "steps.fetch.statuscode ?? 0"}}]}"#
    ));
}

#[test]
fn expr_syntax_and_unavailable_functions_are_errors() {
    insta::assert_snapshot!(reviewed(
        r#"{"steps": [{"id": "a", "action": "expr.eval", "params": {"language": "expr", "expression": "filter(inputs.xs, {.a > })"}},
 {"id": "b", "action": "expr.eval", "params": {"expression": "now() ?? toJSON(inputs) ?? inputs.s.upper()"}},
 {"id": "c", "action": "expr.eval", "params": {"language": "cel", "expression": "all(inputs.xs, {.ok})"}}]}"#
    ));
}

#[test]
fn names_that_are_no_cel_variable_are_errors() {
    insta::assert_snapshot!(reviewed(
        r#"{"steps": [{"id": "a", "action": "workflow.log", "params": {"message": "x"}},
 {"id": "b", "action": "workflow.log", "depends_on": ["a"],
  "condition": "stepz.a.logged && inputs.xs.all(x, x > 0) && inptus.flag && [1].map(i, i + 1).size() > 0",
  "params": {"message": "y"}}]}"#
    ));
}
