//! Rate limits through the executor (spec/flow-control.md, "Rate limits"):
//! calls past a step's limit wait for the next window and then complete;
//! none fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{config, executor, request, runtime};
use opcode_runtime::Until;
use opcode_runtime::store::WorkflowStatus;
use opcode_runtime::store::memory::MemoryStore;
use serde_json::json;

#[test]
fn calls_past_a_rate_limit_wait_for_the_next_window_and_complete() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let template = json!({"steps": [{"id": "note", "action": "workflow.log",
        "rate_limit": {"key": "notes", "limit": 2, "per": "3s"},
        "params": {"message": "hello"}}]});
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let mut runs = Vec::new();
        for _ in 0..5 {
            runs.push(exec.start(request(&template, &json!({}))).await.unwrap());
        }
        let mut throttled = 0;
        for id in &runs {
            let ended = tokio::time::timeout(Duration::from_secs(30), exec.wait(id, Until::Ended));
            assert_eq!(
                ended.await.unwrap().unwrap(),
                WorkflowStatus::Completed,
                "{id}"
            );
            let entries = exec.store().entries(id, 0, false).await.unwrap();
            if entries
                .iter()
                .any(|e| e.event_type == "step_retrying" && e.payload.contains("R0136"))
            {
                throttled += 1;
            }
        }
        // Five calls started within three seconds span two windows at most,
        // two calls each: at least one waited for a window.
        assert!(throttled >= 1, "{throttled} runs were throttled");
    });
}
