//! The checks every HTTP request passes first (spec/security.md, "The
//! guard"): exactly one `Host` and at most one `Origin`, each read
//! strictly (400 otherwise); `Host` against DNS rebinding and `Origin`
//! against other sites' pages (403); and, when configured, the token: the
//! bearer header or the panel's sign-in cookie (401 without it; a browser
//! asking for a page is sent to `/login`). Wrong tokens are counted per
//! client and slowed down ([`Throttle`], 429), logged and counted in
//! `/metrics`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Instant;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

use super::authority::{Authority, Origin};
use super::throttle::Throttle;
use crate::metrics::Metrics;
use crate::secrets_compared::same;

/// Where webhooks are: a delivery there is checked by its template's
/// signature (`hooks.rs`), not the daemon's token.
pub const HOOKS: &str = "/hooks/";

/// The cookie the panel's sign-in page sets to the token.
pub const TOKEN_COOKIE: &str = "opcode_token";

/// The shortest token the daemon accepts.
pub const MIN_TOKEN_LEN: usize = 16;

/// The one path a request without the token may reach: the sign-in page.
const SIGN_IN: &str = "/login";

/// What the guard lets through.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    /// Hosts (`name` or `name:port`) accepted besides loopback names; `*`
    /// accepts any (a non-loopback bind without a base URL).
    pub hosts: Vec<String>,
    /// Origins (`scheme://host[:port]`) accepted besides loopback ones.
    pub origins: Vec<String>,
    /// The bearer tokens a request may carry, one of which it must when
    /// there are any (the operator's, or a tenant's, spec/security.md).
    pub tokens: Vec<String>,
    /// `/livez` and `/readyz` answer without the token (probes).
    pub open_probes: bool,
}

/// The health paths an orchestrator probes.
const PROBES: [&str; 2] = ["/livez", "/readyz"];

/// Why a request's headers are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Malformed or duplicated `Host`/`Origin` (400).
    Malformed(&'static str),
    /// A host or origin not allowed (403).
    Forbidden(&'static str),
    /// No token where one is needed (401).
    Missing,
    /// A wrong token (401, counted).
    Wrong,
}

/// Checks that a token can guard a daemon: long enough, and without
/// spaces or control characters (which no client sends back as they were
/// written, and which make a blank-looking token pass for a set one).
pub fn valid_token(token: &str) -> Result<(), String> {
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(
            "the token must not contain spaces, tabs, line breaks or control characters; \
             make one with `openssl rand -hex 32`"
                .into(),
        );
    }
    if token.chars().count() < MIN_TOKEN_LEN {
        return Err(format!(
            "the token must be at least {MIN_TOKEN_LEN} characters (an empty or short one is \
             guessed); make one with `openssl rand -hex 32`"
        ));
    }
    Ok(())
}

impl Guard {
    /// Why `headers` are refused, if they are.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let single = |name: &HeaderName| -> Result<Option<&str>, Refusal> {
            let mut values = headers.get_all(name).iter();
            let first = values.next();
            if values.next().is_some() {
                return Err(Refusal::Malformed("duplicate Host or Origin header"));
            }
            first
                .map(|v| {
                    v.to_str()
                        .map_err(|_| Refusal::Malformed("unreadable Host or Origin header"))
                })
                .transpose()
        };
        if let Some(host) = single(&header::HOST)? {
            let authority =
                Authority::parse(host).ok_or(Refusal::Malformed("malformed Host header"))?;
            if !self.host_allowed(host, &authority) {
                return Err(Refusal::Forbidden("forbidden host"));
            }
        }
        if let Some(origin) = single(&header::ORIGIN)?
            && !Origin::parse(origin).is_some_and(|o| self.origin_allowed(&o))
        {
            return Err(Refusal::Forbidden("forbidden origin"));
        }
        if self.tokens.is_empty() {
            return Ok(());
        }
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.strip_prefix("Bearer "));
        let cookie = cookie(headers, TOKEN_COOKIE);
        if bearer.is_none() && cookie.is_none() {
            return Err(Refusal::Missing);
        }
        let valid = |given: &str| self.accepts(given);
        if bearer.is_some_and(valid) || cookie.is_some_and(valid) {
            Ok(())
        } else {
            Err(Refusal::Wrong)
        }
    }

    /// Is `given` one of the tokens (compared in constant time, each)?
    pub fn accepts(&self, given: &str) -> bool {
        self.tokens.iter().fold(false, |found, token| {
            found | same(given.as_bytes(), token.as_bytes())
        })
    }

    fn host_allowed(&self, text: &str, host: &Authority) -> bool {
        host.is_loopback()
            || self.hosts.iter().any(|h| {
                h == "*" || h.eq_ignore_ascii_case(text) || h.eq_ignore_ascii_case(&host.host)
            })
    }

    fn origin_allowed(&self, origin: &Origin) -> bool {
        origin.authority.is_loopback()
            || self
                .origins
                .iter()
                .filter_map(|o| Origin::parse(o.trim_end_matches('/')))
                .any(|allowed| allowed.same(origin))
    }
}

