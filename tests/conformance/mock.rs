//! A mock HTTP server for the examples' endpoints.
//!
//! Every path answers; routes from `expect.toml` set the status and body of
//! a path (and can fail the first N calls, to exercise retries). Unknown
//! paths answer `200 {"ok": true}`. Requests are recorded.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::expect::Route;

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The method.
    pub method: String,
    /// The path.
    pub path: String,
}

#[derive(Default)]
struct Shared {
    routes: Vec<Route>,
    calls: HashMap<String, u32>,
    seen: Vec<Seen>,
}

/// A running mock server.
pub struct Mock {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    shared: Arc<Mutex<Shared>>,
}

impl Mock {
    /// Starts a server with these routes.
    pub async fn start(routes: Vec<Route>) -> Mock {
        let shared = Arc::new(Mutex::new(Shared {
            routes,
            ..Shared::default()
        }));
        let app = Router::new().fallback(answer).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Mock { base, shared }
    }

    /// The requests received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.shared
            .lock()
            .map(|s| s.seen.clone())
            .unwrap_or_default()
    }
}

async fn answer(
    State(shared): State<Arc<Mutex<Shared>>>,
    method: Method,
    uri: Uri,
    _body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let Ok(mut shared) = shared.lock() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    shared.seen.push(Seen {
        method: method.to_string(),
        path: path.clone(),
    });
    let count = {
        let c = shared.calls.entry(path.clone()).or_insert(0);
        *c += 1;
        *c
    };
    let route = shared
        .routes
        .iter()
        .find(|r| {
            r.path == path
                && r.method
                    .as_deref()
                    .is_none_or(|m| m.eq_ignore_ascii_case(method.as_str()))
        })
        .cloned();
    let Some(route) = route else {
        return (
            StatusCode::OK,
            [("content-type", "application/json")],
            r#"{"ok":true}"#,
        )
            .into_response();
    };
    if count <= route.fail_first {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [("content-type", "application/json")],
            r#"{"error":"try again"}"#,
        )
            .into_response();
    }
    let status = StatusCode::from_u16(route.status).unwrap_or(StatusCode::OK);
    match route.body {
        Value::String(text) => (status, [("content-type", "text/plain")], text).into_response(),
        json => (
            status,
            [("content-type", "application/json")],
            json.to_string(),
        )
            .into_response(),
    }
}
