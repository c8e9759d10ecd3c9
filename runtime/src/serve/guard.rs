//! The checks every HTTP request passes first: `Host` (against DNS
//! rebinding), `Origin` (a browser page of another site gets 403) and, when
//! configured, a token: the bearer header, or the panel's sign-in cookie
//! (401 without it; a browser asking for a page is sent to `/login`).

use std::sync::{Arc, PoisonError, RwLock};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

/// The cookie the panel's sign-in page sets to the token.
pub const TOKEN_COOKIE: &str = "opcode_token";

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
    /// The bearer token every request must carry, if any.
    pub token: Option<String>,
}

impl Guard {
    /// Why `headers` are refused, if they are.
    pub fn check(&self, headers: &HeaderMap) -> Option<(StatusCode, &'static str)> {
        if let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok())
            && !self.host_allowed(host)
        {
            return Some((StatusCode::FORBIDDEN, "forbidden host"));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let allowed = origin.to_str().is_ok_and(|o| self.origin_allowed(o));
            if !allowed {
                return Some((StatusCode::FORBIDDEN, "forbidden origin"));
            }
        }
        if let Some(token) = &self.token {
            let bearer = headers
                .get(header::AUTHORIZATION)
                .and_then(|h| h.to_str().ok())
                .and_then(|h| h.strip_prefix("Bearer "));
            let valid = |given: &str| same(given.as_bytes(), token.as_bytes());
            if !bearer.is_some_and(valid) && !cookie(headers, TOKEN_COOKIE).is_some_and(valid) {
                return Some((StatusCode::UNAUTHORIZED, "a bearer token is required"));
            }
        }
        None
    }

    fn host_allowed(&self, host: &str) -> bool {
        let name = host_name(host);
        is_loopback_name(name)
            || self
                .hosts
                .iter()
                .any(|h| h == "*" || h.eq_ignore_ascii_case(host) || h.eq_ignore_ascii_case(name))
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        if self.origins.iter().any(|o| o.eq_ignore_ascii_case(origin)) {
            return true;
        }
        let Some((scheme, rest)) = origin.split_once("://") else {
            return false;
        };
        matches!(scheme, "http" | "https") && is_loopback_name(host_name(rest))
    }
}

/// The value of cookie `name`, if the request carries it.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|h| h.to_str().ok())
        .flat_map(|h| h.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// `name` of `name:port`, `[v6]:port` or `name`.
fn host_name(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    authority.split(':').next().unwrap_or(authority)
}

fn is_loopback_name(name: &str) -> bool {
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Compares without stopping at the first difference.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The axum middleware.
pub async fn guard(
    State(guard): State<Arc<RwLock<Guard>>>,
    request: Request<Body>,
    next: Next,
) -> Response {
    let refused = guard
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .check(request.headers());
    match refused {
        Some((StatusCode::UNAUTHORIZED, _)) if request.uri().path() == SIGN_IN => {
            next.run(request).await
        }
        Some((StatusCode::UNAUTHORIZED, _)) if wants_page(request.headers()) => {
            Redirect::to(SIGN_IN).into_response()
        }
        Some((status, message)) => (status, message).into_response(),
        None => next.run(request).await,
    }
}

/// Is this a browser navigating to a page?
fn wants_page(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|h| h.to_str().ok())
        .is_some_and(|accept| accept.contains("text/html"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(name.clone(), HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn loopback_passes_and_foreign_origins_do_not() {
        let guard = Guard::default();
        let local = headers(&[
            (header::HOST, "127.0.0.1:4100"),
            (header::ORIGIN, "http://localhost:3000"),
        ]);
        assert!(guard.check(&local).is_none());
        assert!(
            guard
                .check(&headers(&[(header::HOST, "[::1]:4100")]))
                .is_none()
        );
        let evil = headers(&[
            (header::HOST, "127.0.0.1:4100"),
            (header::ORIGIN, "https://evil.example"),
        ]);
        assert_eq!(guard.check(&evil).unwrap().0, StatusCode::FORBIDDEN);
        let rebound = headers(&[(header::HOST, "evil.example:4100")]);
        assert_eq!(guard.check(&rebound).unwrap().0, StatusCode::FORBIDDEN);
        let sneaky = headers(&[(header::ORIGIN, "http://localhost.evil.example")]);
        assert_eq!(guard.check(&sneaky).unwrap().0, StatusCode::FORBIDDEN);
    }

    #[test]
    fn configured_hosts_origins_and_tokens() {
        let guard = Guard {
            hosts: vec!["opcode.lan".into()],
            origins: vec!["https://panel.lan".into()],
            token: Some("s3cret".into()),
        };
        let no_token = headers(&[(header::HOST, "opcode.lan:4100")]);
        assert_eq!(guard.check(&no_token).unwrap().0, StatusCode::UNAUTHORIZED);
        let good = headers(&[
            (header::HOST, "opcode.lan:4100"),
            (header::ORIGIN, "https://panel.lan"),
            (header::AUTHORIZATION, "Bearer s3cret"),
        ]);
        assert!(guard.check(&good).is_none());
        let wrong = headers(&[(header::AUTHORIZATION, "Bearer s3cre")]);
        assert_eq!(guard.check(&wrong).unwrap().0, StatusCode::UNAUTHORIZED);
        let signed_in = headers(&[(header::COOKIE, "theme=dark; opcode_token=s3cret")]);
        assert!(guard.check(&signed_in).is_none());
        let bad_cookie = headers(&[(header::COOKIE, "opcode_token=nope")]);
        assert_eq!(
            guard.check(&bad_cookie).unwrap().0,
            StatusCode::UNAUTHORIZED
        );
    }
}
