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