/// The value of cookie `name`, if the request carries it.
pub fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|h| h.to_str().ok())
        .flat_map(|h| h.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// The guard's settings (replaceable while serving, on SIGHUP) and the
/// wrong-token throttle they share with the sign-in page.
#[derive(Debug, Default)]
pub struct Gate {
    guard: RwLock<Guard>,
    throttle: Throttle,
}

/// The gate, shared by the routes and the panel.
pub type SharedGuard = Arc<Gate>;

impl Gate {
    /// A gate with `guard`.
    pub fn new(guard: Guard) -> SharedGuard {
        Arc::new(Gate {
            guard: RwLock::new(guard),
            throttle: Throttle::default(),
        })
    }

    /// Replaces the guard's settings.
    pub fn replace(&self, guard: Guard) {
        *self.guard.write().unwrap_or_else(PoisonError::into_inner) = guard;
    }

    /// Does every request need a token?
    pub fn requires_token(&self) -> bool {
        !self.read().tokens.is_empty()
    }

    /// Is `given` one of the tokens?
    pub fn accepts(&self, given: &str) -> bool {
        self.read().accepts(given)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Guard> {
        self.guard.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many seconds `client` must still wait before its token is
    /// checked again (none: now).
    pub fn throttled(&self, client: IpAddr) -> Option<u64> {
        self.throttle
            .wait(client, Instant::now())
            .map(|d| d.as_secs_f64().ceil() as u64)
    }

    /// Notes a wrong token from `client` at `path`: logged and counted.
    pub fn wrong_token(&self, client: IpAddr, path: &str, metrics: &Metrics) {
        let failures = self.throttle.failed(client, Instant::now());
        metrics.sign_in("wrong_token");
        tracing::warn!(%client, path, failures, "a request with a wrong token");
    }

    /// Notes the right token from `client`.
    pub fn right_token(&self, client: IpAddr) {
        self.throttle.succeeded(client);
    }
}

/// What the guard middleware needs.
#[derive(Clone)]
pub struct GuardState {
    /// The gate.
    pub gate: SharedGuard,
    /// Where refusals are counted.
    pub metrics: Arc<Metrics>,
}

/// The client's address (loopback when the server does not say).
pub fn client_of(request: &Request<Body>) -> IpAddr {
    address(request.extensions())
}

fn address(extensions: &axum::http::Extensions) -> IpAddr {
    extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::LOCALHOST), |c| c.0.ip())
}

/// The client's address, as an extractor.
#[derive(Debug, Clone, Copy)]
pub struct Client(pub IpAddr);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Client {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Client, Self::Rejection> {
        Ok(Client(address(&parts.extensions)))
    }
}

/// A 429 telling the client to come back in `seconds`.
pub fn too_many(seconds: u64, metrics: &Metrics) -> Response {
    metrics.sign_in("throttled");
    let retry =
        HeaderValue::from_str(&seconds.max(1).to_string()).unwrap_or(HeaderValue::from_static("1"));
    (
        StatusCode::TOO_MANY_REQUESTS,
        [(header::RETRY_AFTER, retry)],
        "too many wrong tokens from this address: wait, then try again",
    )
        .into_response()
}

/// The axum middleware.
pub async fn guard(
    State(state): State<GuardState>,
    request: Request<Body>,
    next: Next,
) -> Response {
    let (checked, open_probes) = {
        let guard = state.gate.read();
        (guard.check(request.headers()), guard.open_probes)
    };
    let signing_in = request.uri().path() == SIGN_IN;
    let open_probe = open_probes && PROBES.contains(&request.uri().path());
    // A webhook's sender has the template's secret, not the daemon's token.
    let hook = request.uri().path().starts_with(HOOKS);
    match checked {
        Err(Refusal::Malformed(message)) => (StatusCode::BAD_REQUEST, message).into_response(),
        Err(Refusal::Forbidden(message)) => (StatusCode::FORBIDDEN, message).into_response(),
        Ok(()) | Err(Refusal::Missing | Refusal::Wrong) if hook => next.run(request).await,
        Err(Refusal::Missing) if signing_in || open_probe => next.run(request).await,
        Err(Refusal::Missing) => unauthorized(request.headers()),
        Ok(()) if !state.gate.requires_token() => next.run(request).await,
        // A token was presented: checked only when the client may try.
        Ok(()) | Err(Refusal::Wrong) => {
            let client = client_of(&request);
            if let Some(wait) = state.gate.throttled(client) {
                return too_many(wait, &state.metrics);
            }
            if checked.is_ok() {
                state.gate.right_token(client);
                return next.run(request).await;
            }
            state
                .gate
                .wrong_token(client, request.uri().path(), &state.metrics);
            if signing_in {
                next.run(request).await
            } else {
                unauthorized(request.headers())
            }
        }
    }
}

/// The answer to a request without the right token: a browser is sent to
/// the sign-in page, anything else gets 401.
fn unauthorized(headers: &HeaderMap) -> Response {
    if wants_page(headers) {
        return Redirect::to(SIGN_IN).into_response();
    }
    (
        StatusCode::UNAUTHORIZED,
        // RFC 6750: says which scheme to answer with.
        [(header::WWW_AUTHENTICATE, "Bearer realm=\"opcode\"")],
        "a bearer token is required",
    )
        .into_response()
}

/// Is this a browser navigating to a page?
fn wants_page(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|h| h.to_str().ok())
        .is_some_and(|accept| accept.contains("text/html"))
}
