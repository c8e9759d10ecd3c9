//! The daemon's HTTP surface on one axum server: MCP over Streamable HTTP
//! at `/mcp` (rmcp), the legacy HTTP+SSE transport at `/sse` and
//! `/message`, and `/livez`; every route behind the [`guard`].

pub mod guard;
pub mod sse;

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use axum::Router;
use axum::routing::{get, post};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::api::Api;
use crate::mcp::{AgentSessions, OpcodeServer};

pub use guard::Guard;

/// The guard's settings, replaceable while serving (SIGHUP).
pub type SharedGuard = Arc<RwLock<Guard>>;

/// The routes, over `api`; `shutdown` ends open MCP sessions.
pub fn router(
    api: Api,
    base_url: Option<String>,
    guard: SharedGuard,
    shutdown: &CancellationToken,
) -> Router {
    let agents = Arc::new(AgentSessions::default());
    api.executor().set_notifier(agents.clone());
    let mcp = {
        let (api, agents) = (api.clone(), agents.clone());
        StreamableHttpService::new(
            move || Ok(OpcodeServer::new(api.clone(), agents.clone())),
            LocalSessionManager::default().into(),
            // Host and Origin are checked by our guard, for every route alike.
            StreamableHttpServerConfig::default()
                .with_cancellation_token(shutdown.child_token())
                .disable_allowed_hosts(),
        )
    };
    let sessions = sse::Sessions::new(api, agents, base_url);
    Router::new()
        .route("/sse", get(sse::connect))
        .route("/message", post(sse::post))
        .with_state(sessions)
        .route("/livez", get(|| async { "ok" }))
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(guard, guard::guard))
}

/// Is `addr` reachable only from this machine?
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}
