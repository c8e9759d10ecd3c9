//! A run's budget of output bytes (spec/limits.md, `run_outputs`): an
//! output that would pass it is not kept and its attempt fails with R0130,
//! and a replay of the log takes the same path.

use opcode_vm::event::RunMeta;
use opcode_vm::{RunStatus, StepStatus};
use serde_json::json;

use super::sim::Sim;

const TWO_STEPS: &str = r#"{"steps": [
    {"id": "a", "action": "http.get", "params": {"url": "http://x"}},
    {"id": "b", "action": "http.get", "depends_on": ["a"], "params": {"url": "http://x"}}]}"#;

fn with_budget(bytes: u64) -> Sim {
    let meta = RunMeta {
        run_id: "budget".into(),
        max_output_bytes: Some(bytes),
        ..Default::default()
    };
    Sim::start_with(TWO_STEPS, json!({}), meta)
}

#[test]
fn an_output_past_the_runs_budget_fails_its_step() {
    let mut sim = with_budget(100);
    sim.finish("a", Ok(json!({"body": "x".repeat(40)})));
    assert_eq!(sim.step("a").status, StepStatus::Completed);
    sim.finish("b", Ok(json!({"body": "y".repeat(60)})));
    let b = sim.step("b");
    let error = b.error.expect("b failed");
    assert_eq!(error.code, "R0130");
    assert_eq!(error.details.unwrap()["limit"], "run_outputs");
    assert_eq!(b.output, serde_json::Value::Null, "the output is not kept");
    assert_eq!(sim.status(), RunStatus::Failed);
    assert_eq!(
        sim.replayed().status(),
        RunStatus::Failed,
        "a replay agrees"
    );
}

#[test]
fn outputs_within_the_budget_are_kept() {
    let mut sim = with_budget(1000);
    sim.finish("a", Ok(json!({"body": "x".repeat(40)})));
    sim.finish("b", Ok(json!({"body": "y".repeat(60)})));
    assert_eq!(sim.status(), RunStatus::Completed);
}

const WAITS: &str = r#"{"steps": [
    {"id": "hold", "type": "wait", "config": {"signal": "go"}}]}"#;

fn signal(name: &str, text: &str) -> opcode_vm::event::Event {
    opcode_vm::event::Event::Signal {
        name: name.into(),
        payload: json!({"text": text}),
    }
}

#[test]
fn signals_count_against_the_budget_and_one_with_no_room_is_refused() {
    let meta = RunMeta {
        run_id: "signals".into(),
        max_output_bytes: Some(100),
        ..Default::default()
    };
    let mut sim = Sim::start_with(WAITS, json!({}), meta);
    // Nobody waits for `other`: it is kept, and counted.
    sim.apply(signal("other", &"x".repeat(45)))
        .expect("room for it");
    let refused = sim.apply(signal("other", &"y".repeat(45))).unwrap_err();
    assert_eq!(refused.code.id, "R0130", "{refused}");
    assert!(refused.message.contains("limits.run_outputs"), "{refused}");
    // A small one still fits, and the waiting step takes it.
    sim.apply(signal("go", "z")).expect("room for a small one");
    assert_eq!(sim.status(), RunStatus::Completed);
}

#[test]
fn context_updates_count_against_the_budget() {
    let updates = r#"{"steps": [
        {"id": "a", "action": "workflow.context", "params": {"action": "update", "data": {"k": "${{inputs.big}}"}}}]}"#;
    let meta = RunMeta {
        run_id: "context".into(),
        max_output_bytes: Some(100),
        ..Default::default()
    };
    let mut sim = Sim::start_with(updates, json!({"big": "x".repeat(200)}), meta);
    sim.finish("a", Ok(json!({"updated": true})));
    let error = sim.step("a").error.expect("a failed");
    assert_eq!(error.details.unwrap()["limit"], "run_outputs");
    assert_eq!(sim.status(), RunStatus::Failed);
}
