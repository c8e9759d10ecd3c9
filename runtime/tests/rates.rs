//! Rate limits through the executor (spec/flow-control.md, "Rate limits"):
//! calls past a step's limit wait for the next window and then complete;
//! none fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{config, executor, request, runtime};
use opcode_runtime::Until;
use opcode_runtime::store::memory::MemoryStore;
use opcode_runtime::store::{RateCall, Rated, WorkflowStatus};
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

/// Issue 61: a call is counted in its window only when nothing is left
/// between the count and the call. Counted and then kept waiting for a
/// worker, it would be made in a later window, beside that window's own
/// calls. Here the only worker is held; the rate-limited call waits for
/// it uncounted, so the window's one place goes to another caller, and
/// the call, once it has the worker, finds the window full and waits.
#[test]
fn a_call_waiting_for_a_worker_is_not_counted_until_it_has_one() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let mut settings = config(dir.path());
    settings.max_actions = 1;
    let base = dir.path().to_path_buf();
    runtime().block_on(async {
        let exec = executor(&store, settings);
        let holder = json!({"steps": [{"id": "hold", "action": "shell.exec", "params": {
            "command": "touch holding; while [ ! -f go ]; do sleep 0.02; done", "shell": true}}]});
        let held = exec.start(request(&holder, &json!({}))).await.unwrap();
        for _ in 0..1000 {
            if base.join("holding").exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let hourly = json!({"steps": [{"id": "note", "action": "workflow.log",
            "rate_limit": {"key": "host", "limit": 1, "per": "1h"},
            "params": {"message": "hello"}}]});
        let limited = exec.start(request(&hourly, &json!({}))).await.unwrap();
        for _ in 0..1000 {
            if exec.calls_waiting() == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            exec.calls_waiting(),
            1,
            "the limited call waits for the worker"
        );
        let other = RateCall {
            key: "host:workflow.log".into(),
            limit: 1,
            per_ms: 3_600_000,
        };
        let taken = exec.store().take_call(other).await.unwrap();
        assert!(
            matches!(taken, Rated::Counted { .. }),
            "the waiting call was counted before it could be made: {taken:?}"
        );
        std::fs::write(base.join("go"), "").unwrap();
        assert_eq!(
            exec.wait(&held, Until::Ended).await.unwrap(),
            WorkflowStatus::Completed
        );
        let throttled = async {
            loop {
                let entries = exec.store().entries(&limited, 0, false).await.unwrap();
                if entries
                    .iter()
                    .any(|e| e.event_type == "step_retrying" && e.payload.contains("R0136"))
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), throttled)
            .await
            .expect("the call, once it had the worker, waits for the next window");
    });
}
