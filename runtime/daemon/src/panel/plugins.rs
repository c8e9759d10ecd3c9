//! The plugins (MCP servers whose tools are actions): health, restarts,
//! why each last went down, and the tools it gives.

use axum::extract::Query;
use axum::response::{IntoResponse, Response};
use maud::html;
use serde_json::Value;

use super::layout::{self, empty, status};
use super::{Fields, Panel};

/// `GET /plugins`.
pub async fn list(panel: Panel, Query(query): Query<Fields>) -> Response {
    let plugins = panel.api.plugins_report();
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let body = html! {
        section #plugin-list data-live {
            @if plugins.is_empty() {
                (empty("No plugin: add MCP servers under `plugins` in settings.json (spec/mcp.md, Plugins)."))
            } @else {
                div.scroll {
                    table {
                        thead { tr { th { "Plugin" } th { "Status" } th.wide { "Transport" } th { "Restarts" } th { "Last error" } th { "Tools" } } }
                        tbody {
                            @for p in &plugins {
                                @let tools: Vec<String> = p["tools"].as_array().map(|t| t.iter().map(text).collect()).unwrap_or_default();
                                tr {
                                    td { code { (text(&p["name"])) } }
                                    td { (status(&text(&p["status"]))) }
                                    td.wide { (text(&p["transport"])) }
                                    td { (p["restarts"].as_u64().unwrap_or(0)) }
                                    td { @if let Some(e) = p["last_error"].as_str() { span.invalid { (e) } } @else { span.muted { "none" } } }
                                    td {
                                        @if tools.is_empty() { span.muted { "none yet" } }
                                        @for (i, tool) in tools.iter().enumerate() { @if i > 0 { ", " } code { (text(&p["name"])) "." (tool) } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    layout::page(&panel, "Plugins", "/plugins", &query, None, &body).into_response()
}
