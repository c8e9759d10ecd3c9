//! The web panel (spec/panel.md): server-rendered pages over the store and
//! the MCP tools' logic ([`Api`]), so an action taken here is the same as
//! the tool call. Every page works without JavaScript; the embedded script
//! only refreshes the live parts of a page.

mod assets;
mod clock;
mod dashboard;
mod decisions;
mod diff;
mod events;
mod form;
mod gantt;
mod layout;
mod live;
mod login;
mod plugins;
mod pruned;
mod registry;
mod scheduler;
mod secrets;
pub mod session;
mod steps;
mod templates;
mod test_case;
mod triggers;
mod url;
mod workflows;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use serde_json::Value;

use self::session::{Session, Sessions};
use crate::api::{Api, ToolError};
use crate::serve::guard::SharedGuard;
use opcode_runtime::store::EventStore;
use opcode_runtime::vault::Vault;

/// A submitted form's fields.
pub(crate) type Fields = HashMap<String, String>;

/// The page a list's `?page=` asks for, from 1.
pub(crate) fn page_of(query: &Fields) -> u32 {
    query
        .get("page")
        .and_then(|p| p.parse().ok())
        .unwrap_or(1)
        .max(1)
}

/// What the panel's pages share. A handler's `Panel` also carries the
/// CSRF token of the browser session it serves.
#[derive(Clone)]
pub struct Panel {
    api: Api,
    csrf: String,
    sessions: Arc<Sessions>,
    vault: Option<Arc<Vault>>,
    guard: SharedGuard,
    /// The zone and moment the request's page is rendered in.
    clock: clock::Clock,
    /// The request's path and query (where the zone toggle comes back to).
    here: String,
}

impl std::fmt::Debug for Panel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Panel").finish_non_exhaustive()
    }
}

impl Panel {
    /// The panel over `api`; `vault` (when open) lets it set secrets,
    /// `guard` holds the token the sign-in page checks, and cookies are
    /// `Secure` when `secure` (the public URL is https).
    pub fn new(api: Api, vault: Option<Arc<Vault>>, guard: SharedGuard, secure: bool) -> Panel {
        Panel {
            api,
            csrf: String::new(),
            sessions: Arc::new(Sessions::new(secure)),
            vault,
            guard,
            clock: clock::Clock::default(),
            here: "/".to_owned(),
        }
    }

    fn store(&self) -> &Arc<dyn EventStore> {
        self.api.executor().store()
    }

    /// The newest version of each template.
    async fn latest_templates(
        &self,
    ) -> Result<Vec<opcode_runtime::store::TemplateRow>, opcode_runtime::store::StoreError> {
        self.store()
            .templates(opcode_runtime::store::TemplateFilter {
                latest_only: true,
                ..opcode_runtime::store::TemplateFilter::default()
            })
            .await
    }

    /// Is `given` the CSRF token of the request's session?
    fn csrf_ok(&self, given: Option<&str>) -> bool {
        !self.csrf.is_empty()
            && given.is_some_and(|given| {
                crate::secrets_compared::same(given.as_bytes(), self.csrf.as_bytes())
            })
    }
}

impl FromRequestParts<Panel> for Panel {
    type Rejection = std::convert::Infallible;

    /// The panel, with the CSRF token of the request's session.
    async fn from_request_parts(
        parts: &mut Parts,
        panel: &Panel,
    ) -> Result<Panel, Self::Rejection> {
        let mut panel = panel.clone();
        if let Some(Session(id)) = parts.extensions.get::<Session>() {
            panel.csrf = panel.sessions.csrf(id);
        }
        panel.clock = clock::Clock::of_request(&parts.headers);
        parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .clone_into(&mut panel.here);
        Ok(panel)
    }
}

