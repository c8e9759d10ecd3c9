//! Which tenant's routes answer a request (spec/security.md, "Tenants"):
//! the tenant whose token the request carries (the bearer header or the
//! panel's sign-in cookie; for `POST /login`, the token typed in the
//! form), the tenant a webhook's path names (`/tenants/<name>/hooks/…`),
//! and otherwise the operator's. Every tenant's routes sit behind their
//! own guard, so a request picked for a tenant is checked again there; a
//! wrong token goes to the operator's guard, which refuses and slows it.

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, Uri, header};
use axum::response::Response;
use tower::ServiceExt;

use super::guard::{HOOKS, SharedGuard, TOKEN_COOKIE, cookie};

/// Where a tenant's webhooks are: `/tenants/<name>/hooks/<template>`.
pub const TENANTS_PREFIX: &str = "/tenants/";

/// The most bytes of a sign-in form read to find its tenant.
const MAX_SIGN_IN: usize = 16 << 10;

/// One tenant's routes and the guard in front of them.
#[derive(Clone)]
pub struct TenantRoutes {
    /// Its name.
    pub name: String,
    /// Its guard (its tokens).
    pub gate: SharedGuard,
    /// Its routes, guarded.
    pub routes: Router,
}

struct Tenancy {
    operator: Router,
    tenants: Vec<TenantRoutes>,
}

/// The routes that hand each request to the operator's `operator` routes
/// or to one tenant's (just `operator` when there are no tenants).
pub fn router(operator: Router, tenants: Vec<TenantRoutes>) -> Router {
    if tenants.is_empty() {
        return operator;
    }
    let tenancy = Arc::new(Tenancy { operator, tenants });
    Router::new().fallback(dispatch).with_state(tenancy)
}

async fn dispatch(State(tenancy): State<Arc<Tenancy>>, request: Request) -> Response {
    let (routes, request) = tenancy.pick(request).await;
    match routes.clone().oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

impl Tenancy {
    /// The routes that answer `request`, and the request as they take it.
    async fn pick(&self, request: Request) -> (&Router, Request) {
        if let Some((tenant, rest)) = self.hook_of(request.uri()) {
            let (mut parts, body) = request.into_parts();
            if let Ok(uri) = rest.parse::<Uri>() {
                parts.uri = uri;
            }
            return (&tenant.routes, Request::from_parts(parts, body));
        }
        if let Some(tenant) = self.by_token(request.headers()) {
            return (&tenant.routes, request);
        }
        if request.method() == Method::POST && request.uri().path() == "/login" {
            let (parts, body) = request.into_parts();
            let bytes = to_bytes(body, MAX_SIGN_IN).await.unwrap_or_default();
            let typed = url_form_token(&bytes);
            let request = Request::from_parts(parts, Body::from(bytes));
            if let Some(tenant) = typed.and_then(|t| self.accepting(&t)) {
                return (&tenant.routes, request);
            }
            return (&self.operator, request);
        }
        (&self.operator, request)
    }

    /// The tenant a webhook's path names, and the path its routes know.
    fn hook_of(&self, uri: &Uri) -> Option<(&TenantRoutes, String)> {
        let rest = uri.path().strip_prefix(TENANTS_PREFIX)?;
        let (name, path) = rest.split_once('/')?;
        let path = format!("/{path}");
        if !path.starts_with(HOOKS) {
            return None;
        }
        let tenant = self.tenants.iter().find(|t| t.name == name)?;
        let query = uri.query().map_or_else(String::new, |q| format!("?{q}"));
        Some((tenant, format!("{path}{query}")))
    }

    /// The tenant whose token the request carries.
    fn by_token(&self, headers: &HeaderMap) -> Option<&TenantRoutes> {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.strip_prefix("Bearer "));
        bearer
            .and_then(|t| self.accepting(t))
            .or_else(|| cookie(headers, TOKEN_COOKIE).and_then(|t| self.accepting(t)))
    }

    fn accepting(&self, token: &str) -> Option<&TenantRoutes> {
        self.tenants.iter().find(|t| t.gate.accepts(token))
    }
}

/// The `token` field of a URL-encoded form.
fn url_form_token(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    text.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key == "token").then(|| {
            percent_encoding::percent_decode_str(&value.replace('+', " "))
                .decode_utf8_lossy()
                .into_owned()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sign_in_form_names_its_token() {
        assert_eq!(
            url_form_token(b"next=%2F&token=abc%2Bdef+g").as_deref(),
            Some("abc+def g")
        );
        assert_eq!(url_form_token(b"next=%2F"), None);
    }
}
