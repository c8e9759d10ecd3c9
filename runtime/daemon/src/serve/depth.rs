//! MCP messages nested deeper than a JSON reader follows (serde_json stops
//! at 128) are refused with a message that says so, on both transports,
//! instead of a parse error that calls them invalid.

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Deepest message accepted (serde_json's own bound).
pub const MAX_DEPTH: usize = 128;

/// Largest message read (a workflow source may be 32 MiB, plus its JSON
/// escaping), on both transports.
pub const MAX_BODY: usize = 80 << 20;

/// The deepest nesting of arrays and objects in JSON text (strings skipped).
pub fn depth(text: &[u8]) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in text {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// The refusal of a message nested `found` deep.
pub fn too_deep(found: usize) -> Response {
    let message = format!(
        "the message nests arrays and objects {found} deep; at most {MAX_DEPTH} is accepted: flatten it"
    );
    let body = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": message}});
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Middleware for `POST /mcp`: measures the body before rmcp reads it.
pub async fn guard(request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes: Bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(bytes) => bytes,
        Err(e) => {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the message cannot be read: {e}"),
            )
                .into_response();
        }
    };
    let found = depth(&bytes);
    if found > MAX_DEPTH {
        return too_deep(found);
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_nesting_outside_strings() {
        assert_eq!(depth(br#"{"a": [1, {"b": "[[[["}]}"#), 3);
        assert_eq!(depth(br#""\"[""#), 0);
        assert_eq!(depth(&[b'['; 200]), 200);
    }
}
