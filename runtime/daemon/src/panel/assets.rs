//! The stylesheet and the script, embedded in the binary.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

const CSS: &str = include_str!("assets/panel.css");
const JS: &str = include_str!("assets/panel.js");
const LIVE_WORKER: &str = include_str!("assets/live-worker.js");

/// `GET /static/{file}`.
pub async fn serve(Path(file): Path<String>) -> Response {
    let (body, mime) = match file.as_str() {
        "panel.css" => (CSS, "text/css; charset=utf-8"),
        "panel.js" => (JS, "text/javascript; charset=utf-8"),
        "live-worker.js" => (LIVE_WORKER, "text/javascript; charset=utf-8"),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, mime),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}
