//! `opcode.run`'s `priority` (spec/flow-control.md): kept in the run's
//! `run_started`, bounded by the settings' `priority_highest`.

use serde_json::json;

use super::{api, err, ok};

async fn started_priority(
    api: &opcode_daemon::api::Api,
    priority: Option<u8>,
) -> serde_json::Value {
    let mut args = json!({"template_name": "log"});
    if let Some(priority) = priority {
        args["priority"] = priority.into();
    }
    let run = ok(api, "opcode.run", args).await;
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
        started_priority(&plain, Some(9)).await,
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
        started_priority(&trusted, Some(0)).await,
        0,
        "the operator lets callers go first"
    );
}

#[tokio::test]
async fn a_template_gives_its_runs_a_priority_within_the_same_bound() {
    let api = api();
    let define = |priority: u64| {
        json!({"name": "log", "priority": priority, "definition": {"steps": [
            {"id": "say", "action": "workflow.log", "params": {"message": "hi"}}]}})
    };
    ok(&api, "opcode.define", define(7)).await;
    assert_eq!(started_priority(&api, None).await, 7, "the template's own");
    assert_eq!(
        started_priority(&api, Some(5)).await,
        5,
        "raised as far as the settings allow"
    );
    let refused = err(
        &api,
        "opcode.run",
        json!({"template_name": "log", "priority": 4}),
    )
    .await;
    assert_eq!(refused.to_json()["error"]["code"], "R0122");

    let lifted = err(&api, "opcode.define", define(2)).await.to_json();
    assert_eq!(lifted["error"]["code"], "R0122", "{lifted}");
    let wrong = err(&api, "opcode.define", define(12)).await.to_json();
    assert_eq!(wrong["error"]["code"], "R0123", "{wrong}");
    let diagnostic = &wrong["error"]["details"]["diagnostics"][0];
    assert_eq!(diagnostic["code"], "E0014", "{diagnostic}");
    assert_eq!(diagnostic["pointer"], "/priority", "{diagnostic}");
}
