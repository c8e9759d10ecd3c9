//! Pending decisions, answered with their option buttons or a free-form
//! choice; the answer goes through `opcode.signal`, so it is validated,
//! recorded and resumes the workflow as over MCP.

use axum::extract::Query;
use axum::response::{IntoResponse, Response};
use maud::html;
use serde_json::{Value, json};

use opcode_runtime::store::{DecisionFilter, DecisionStatus};

use super::layout::{self, csrf, empty, json_text, workflow_link};
use super::{Fields, Panel, Posted, back, call, failure};

/// Decisions on one page.
const PAGE: u32 = 25;

/// `GET /decisions?page=`: the pending decisions, oldest first, a page at
/// a time.
pub async fn list(panel: Panel, Query(query): Query<Fields>) -> Response {
    let store = panel.store();
    let page = super::page_of(&query);
    let filter = DecisionFilter {
        status: Some(DecisionStatus::Pending),
        limit: Some(PAGE + 1),
        offset: (page - 1).saturating_mul(PAGE),
        ..DecisionFilter::default()
    };
    let mut pending = match store.decision_page(filter).await {
        Ok(rows) => rows,
        Err(e) => return failure(&e),
    };
    let more = pending.len() > PAGE as usize;
    pending.truncate(PAGE as usize);
    // Each decision's workflow name, read once per workflow.
    let mut names = std::collections::HashMap::new();
    for d in &pending {
        if !names.contains_key(&d.workflow_id)
            && let Ok(Some(row)) = store.workflow(&d.workflow_id).await
        {
            names.insert(d.workflow_id.clone(), row.name);
        }
    }
    let body = html! {
        section #decision-list data-live {
            @if pending.is_empty() {
                (empty("No decision is waiting."))
            }
            @for d in &pending {
                @let options: Vec<Value> = serde_json::from_str(&d.options).unwrap_or_default();
                article.decision {
                    h2 { (d.prompt) }
                    p.muted {
                        @if let Some(name) = names.get(&d.workflow_id) { strong { (name) } " " }
                        (workflow_link(&d.workflow_id)) " · step " code { (d.step_id) }
                        " · asked " (panel.clock.time(Some(&d.created_at)))
                        @if let Some(at) = &d.timeout_at {
                            " · times out " (panel.clock.time(Some(at))) ", then "
                            (layout::on_timeout(d.fallback.as_deref(), false))
                        }
                        @if let Some(target) = &d.target_agent { " · for " (target) }
                    }
                    @if d.context != "{}" && d.context != "null" && !d.context.is_empty() {
                        details { summary { "Context" } (json_text(&d.context)) }
                    }
                    form method="post" action="/decisions/resolve" {
                        (csrf(&panel))
                        input type="hidden" name="workflow_id" value=(d.workflow_id);
                        input type="hidden" name="decision" value=(d.id);
                        label { "Reasoning (optional) " textarea name="reasoning" rows="2" {} }
                        div.options {
                            @for o in &options {
                                @let id = o.get("id").and_then(Value::as_str).or_else(|| o.as_str()).unwrap_or("");
                                button type="submit" name="choice" value=(id) {
                                    (o.get("label").and_then(Value::as_str).unwrap_or(id))
                                    @if let Some(description) = o.get("description").and_then(Value::as_str) {
                                        span.description { " — " (description) }
                                    }
                                }
                            }
                        }
                        @if options.is_empty() {
                            label { "Answer " input type="text" name="other" required; }
                            button type="submit" { "Answer" }
                        } @else {
                            details.other {
                                summary { "Another answer" }
                                label { "Choice " input type="text" name="other"; }
                                button type="submit" { "Answer" }
                            }
                        }
                    }
                }
            }
            @if page > 1 || more {
                nav.pages {
                    @if page > 1 { a rel="prev" href=(format!("/decisions?page={}", page - 1)) { "← Older" } }
                    span { "Page " (page) }
                    @if more { a rel="next" href=(format!("/decisions?page={}", page + 1)) { "Newer →" } }
                }
            }
        }
    };
    layout::page(&panel, "Decisions", "/decisions", &query, None, &body).into_response()
}

/// `POST /decisions/resolve`.
pub async fn resolve(panel: Panel, Posted(fields): Posted) -> Response {
    let get = |key: &str| fields.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
    let (Some(workflow), Some(decision)) = (get("workflow_id"), get("decision")) else {
        return back(
            "/decisions",
            Some("the form lacks the workflow or the decision".into()),
        );
    };
    let Some(choice) = get("choice").or_else(|| get("other")) else {
        return back(
            "/decisions",
            Some("choose an option or type an answer".into()),
        );
    };
    let mut args = json!({
        "workflow_id": workflow,
        "signal_type": "decision",
        "step_id": decision,
        "payload": {"choice": choice},
    });
    if let Some(reasoning) = get("reasoning") {
        args["reasoning"] = json!(reasoning);
    }
    match call(&panel, "opcode.signal", args).await {
        Ok(_) => back(&format!("/workflows/{}", layout::encode(workflow)), None),
        Err(e) => back("/decisions", Some(format!("{}: {}", e.code.id, e.message))),
    }
}
