//! `opcode.run`'s `idempotency_key` (spec/flow-control.md, "De-duplication"):
//! a call again with the same key gets the run the first started.

use serde_json::json;

use super::{api, err, ok};

#[tokio::test]
async fn the_same_idempotency_key_starts_one_run() {
    let api = api();
    let define = json!({"name": "log", "definition": {"steps": [
        {"id": "say", "action": "workflow.log", "params": {"message": "hi"}}]}});
    ok(&api, "opcode.define", define).await;
    let run = |key: &str, wait: bool| json!({"template_name": "log", "idempotency_key": key, "wait": wait});
    let first = ok(&api, "opcode.run", run("order-1", false)).await;
    assert!(first.get("duplicate").is_none(), "{first}");
    let again = ok(&api, "opcode.run", run("order-1", true)).await;
    assert_eq!(again["workflow_id"], first["workflow_id"], "{again}");
    assert_eq!(
        (again["duplicate"].clone(), again["status"].clone()),
        (json!(true), json!("completed"))
    );
    let once_more = ok(&api, "opcode.run", run("order-1", false)).await;
    assert_eq!(once_more["workflow_id"], first["workflow_id"]);
    assert_eq!(once_more["duplicate"], true);
    let other = ok(&api, "opcode.run", run("order-2", true)).await;
    assert_ne!(
        other["workflow_id"], first["workflow_id"],
        "another key, another run"
    );
    let runs = ok(
        &api,
        "opcode.query",
        json!({"resource": "workflows", "filter": {"template_name": "log"}}),
    )
    .await;
    assert_eq!(runs["total"], 2, "{runs}");
    let blank = err(&api, "opcode.run", run("  ", false)).await.to_json()["error"].clone();
    assert_eq!(blank["code"], "R0122", "{blank}");
    // Two calls at once with one key: one run, both answered with it.
    let (a, b) = tokio::join!(
        ok(&api, "opcode.run", run("order-3", true)),
        ok(&api, "opcode.run", run("order-3", true))
    );
    assert_eq!(a["workflow_id"], b["workflow_id"], "{a} {b}");
    assert_eq!(
        (a["status"].clone(), b["status"].clone()),
        (json!("completed"), json!("completed"))
    );
    let duplicates = [&a, &b].iter().filter(|v| v["duplicate"] == true).count();
    assert_eq!(duplicates, 1, "{a} {b}");
}
