//! The daemon's HTTP surface on one axum server: MCP over Streamable HTTP
//! at `/mcp` (rmcp), the legacy HTTP+SSE transport at `/sse` and
//! `/message`, the web panel, AG-UI run streams, `/metrics`, `/livez` and
//! `/readyz` (spec/panel.md); every route behind the [`guard`].

pub mod authority;
pub mod depth;
pub mod guard;
pub mod hooks;
pub mod sessions;
pub mod sse;
pub mod tenancy;
pub mod throttle;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::{ListenerExt, TapIo};
use futures::StreamExt;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::agui;
use crate::api::Api;
use crate::mcp::{AgentSessions, OpcodeServer};
use crate::metrics::Metrics;
use crate::panel::Panel;
use crate::stopping::Stopping;

pub use guard::{Gate, Guard, SharedGuard};

/// The routes, over `api`; `shutdown` ends open MCP sessions; the panel's
/// pages are served when `panel` is given.
pub fn router(
    api: Api,
    base_url: Option<String>,
    guard: SharedGuard,
    shutdown: &CancellationToken,
    panel: Option<Panel>,
) -> Router {
    let guard_state = guard::GuardState {
        gate: guard,
        metrics: api.metrics().clone(),
    };
    let agents = Arc::new(AgentSessions::default());
    api.executor().set_notifier(agents.clone());
    // Built once (its elicitor follows every run): each session, and each
    // stateless call, gets a handler of its own from it.
    let server = OpcodeServer::new(api.clone(), agents);
    let mcp = {
        let server = server.clone();
        let limits = api.executor().limits();
        StreamableHttpService::new(
            move || Ok(server.for_session()),
            sessions::BoundedSessions::new(limits.sessions, limits.session_idle),
            // Host and Origin are checked by our guard, for every route alike.
            // Stateless (2026-07-28) calls get a plain JSON answer when the
            // tool sends nothing before it (an SSE stream otherwise): the
            // Python SDK's round trip drops from 7.7 to 5.3 ms (benches/README).
            StreamableHttpServerConfig::default()
                .with_cancellation_token(shutdown.child_token())
                .disable_allowed_hosts()
                .with_json_response(true)
                .with_max_request_body_bytes(depth::MAX_BODY),
        )
    };
    let stopping = api.stopping().clone();
    let observability = Router::new()
        .route("/api/runs/{id}/ag-ui", get(agui::observe).post(agui::run))
        .route("/metrics", get(metrics))
        .route("/readyz", get(ready))
        .route("/hooks/{template}", post(hooks::deliver))
        .with_state(api);
    let sessions = sse::Sessions::new(server, base_url, stopping.clone(), shutdown.child_token());
    let mut router = Router::new()
        .route("/sse", get(sse::connect))
        .route(
            "/message",
            post(sse::post).layer(axum::extract::DefaultBodyLimit::max(depth::MAX_BODY)),
        )
        .with_state(sessions)
        .route("/livez", get(live))
        .merge(observability)
        .merge(
            Router::new()
                .nest_service("/mcp", mcp)
                .layer(axum::middleware::from_fn(depth::guard))
                .layer(axum::middleware::from_fn(session_ended))
                .layer(axum::middleware::from_fn_with_state(stopping, answered)),
        );
    router = match panel {
        Some(panel) => router.merge(crate::panel::router(panel)),
        None => router.fallback(unknown_route),
    };
    router.layer(axum::middleware::from_fn_with_state(
        guard_state,
        guard::guard,
    ))
}

/// `/livez`: alive, and which program answers (`opcode doctor` tells a
/// running daemon from another program holding the port).
async fn live() -> Response {
    ([(header::SERVER, SERVER)], "ok").into_response()
}

/// What `/livez` names itself in its `Server` header.
pub const SERVER: &str = concat!("opcode/", env!("CARGO_PKG_VERSION"));

/// Any other route, with the panel off: says so, and where things are.
async fn unknown_route(uri: axum::http::Uri) -> Response {
    (
        StatusCode::NOT_FOUND,
        format!(
            "there is no `{}` here: MCP is at /mcp (legacy SSE at /sse), health at /livez and /readyz, metrics at /metrics\n",
            uri.path()
        ),
    )
        .into_response()
}

/// A `POST /mcp` (a call), counted until answered: the daemon's stop
/// waits for it before ending the sessions (crate::stopping). An answer
/// sent as an event stream (a session's) is counted until the stream
/// ends; a `GET`'s stream lasts until the sessions end, so it is not.
async fn answered(
    State(stopping): State<Stopping>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if request.method() != axum::http::Method::POST {
        return next.run(request).await;
    }
    let answering = stopping.answering();
    let response = next.run(request).await;
    let streamed = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"));
    if !streamed {
        return response;
    }
    let (parts, body) = response.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        let _ = &answering;
        chunk
    });
    Response::from_parts(parts, axum::body::Body::from_stream(body))
}

/// A `DELETE /mcp` that ended its session answers 204 No Content: the
/// transport's 202 made the Python SDK warn "Session termination failed".
async fn session_ended(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let delete = request.method() == axum::http::Method::DELETE;
    let mut response = next.run(request).await;
    if delete && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    response
}

/// `GET /metrics`.
async fn metrics(State(api): State<Api>) -> Response {
    api.metrics().calls_waiting(api.executor().calls_waiting());
    match api
        .metrics()
        .render(api.executor().store().as_ref(), &api.plugins_report())
        .await
    {
        Ok(text) => ([(header::CONTENT_TYPE, Metrics::content_type())], text).into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response(),
    }
}

/// `GET /readyz`: ok when the database answers and takes writes.
async fn ready(State(api): State<Api>) -> Response {
    if let Some(failure) = api.executor().write_failure() {
        let since = opcode_runtime::log::stamp(failure.since_ms);
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the database refuses writes since {since}: {}",
                failure.error
            ),
        )
            .into_response();
    }
    match api.executor().store().workflow_counts().await {
        Ok(_) => "ok".into_response(),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the database does not answer: {e}"),
        )
            .into_response(),
    }
}

/// `listener` with Nagle's algorithm off on each connection it accepts: an
/// answer written in pieces (an SSE stream) would otherwise wait for the
/// client's delayed ACK, 40 ms on Linux, on a kept-alive connection.
pub fn without_delay(listener: TcpListener) -> TapIo<TcpListener, fn(&mut TcpStream)> {
    listener.tap_io(no_delay as fn(&mut TcpStream))
}

fn no_delay(stream: &mut TcpStream) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "cannot set TCP_NODELAY on a connection");
    }
}

/// Is `addr` reachable only from this machine?
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use axum::serve::Listener;

    use super::*;

    #[tokio::test]
    async fn accepted_connections_send_without_delay() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut listener = without_delay(listener);
        let _client = TcpStream::connect(addr).await.unwrap();
        let (stream, _) = listener.accept().await;
        assert!(stream.nodelay().unwrap());
    }
}
