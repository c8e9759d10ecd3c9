//! `opcode.query` of `test_cases`: runs at rest as workflow test cases.

use serde_json::json;

use super::{api, err, ok, review};

#[tokio::test]
async fn a_finished_run_is_given_as_a_test_case() {
    let api = api();
    ok(&api, "opcode.define", review()).await;
    let run = ok(&api, "opcode.run", json!({"template_name": "review"})).await;
    let id = run["workflow_id"].as_str().unwrap().to_owned();
    ok(
        &api,
        "opcode.signal",
        json!({"workflow_id": id, "signal_type": "decision", "step_id": "approve",
               "payload": {"choice": "yes"}, "reasoning": "fine"}),
    )
    .await;
    let found = ok(
        &api,
        "opcode.query",
        json!({"resource": "test_cases", "filter": {"workflow_id": id}}),
    )
    .await;
    assert_eq!(
        (found["count"].as_u64(), found["total"].as_u64()),
        (Some(1), Some(1))
    );
    let case = &found["test_cases"][0];
    assert_eq!(case["name"], format!("golden run {id} (review)"));
    assert_eq!(case["inputs"], json!({"who": "world"}));
    assert_eq!(case["decisions"], json!({"approve": "yes"}));
    assert_eq!(case["expect"]["status"], "completed");
    assert_eq!(case["expect"]["steps"]["greet"]["status"], "completed");
}

#[tokio::test]
async fn runs_at_rest_are_listed_as_cases_and_running_ones_refused() {
    let api = api();
    ok(&api, "opcode.define", review()).await;
    let suspended = ok(&api, "opcode.run", json!({"template_name": "review"})).await;
    ok(&api, "opcode.run", json!({"template_name": "review"})).await;
    let cases = ok(
        &api,
        "opcode.query",
        json!({"resource": "test_cases", "filter": {"template_name": "review"}, "limit": 1}),
    )
    .await;
    assert_eq!(
        (cases["count"].as_u64(), cases["total"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(cases["has_more"], true);
    assert_eq!(cases["test_cases"][0]["expect"]["status"], "suspended");
    let busy = err(
        &api,
        "opcode.query",
        json!({"resource": "test_cases", "filter": {"status": "active"}}),
    )
    .await;
    assert_eq!(busy.code.id, "R0122");
    assert!(busy.message.contains("not at rest"), "{busy:?}");
    let unknown = err(
        &api,
        "opcode.query",
        json!({"resource": "test_cases", "filter": {"workflow_id": "nope"}}),
    )
    .await;
    assert_eq!(unknown.code.id, "R0121");
    let mixed = err(
        &api,
        "opcode.query",
        json!({"resource": "test_cases",
               "filter": {"workflow_id": suspended["workflow_id"], "status": "failed"}}),
    )
    .await;
    assert!(mixed.message.contains("drop `filter.status`"), "{mixed:?}");
}
