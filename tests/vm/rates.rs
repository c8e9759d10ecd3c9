//! Rate limits in the VM (spec/flow-control.md, "Rate limits"): a call
//! carries its key, and one the runtime throttled waits for its window.

use opcode_vm::event::RunMeta;
use opcode_vm::{RunStatus, StepStatus};
use serde_json::json;

use super::sim::Sim;

/// A throttled call (R0136, spec/flow-control.md "Rate limits") is made
/// again when its window ends, as the same attempt, by a durable timer;
/// it counts as no retry and the step's timeout does not run meanwhile.
#[test]
fn a_throttled_call_is_made_again_when_its_window_ends() {
    let source = r#"{"steps": [{"id": "post", "action": "http.get", "timeout": "1s",
        "rate_limit": {"key": "api-${{inputs.tenant}}", "limit": 2, "per": "1m"},
        "params": {"url": "http://x"}}]}"#;
    let meta = RunMeta {
        run_id: "rate".into(),
        template_name: Some("poster".into()),
        ..Default::default()
    };
    let mut sim = Sim::start_with(source, json!({"tenant": "acme"}), meta);
    let first = sim.dispatch_of("post").expect("dispatched");
    let rate = first
        .rate
        .clone()
        .expect("the dispatch carries its rate limit");
    assert_eq!(rate.key.as_deref(), Some("poster:api-acme"));
    assert_eq!((rate.limit, rate.per_ms), (2, 60_000));
    let throttled =
        opcode_vm::error::ActionError::new(opcode_vm::codes::R0136, "THROTTLED", "full", false)
            .with_details(json!({"until_ms": 1000 + 5_000}));
    sim.finish("post", Err(throttled));
    let waiting = sim.step("post");
    assert_eq!(waiting.status, StepStatus::Retrying);
    assert_eq!(waiting.error.expect("it says why").code, "R0136");
    assert!(
        sim.dispatch_of("post").is_none(),
        "nothing is called meanwhile"
    );
    // Longer than the step's timeout: the wait is not a call.
    sim.advance(4_000);
    assert_eq!(sim.step("post").status, StepStatus::Retrying);
    sim.advance(1_000);
    let again = sim
        .dispatch_of("post")
        .expect("called again when the window ends");
    assert_eq!(again.attempt, first.attempt, "the same attempt");
    sim.finish("post", Ok(json!({"status": 200})));
    assert_eq!(sim.status(), RunStatus::Completed);
    assert_eq!(
        sim.replayed().status(),
        RunStatus::Completed,
        "a replay agrees"
    );
}
