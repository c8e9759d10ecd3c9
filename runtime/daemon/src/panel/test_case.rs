//! `GET /workflows/{id}/test.json`: a run at rest as a workflow test file
//! of one case (spec/testing.md, "Golden runs"), downloaded to put beside
//! its workflow.

use axum::extract::{Path, Query};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::{Fields, Panel, failure, layout};
use opcode_runtime::golden::{self, ExportError};

/// `GET /workflows/{id}/test.json`.
pub async fn download(
    panel: Panel,
    Path(id): Path<String>,
    Query(query): Query<Fields>,
) -> Response {
    match golden::export(panel.store().as_ref(), &id).await {
        Ok(case) => {
            let file = golden::test_file(&[case], None);
            let text = serde_json::to_string_pretty(&file).unwrap_or_default() + "\n";
            let name = format!("attachment; filename=\"{}.test.json\"", safe_name(&id));
            (
                [
                    (header::CONTENT_TYPE, "application/json".to_owned()),
                    (header::CONTENT_DISPOSITION, name),
                ],
                text,
            )
                .into_response()
        }
        Err(ExportError::NotFound(_)) => {
            layout::not_found(&panel, "/workflows", &query, &format!("workflow `{id}`"))
        }
        Err(busy @ ExportError::NotAtRest(..)) => {
            (StatusCode::CONFLICT, busy.to_string()).into_response()
        }
        Err(ExportError::Store(e)) => failure(&e),
    }
}

/// `id` with what a file name or a header cannot hold replaced by `_`.
fn safe_name(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}
