//! `triggers.webhook` over the daemon's real routes: a delivery starts one
//! run however often it is sent, a bad signature starts none, and the
//! body is checked against the template's `input_schema`.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::Arc;

use hmac::{Hmac, KeyInit, Mac};
use opcode_daemon::api::Api;
use opcode_daemon::serve::{self, Gate, Guard};
use opcode_runtime::store::memory::MemoryStore;
use opcode_runtime::store::{RunLog, WorkflowFilter};
use opcode_runtime::{Config, EventStore, Executor};
use opcode_stdlib::exec::{BoxFuture, Secrets};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Sha256;
use tokio_util::sync::CancellationToken;

/// The secret every hook of these tests shares with its sender.
const SECRET: &str = "whsec-shared-with-the-sender";
/// The daemon's own token: a webhook's sender does not have it.
const TOKEN: &str = "the-daemons-own-token";

struct HookSecrets;

impl Secrets for HookSecrets {
    fn secret<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            match name {
                "HOOK" => Some(SECRET.to_owned()),
                "SHORT" => Some("short".to_owned()),
                _ => None,
            }
        })
    }
}

/// The daemon's routes with a token, on a free port, and its store.
async fn daemon() -> (String, Api, Arc<MemoryStore>) {
    let store = Arc::new(MemoryStore::new());
    let dyn_store: Arc<dyn EventStore> = store.clone();
    let api = Api::new(Executor::new(
        dyn_store,
        Arc::new(HookSecrets),
        Config::default(),
    ));
    let guard = Gate::new(Guard {
        tokens: vec![TOKEN.into()],
        ..Guard::default()
    });
    let app = serve::router(api.clone(), None, guard, &CancellationToken::new(), None)
        .into_make_service_with_connect_info::<SocketAddr>();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, api, store)
}

async fn define(api: &Api, name: &str, webhook: Value) {
    api.call(
        "opcode.define",
        json!({"name": name, "triggers": {"webhook": webhook},
               "input_schema": {"type": "object", "required": ["action"],
                                "properties": {"action": {"type": "string"}}},
               "definition": {"steps": [{"id": "log", "action": "workflow.log",
                   "params": {"message": "${{inputs.action}}"}}]}}),
    )
    .await
    .unwrap();
}

fn signature(payload: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(payload);
    hex::encode(mac.finalize().into_bytes())
}

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// The inputs of the run a delivery answered with.
async fn inputs_of(store: &MemoryStore, workflow_id: &Value) -> Value {
    let row = store
        .workflow(workflow_id.as_str().unwrap())
        .await
        .unwrap()
        .unwrap();
    serde_json::from_str(&row.inputs).unwrap()
}

async fn runs(store: &MemoryStore) -> Vec<String> {
    store
        .workflows(WorkflowFilter::default())
        .await
        .unwrap()
        .into_iter()
        .map(|w| w.id)
        .collect()
}

