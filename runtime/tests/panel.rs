//! The panel's protections and the health and metrics routes, over a real
//! HTTP server: CSRF on every form, the token sign-in, `/readyz`,
//! `/metrics`, and the panel being off.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, RwLock};

use opcode_runtime::api::Api;
use opcode_runtime::panel::Panel;
use opcode_runtime::serve::{self, Guard, SharedGuard};
use opcode_runtime::store::memory::MemoryStore;
use opcode_runtime::{Config, EventStore, Executor};
use opcode_stdlib::exec::EnvSecrets;
use reqwest::StatusCode;
use reqwest::header;
use tokio_util::sync::CancellationToken;

/// Serves the routes (with the panel when `panel`) on a free port.
async fn serve(token: Option<&str>, panel: bool) -> String {
    let store: Arc<dyn EventStore> = Arc::new(MemoryStore::new());
    let api = Api::new(Executor::new(
        store,
        Arc::new(EnvSecrets),
        Config::default(),
    ));
    let guard: SharedGuard = Arc::new(RwLock::new(Guard {
        token: token.map(str::to_owned),
        ..Guard::default()
    }));
    let panel = panel.then(|| Panel::new(api.clone(), None, guard.clone()));
    let app = serve::router(api, None, guard, &CancellationToken::new(), panel);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

fn csrf_of(page: &str) -> String {
    let start = page.find("name=\"csrf-token\" content=\"").unwrap() + 27;
    page[start..start + 64].to_owned()
}

#[tokio::test]
async fn forms_need_the_csrf_token() {
    let base = serve(None, true).await;
    let http = client();
    let page = http
        .get(format!("{base}/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = csrf_of(&page);
    let form = |token: &str| {
        vec![
            ("csrf", token.to_owned()),
            ("name", "x".to_owned()),
            ("source", r#"{"steps": [{"id": "a", "action": "workflow.log", "params": {"message": "hi"}}]}"#.to_owned()),
        ]
    };
    for bad in ["", "0000", &csrf[..63]] {
        let answer = http
            .post(format!("{base}/templates"))
            .form(&form(bad))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::FORBIDDEN, "token `{bad}`");
    }
    let answer = http
        .post(format!("{base}/templates"))
        .form(&form(&csrf))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::SEE_OTHER);
    assert_eq!(answer.headers()[header::LOCATION], "/templates/x?version=1");
}

#[tokio::test]
async fn a_browser_signs_in_with_the_token() {
    let base = serve(Some("s3cret"), true).await;
    let http = client();
    let page = http
        .get(format!("{base}/"))
        .header(header::ACCEPT, "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::SEE_OTHER);
    assert_eq!(page.headers()[header::LOCATION], "/login");
    let api = http.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(api.status(), StatusCode::UNAUTHORIZED);
    let login = http.get(format!("{base}/login")).send().await.unwrap();
    assert_eq!(login.status(), StatusCode::OK);
    let wrong = http
        .post(format!("{base}/login"))
        .form(&[("token", "guess")])
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    let right = http
        .post(format!("{base}/login"))
        .form(&[("token", "s3cret")])
        .send()
        .await
        .unwrap();
    let cookie = right.headers()[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_owned();
    let signed_in = http
        .get(format!("{base}/"))
        .header(header::COOKIE, pair)
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), StatusCode::OK);
    let bearer = http
        .get(format!("{base}/metrics"))
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status(), StatusCode::OK);
}

#[tokio::test]
async fn health_metrics_and_the_panel_switched_off() {
    let base = serve(None, false).await;
    let http = client();
    let ready = http.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(
        (ready.status(), ready.text().await.unwrap().as_str()),
        (StatusCode::OK, "ok")
    );
    let metrics = http.get(format!("{base}/metrics")).send().await.unwrap();
    assert!(
        metrics.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    assert!(
        metrics
            .text()
            .await
            .unwrap()
            .contains("opcode_workflows{status=\"active\"} 0")
    );
    let page = http.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::NOT_FOUND);
    let missing = http
        .get(format!("{base}/api/runs/nope/ag-ui"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
}
