//! The checks every HTTP request passes first: `Host` (against DNS
//! rebinding), `Origin` (a browser page of another site gets 403) and, when
//! configured, a bearer token (401 without it).

use std::sync::{Arc, PoisonError, RwLock};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

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
            let given = headers
                .get(header::AUTHORIZATION)
                .and_then(|h| h.to_str().ok())
                .and_then(|h| h.strip_prefix("Bearer "));
            if !given.is_some_and(|g| same(g.as_bytes(), token.as_bytes())) {
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
fn same(a: &[u8], b: &[u8]) -> bool {
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
        Some((status, message)) => (status, message).into_response(),
        None => next.run(request).await,
    }
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
    }
}