/// The panel's routes.
pub fn router(panel: Panel) -> Router {
    Router::new()
        .route("/", get(dashboard::page))
        .route("/workflows", get(workflows::list).post(workflows::bulk))
        .route("/workflows/{id}", get(workflows::detail))
        .route("/workflows/{id}/test.json", get(test_case::download))
        .route("/workflows/{id}/{action}", post(workflows::act))
        .route("/templates", get(templates::list).post(templates::create))
        .route("/templates/{name}", get(templates::detail))
        .route("/templates/{name}/run", post(templates::run))
        .route("/templates/{name}/compare", get(templates::compare))
        .route("/decisions", get(decisions::list))
        .route("/decisions/resolve", post(decisions::resolve))
        .route("/scheduler", get(scheduler::list).post(scheduler::create))
        .route("/scheduler/preview", get(scheduler::preview))
        .route("/scheduler/{id}/{action}", post(scheduler::act))
        .route("/events", get(events::list))
        .route("/agents", get(events::agents))
        .route("/registry", get(registry::list))
        .route("/triggers", get(triggers::list))
        .route("/registry/{name}", get(registry::detail))
        .route("/plugins", get(plugins::list))
        .route("/secrets", get(secrets::list).post(secrets::set))
        .route("/secrets/{name}/delete", post(secrets::delete))
        .route("/login", get(login::page).post(login::submit))
        .route("/times", get(clock::choose))
        .route("/panel/live", get(live::stream))
        .route("/static/{file}", get(assets::serve))
        .fallback(unknown_route)
        .layer(axum::middleware::from_fn_with_state(
            panel.clone(),
            session::layer,
        ))
        .with_state(panel)
}

/// Any other route: the panel's "not found" page, with the way back.
async fn unknown_route(
    panel: Panel,
    uri: axum::http::Uri,
    axum::extract::Query(query): axum::extract::Query<Fields>,
) -> Response {
    layout::not_found(&panel, "", &query, &format!("page `{}` here", uri.path()))
}

/// How long an action waits for the tool's answer before the page returns
/// (the action carries on; the live view shows what follows).
const ANSWER_WAIT: Duration = Duration::from_secs(3);

/// A page saying the database could not be read.
pub(crate) fn failure(error: &dyn std::fmt::Display) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!("the database could not be read: {error}"),
    )
        .into_response()
}

/// Calls tool `name`, waiting at most [`ANSWER_WAIT`] for its answer: a
/// refusal comes back at once, while a call that runs on (a resumed
/// workflow's steps) is left to finish in the background.
pub(crate) async fn call(
    panel: &Panel,
    name: &'static str,
    args: Value,
) -> Result<Option<Value>, ToolError> {
    let api = panel.api.clone();
    let task = tokio::spawn(async move { api.call(name, args).await });
    match tokio::time::timeout(ANSWER_WAIT, task).await {
        Ok(Ok(result)) => result.map(Some),
        Ok(Err(e)) => Err(ToolError::new(
            opcode_vm::codes::R0109,
            format!("the call stopped: {e}"),
        )),
        Err(_) => Ok(None),
    }
}

/// Back to `to` after a form, with `error` shown there if the action failed.
fn back(to: &str, error: Option<String>) -> Response {
    match error {
        None => Redirect::to(to).into_response(),
        Some(message) => {
            let sep = if to.contains('?') { '&' } else { '?' };
            let message = layout::encode(&message);
            Redirect::to(&format!("{to}{sep}error={message}")).into_response()
        }
    }
}

/// A posted form carrying its session's CSRF token (the field `csrf`, or
/// the header `X-CSRF-Token`): the only way the panel's actions read a
/// form, so none can skip the check (403 otherwise).
pub(crate) struct Posted(pub(crate) Fields);

impl FromRequest<Panel> for Posted {
    type Rejection = Response;

    async fn from_request(request: Request, state: &Panel) -> Result<Posted, Response> {
        let (mut parts, body) = request.into_parts();
        let Ok(panel) = Panel::from_request_parts(&mut parts, state).await;
        let header = parts
            .headers
            .get("x-csrf-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let request = Request::from_parts(parts, body);
        let Form(fields) = Form::<Fields>::from_request(request, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let given = header.as_deref().or(fields.get("csrf").map(String::as_str));
        if panel.csrf_ok(given) {
            Ok(Posted(fields))
        } else {
            Err((
                StatusCode::FORBIDDEN,
                "missing or wrong CSRF token: reload the page and try again",
            )
                .into_response())
        }
    }
}
