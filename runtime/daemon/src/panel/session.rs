//! A browser's panel session: a random id in an `HttpOnly`,
//! `SameSite=Strict` cookie (`Secure` when the daemon's public URL is
//! https), and the CSRF token derived from it, an HMAC under a key drawn
//! when the daemon starts: a token is good for one browser's session only,
//! and a page shown to one visitor gives nothing to another.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use hmac::{KeyInit, Mac};

use super::Panel;
use crate::serve::guard::cookie;

/// The session cookie.
pub const SESSION_COOKIE: &str = "opcode_session";

/// A request's session id.
#[derive(Debug, Clone)]
pub struct Session(pub String);

/// The daemon's session key and cookie attributes.
#[derive(Clone)]
pub struct Sessions {
    key: [u8; 32],
    secure: bool,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("secure", &self.secure)
            .finish_non_exhaustive()
    }
}

impl Sessions {
    /// A fresh key; cookies are `Secure` when `secure`.
    pub fn new(secure: bool) -> Sessions {
        let mut key = [0u8; 32];
        key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        key[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        Sessions { key, secure }
    }

    /// The CSRF token of session `id`.
    pub fn csrf(&self, id: &str) -> String {
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&self.key)
            .unwrap_or_else(|e| unreachable!("any key length: {e}"));
        mac.update(id.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }

    /// A `Set-Cookie` value for `name=value`, for the whole panel.
    pub fn cookie(&self, name: &str, value: &str) -> String {
        let secure = if self.secure { "; Secure" } else { "" };
        format!("{name}={value}; Path=/; HttpOnly; SameSite=Strict{secure}")
    }
}

/// A fresh session id: 64 random hex digits.
pub fn new_id() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Is `id` a session id this daemon could have made (64 hex digits)?
fn well_formed(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Middleware: the request's session, from its cookie or new (then set on
/// the response), in the request's extensions.
pub async fn layer(State(panel): State<Panel>, mut request: Request, next: Next) -> Response {
    let existing = cookie(request.headers(), SESSION_COOKIE)
        .filter(|id| well_formed(id))
        .map(str::to_owned);
    let fresh = existing.is_none();
    let id = existing.unwrap_or_else(new_id);
    request.extensions_mut().insert(Session(id.clone()));
    let mut response = next.run(request).await;
    if fresh && let Ok(value) = HeaderValue::from_str(&panel.sessions.cookie(SESSION_COOKIE, &id)) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_belong_to_one_session_and_one_daemon() {
        let sessions = Sessions::new(true);
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        assert_eq!(sessions.csrf(&a), sessions.csrf(&a));
        assert_ne!(sessions.csrf(&a), sessions.csrf(&b));
        assert_ne!(sessions.csrf(&a), Sessions::new(true).csrf(&a));
        assert!(
            sessions
                .cookie("x", "1")
                .ends_with("SameSite=Strict; Secure")
        );
        assert!(!Sessions::new(false).cookie("x", "1").contains("Secure"));
        assert!(well_formed(&a) && !well_formed("a") && !well_formed(&"z".repeat(64)));
    }
}
