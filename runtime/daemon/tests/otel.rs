//! Traces: a run's spans reach an OTLP/HTTP collector (a stand-in that
//! records what is posted), one per step attempt under one per run.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use opcode_runtime::store::memory::MemoryStore;
use opcode_runtime::{Config, EventStore, Executor, StartRequest, Until};
use opcode_stdlib::exec::EnvSecrets;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// A collector on a free port; answers its base URL and what it received.
async fn collector() -> (String, Arc<Mutex<Vec<Value>>>) {
    let received = Arc::new(Mutex::new(Vec::new()));
    let kept = received.clone();
    let app = Router::new().route(
        "/v1/traces",
        post(move |body: Bytes| {
            let kept = kept.clone();
            async move {
                kept.lock()
                    .unwrap()
                    .push(serde_json::from_slice::<Value>(&body).unwrap());
                "{}"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, received)
}

#[tokio::test]
async fn a_run_and_its_steps_become_one_trace() {
    let (base, received) = collector().await;
    let store: Arc<dyn EventStore> = Arc::new(MemoryStore::new());
    let exec = Executor::new(store, Arc::new(EnvSecrets), Config::default());
    let stop = CancellationToken::new();
    opcode_daemon::otel::start(&exec, &base, stop.clone()).unwrap();
    let definition = json!({"steps": [
        {"id": "first", "action": "workflow.log", "params": {"message": "one"}},
        {"id": "second", "action": "workflow.log", "depends_on": ["first"], "params": {"message": "two"}}
    ]});
    let id = exec
        .start(StartRequest {
            definition: definition.to_string(),
            inputs: json!({}),
            ..StartRequest::default()
        })
        .await
        .unwrap();
    exec.wait(&id, Until::Ended).await.unwrap();

    let mut spans = Vec::new();
    for _ in 0..50 {
        spans = received
            .lock()
            .unwrap()
            .iter()
            .flat_map(|body| {
                body["resourceSpans"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .flat_map(|r| r["scopeSpans"].as_array().cloned().unwrap_or_default())
            .flat_map(|s| s["spans"].as_array().cloned().unwrap_or_default())
            .collect();
        if spans.len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let named = |name: &str| {
        spans
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no span `{name}` in {spans:?}"))
    };
    let run = named("run");
    for step in ["step first", "step second"] {
        let span = named(step);
        assert_eq!(span["traceId"], run["traceId"]);
        assert_eq!(span["parentSpanId"], run["spanId"]);
    }
    assert_eq!(spans.len(), 3, "{spans:?}");
    let body = &received.lock().unwrap()[0];
    let service = &body["resourceSpans"][0]["resource"]["attributes"];
    assert!(
        service.to_string().contains("\"opcode\""),
        "service name: {service}"
    );
    stop.cancel();
}
