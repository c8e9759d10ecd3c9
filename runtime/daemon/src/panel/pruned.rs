//! The page of a run retention pruned (spec/store.md, "Retention"): what
//! its tombstone says, instead of "not found".

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::html;

use super::layout::{self, encode, short_id, status, workflow_link};
use super::{Fields, Panel};
use opcode_runtime::store::PrunedRow;

/// `410 Gone`, with when run `row` ended, when it was pruned and where
/// its export is.
pub fn page(panel: &Panel, query: &Fields, row: &PrunedRow) -> Response {
    let body = html! {
        p.notice {
            "This run was pruned by the retention settings: its log, steps and decisions are gone."
            @if row.export.is_some() { " It was exported first." }
        }
        dl.facts {
            dt { "Status" } dd { (status(row.status.as_str())) }
            dt { "Id" } dd { (short_id(&row.id)) }
            dt { "Name" } dd { (row.name) }
            @if let Some(t) = &row.template_name {
                dt { "Template" } dd { a href={"/templates/" (encode(t))} { (t) } @if let Some(v) = row.template_version { " v" (v) } }
            }
            @if let Some(agent) = &row.agent_id { dt { "Agent" } dd { (agent) } }
            @if let Some(parent) = &row.parent_workflow_id { dt { "Parent" } dd { (workflow_link(parent)) } }
            dt { "Created" } dd { (panel.clock.time(Some(&row.created_at))) }
            dt { "Ended" } dd { (panel.clock.time(row.completed_at.as_deref())) }
            dt { "Pruned" } dd { (panel.clock.time(Some(&row.pruned_at))) }
            @if let Some(path) = &row.export { dt { "Export" } dd { code { (path) } } }
        }
    };
    let page = layout::page(panel, "Pruned run", "/workflows", query, None, &body);
    (StatusCode::GONE, page).into_response()
}