async fn post(
    base: &str,
    name: &str,
    headers: &[(&str, String)],
    body: &str,
) -> (StatusCode, Value) {
    let mut request = client()
        .post(format!("{base}/hooks/{name}"))
        .header("content-type", "application/json")
        .body(body.to_owned());
    for (header, value) in headers {
        request = request.header(*header, value);
    }
    let answer = request.send().await.unwrap();
    let status = answer.status();
    (status, answer.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_delivery_sent_twice_starts_one_run() {
    let (base, api, store) = daemon().await;
    define(&api, "on-push", json!({"secret": "HOOK"})).await;
    let body = r#"{"action": "opened", "number": 7}"#;
    let headers = [
        (
            "X-Hub-Signature-256",
            format!("sha256={}", signature(body.as_bytes())),
        ),
        (
            "X-GitHub-Delivery",
            "72d3162e-cc78-11e3-81ab-4c9367dc0958".to_owned(),
        ),
    ];
    let (status, first) = post(&base, "on-push", &headers, body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{first}");
    assert_eq!(first["duplicate"], false);
    let (status, again) = post(&base, "on-push", &headers, body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{again}");
    assert_eq!(
        (&again["workflow_id"], &again["duplicate"]),
        (&first["workflow_id"], &json!(true))
    );
    assert_eq!(runs(&store).await, [first["workflow_id"].as_str().unwrap()]);
    let inputs = inputs_of(&store, &first["workflow_id"]).await;
    assert_eq!(
        inputs,
        json!({"action": "opened", "number": 7}),
        "the body is the input"
    );
    // Another delivery is another run.
    let other = [
        headers[0].clone(),
        ("X-GitHub-Delivery", "another".to_owned()),
    ];
    let (_, second) = post(&base, "on-push", &other, body).await;
    assert_ne!(second["workflow_id"], first["workflow_id"]);
    assert_eq!(runs(&store).await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_sent_again_while_its_run_works_leaves_the_run_alone() {
    let (base, api, store) = daemon().await;
    api.call(
        "opcode.define",
        json!({"name": "slow", "triggers": {"webhook": {"secret": "HOOK"}},
               "definition": {"steps": [
                   {"id": "nap", "action": "shell.exec", "params": {"command": "sleep", "args": ["1"]}},
                   {"id": "log", "action": "workflow.log", "depends_on": ["nap"],
                    "params": {"message": "done"}}]}}),
    )
    .await
    .unwrap();
    let body = r#"{"action": "opened"}"#;
    let headers = [
        (
            "X-Hub-Signature-256",
            format!("sha256={}", signature(body.as_bytes())),
        ),
        ("X-GitHub-Delivery", "retried".to_owned()),
    ];
    let (_, first) = post(&base, "slow", &headers, body).await;
    let id = first["workflow_id"].as_str().unwrap().to_owned();
    // The sender retries while the run is still in its first step.
    let (status, again) = post(&base, "slow", &headers, body).await;
    assert_eq!(
        (status, &again["duplicate"]),
        (StatusCode::ACCEPTED, &json!(true)),
        "{again}"
    );
    assert_eq!(
        api.executor().loaded(),
        vec![id.as_str()],
        "the run is still here"
    );
    let status = api
        .executor()
        .wait(&id, opcode_runtime::Until::Ended)
        .await
        .unwrap();
    assert_eq!(status.as_str(), "completed");
    let naps = store
        .entries(&id, 0, false)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.event_type == "step_started")
        .count();
    assert_eq!(naps, 2, "each step once");
}

#[tokio::test]
async fn a_bad_signature_gets_401_and_starts_nothing() {
    let (base, api, store) = daemon().await;
    define(&api, "on-push", json!({"secret": "HOOK"})).await;
    let body = r#"{"action": "opened"}"#;
    let forged = format!("sha256={}", signature(br#"{"action": "closed"}"#));
    for headers in [
        vec![("X-Hub-Signature-256", forged)],
        vec![(
            "X-Hub-Signature-256",
            "sha256=".to_owned() + &"0".repeat(64),
        )],
        vec![],
        // The daemon's own token is not the hook's secret.
        vec![("Authorization", format!("Bearer {TOKEN}"))],
    ] {
        let (status, answer) = post(&base, "on-push", &headers, body).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{headers:?}: {answer}");
    }
    assert!(runs(&store).await.is_empty());
    // Everything else still needs the daemon's token.
    let mcp = client().post(format!("{base}/mcp")).send().await.unwrap();
    assert_eq!(mcp.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn the_body_must_match_the_input_schema() {
    let (base, api, store) = daemon().await;
    define(&api, "on-push", json!({"secret": "HOOK"})).await;
    for (body, expected) in [
        (r#"{"number": 7}"#, StatusCode::UNPROCESSABLE_ENTITY),
        ("not json", StatusCode::BAD_REQUEST),
        ("[1, 2]", StatusCode::BAD_REQUEST),
    ] {
        let headers = [("X-Hub-Signature-256", signature(body.as_bytes()))];
        let (status, answer) = post(&base, "on-push", &headers, body).await;
        assert_eq!(status, expected, "{body}: {answer}");
        if expected == StatusCode::UNPROCESSABLE_ENTITY {
            assert_eq!(answer["error"]["code"], "R0108", "{answer}");
        }
    }
    assert!(runs(&store).await.is_empty());
}

#[tokio::test]
async fn a_token_hook_and_a_delivery_id_from_the_body() {
    let (base, api, store) = daemon().await;
    define(
        &api,
        "from-queue",
        json!({"secret": "HOOK", "auth": "token", "delivery": "body:/id"}),
    )
    .await;
    let body = r#"{"id": "msg-1", "action": "enqueued"}"#;
    let bearer = [("Authorization", format!("Bearer {SECRET}"))];
    let (status, first) = post(&base, "from-queue", &bearer, body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{first}");
    let (_, again) = post(&base, "from-queue", &bearer, body).await;
    assert_eq!(again["workflow_id"], first["workflow_id"]);
    let wrong = [("Authorization", "Bearer not-the-secret-at-all".to_owned())];
    assert_eq!(
        post(&base, "from-queue", &wrong, body).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(runs(&store).await.len(), 1);
}

#[tokio::test]
async fn hooks_that_are_not_there_or_not_ready_say_so() {
    let (base, api, store) = daemon().await;
    api.call(
        "opcode.define",
        json!({"name": "plain", "definition": {"steps": [{"id": "a", "action": "workflow.log",
               "params": {"message": "hi"}}]}}),
    )
    .await
    .unwrap();
    assert_eq!(
        post(&base, "plain", &[], "{}").await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        post(&base, "nothing", &[], "{}").await.0,
        StatusCode::NOT_FOUND
    );
    define(&api, "unset", json!({"secret": "NOT_SET"})).await;
    define(&api, "weak", json!({"secret": "SHORT"})).await;
    for name in ["unset", "weak"] {
        let headers = [("X-Hub-Signature-256", signature(b"{}"))];
        assert_eq!(
            post(&base, name, &headers, "{}").await.0,
            StatusCode::SERVICE_UNAVAILABLE
        );
    }
    assert!(runs(&store).await.is_empty());
    let refused = api
        .call(
            "opcode.define",
            json!({"name": "bad", "triggers": {"webhook": {"secret": "HOOK", "auth": "basic"}},
                   "definition": {"steps": [{"id": "a", "action": "workflow.log",
                       "params": {"message": "hi"}}]}}),
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code.id, "R0122");
    assert_eq!(
        refused.details.unwrap()["pointer"],
        "/triggers/webhook/auth"
    );
}

#[tokio::test]
async fn the_body_may_be_one_input_beside_fixed_params() {
    let (base, api, store) = daemon().await;
    api.call(
        "opcode.define",
        json!({"name": "webhook-handler",
               "triggers": {"webhook": {"secret": "HOOK", "body_as": "payload",
                                        "params": {"destination_url": "https://example.test/in"}}},
               "input_schema": {"type": "object", "required": ["payload", "destination_url"]},
               "definition": {"steps": [{"id": "a", "action": "workflow.log",
                   "params": {"message": "${{inputs.payload.event}}"}}]}}),
    )
    .await
    .unwrap();
    let body = r#"{"event": "push"}"#;
    let headers = [("X-Hub-Signature-256", signature(body.as_bytes()))];
    let (status, answer) = post(&base, "webhook-handler", &headers, body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
    let inputs = inputs_of(&store, &answer["workflow_id"]).await;
    assert_eq!(
        inputs,
        json!({"payload": {"event": "push"}, "destination_url": "https://example.test/in"})
    );
}

/// A burst of 20 pushes to a debounced hook starts one run, after the burst
/// falls quiet, with the last push's params (spec/flow-control.md,
/// "Debounce"); another key gathers on its own.
#[tokio::test]
async fn a_debounced_burst_starts_one_run_with_the_input_it_keeps() {
    let (base, api, store) = daemon().await;
    let debounce = json!({"key": "${{inputs.action}}", "period": "1s", "keep": "last"});
    define(
        &api,
        "on-push",
        json!({"secret": "HOOK", "debounce": debounce}),
    )
    .await;
    let mut pending = Vec::new();
    for n in 0..20 {
        let body = json!({"action": "pushed", "n": n}).to_string();
        let headers = [
            (
                "X-Hub-Signature-256",
                format!("sha256={}", signature(body.as_bytes())),
            ),
            ("X-GitHub-Delivery", format!("delivery-{n}")),
        ];
        let (status, answer) = post(&base, "on-push", &headers, &body).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
        assert_eq!(
            (answer["debounced"].clone(), answer["deliveries"].clone()),
            (json!(true), json!(n + 1))
        );
        pending.push(answer["workflow_id"].clone());
    }
    assert!(
        pending.iter().all(|id| *id == pending[0]),
        "one run for the burst: {pending:?}"
    );
    let body = json!({"action": "closed"}).to_string();
    let headers = [(
        "X-Hub-Signature-256",
        format!("sha256={}", signature(body.as_bytes())),
    )];
    let (_, other) = post(&base, "on-push", &headers, &body).await;
    assert_ne!(other["workflow_id"], pending[0], "another key");
    assert!(
        runs(&store).await.is_empty(),
        "nothing starts during the burst"
    );
    let later = opcode_runtime::time::now_ms() + 2_000;
    opcode_daemon::scheduler::tick(api.executor(), later)
        .await
        .unwrap();
    opcode_daemon::scheduler::tick(api.executor(), later)
        .await
        .unwrap();
    let mut started = runs(&store).await;
    started.sort();
    let mut expected = vec![
        pending[0].as_str().unwrap().to_owned(),
        other["workflow_id"].as_str().unwrap().to_owned(),
    ];
    expected.sort();
    assert_eq!(started, expected, "one run a key, started once");
    assert_eq!(
        inputs_of(&store, &pending[0]).await["n"],
        19,
        "the last push's params"
    );
}

/// A signed push of `action` to hook `name`: its answer.
async fn push(base: &str, name: &str, action: &str) -> Value {
    let body = json!({"action": action}).to_string();
    let headers = [(
        "X-Hub-Signature-256",
        format!("sha256={}", signature(body.as_bytes())),
    )];
    let (status, answer) = post(base, name, &headers, &body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
    answer
}

/// Issue 61: a debounced run's id is announced at its burst's first
/// delivery; from then `opcode.status` answers it (`pending`, when it
/// starts) and a cancel holds: the run is cancelled before any step, the
/// scheduler does not start it when the burst falls quiet, and the next
/// delivery opens a burst of its own. (Before, both answered R0121 and
/// the run started anyway.)
#[tokio::test]
async fn a_debounced_run_is_seen_and_cancelled_from_its_first_delivery() {
    let (base, api, store) = daemon().await;
    let debounce = json!({"key": "${{inputs.action}}", "period": "1s", "keep": "last"});
    define(
        &api,
        "on-push",
        json!({"secret": "HOOK", "debounce": debounce}),
    )
    .await;
    let first = push(&base, "on-push", "pushed").await;
    let id = first["workflow_id"].as_str().unwrap().to_owned();
    let seen = api
        .call("opcode.status", json!({"workflow_id": id}))
        .await
        .unwrap();
    assert_eq!(
        (
            seen["status"].clone(),
            seen["debounced"]["deliveries"].clone()
        ),
        (json!("pending"), json!(1)),
        "{seen}"
    );
    let cancelled = api
        .call(
            "opcode.signal",
            json!({"workflow_id": id, "signal_type": "cancel", "payload": {"reason": "not this one"}}),
        )
        .await
        .unwrap();
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    let later = opcode_runtime::time::now_ms() + 2_000;
    opcode_daemon::scheduler::tick(api.executor(), later)
        .await
        .unwrap();
    let row = store.workflow(&id).await.unwrap().unwrap();
    assert_eq!(row.status.as_str(), "cancelled");
    let log: Vec<String> = store
        .entries(&id, 0, false)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event_type)
        .collect();
    assert!(
        !log.iter().any(|e| e.starts_with("action_")),
        "no step of the cancelled run ran: {log:?}"
    );
    let again = push(&base, "on-push", "pushed").await;
    assert_ne!(
        again["workflow_id"].as_str(),
        Some(id.as_str()),
        "a new burst"
    );
    assert_eq!(again["deliveries"], 1);
    assert_eq!(runs(&store).await, [id], "nothing else started");
    // An id no burst announced is still unknown.
    let unknown = api
        .call(
            "opcode.status",
            json!({"workflow_id": "debounce-000000000000000000000000"}),
        )
        .await
        .unwrap_err();
    assert_eq!(unknown.code.id, "R0121");
}
