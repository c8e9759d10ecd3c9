//! `opcode.run`'s `priority` (spec/flow-control.md): kept in the run's
//! `run_started`, bounded by the settings' `priority_highest`.

use serde_json::json;

use super::{api, err, ok};

async fn started_priority(api: &opcode_daemon::api::Api, priority: u8) -> serde_json::Value {
    let run = ok(
        api,
        "opcode.run",
        json!({"template_name": "log", "priority": priority}),
    )
    .await;
    let id = run["workflow_id"].as_str().unwrap();
    let events = ok(
        api,
        "opcode.query",
        json!({"resource": "events", "filter": {"workflow_id": id, "event_type": "run_started"}}),
    )
    .await;
    events["events"][0]["payload"]["meta"]["priority"].clone()
}

#[tokio::test]
async fn a_run_keeps_the_priority_asked_within_what_the_settings_allow() {
    let define = json!({"name": "log", "definition": {"steps": [
        {"id": "say", "action": "workflow.log", "params": {"message": "hi"}}]}});
    let plain = api();
    ok(&plain, "opcode.define", define.clone()).await;
    assert_eq!(
        started_priority(&plain, 9).await,
        9,
        "a lower priority is always allowed"
    );
    let refused = err(
        &plain,
        "opcode.run",
        json!({"template_name": "log", "priority": 2}),
    )
    .await;
    let refused = refused.to_json()["error"].clone();
    assert_eq!(refused["code"], "R0122", "{refused}");
    assert_eq!(refused["details"]["highest"], 5, "{refused}");
    let too_low = err(
        &plain,
        "opcode.run",
        json!({"template_name": "log", "priority": 10}),
    )
    .await;
    assert_eq!(too_low.to_json()["error"]["code"], "R0122");

    let trusted = api().with_priority_highest(0);
    ok(&trusted, "opcode.define", define).await;
    assert_eq!(
        started_priority(&trusted, 0).await,
        0,
        "the operator lets callers go first"
    );
}
