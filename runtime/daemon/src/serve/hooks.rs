//! `POST /hooks/{template}`: a template's webhook (spec/mcp.md, webhooks).
//! The daemon's token is not asked for: the delivery is authenticated by
//! the template's own secret.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use std::time::Instant;

use super::guard::{Client, too_many};
use crate::api::{Api, Undelivered};

/// Delivers a request to the template's webhook.
pub async fn deliver(
    State(api): State<Api>,
    Client(client): Client,
    Path(template): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(wait) = api.hook_failures().wait(client, Instant::now()) {
        return too_many(wait.as_secs_f64().ceil() as u64, api.metrics());
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let now_s = i64::try_from(opcode_runtime::time::now_ms() / 1000).unwrap_or(i64::MAX);
    let delivered = api.deliver(&template, header, &body, now_s).await;
    match &delivered {
        Err(Undelivered::Unauthentic) => {
            api.hook_failures().failed(client, Instant::now());
        }
        Ok(_) => api.hook_failures().succeeded(client),
        Err(_) => {}
    }
    match delivered {
        Ok(delivered) => {
            let mut answer = json!({
                "workflow_id": delivered.workflow_id,
                "status": delivered.status,
                "duplicate": delivered.duplicate,
            });
            if let Some((due_ms, deliveries)) = delivered.debounced {
                answer["debounced"] = json!(true);
                answer["starts_at"] = json!(opcode_runtime::time::rfc3339(due_ms));
                answer["deliveries"] = json!(deliveries);
            }
            (StatusCode::ACCEPTED, axum::Json(answer)).into_response()
        }
        Err(Undelivered::NoHook) => refusal(
            StatusCode::NOT_FOUND,
            &format!("template `{template}` has no webhook (triggers.webhook)"),
        ),
        Err(Undelivered::Unauthentic) => {
            tracing::warn!(%template, "webhook delivery refused: bad or missing signature");
            refusal(
                StatusCode::UNAUTHORIZED,
                "the signature or token is missing or wrong",
            )
        }
        Err(Undelivered::NotJson(message)) => refusal(StatusCode::BAD_REQUEST, &message),
        Err(Undelivered::Refused(e)) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            axum::Json(
                json!({"error": {"code": e.code.id, "message": e.message, "details": e.details}}),
            ),
        )
            .into_response(),
        Err(Undelivered::Misconfigured(message)) => {
            tracing::error!(%template, "webhook cannot be checked: {message}");
            refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                "this webhook is not configured on the daemon yet",
            )
        }
    }
}

fn refusal(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(json!({"error": {"message": message}}))).into_response()
}
