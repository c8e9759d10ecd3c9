//! The event log across workflows, and the agents.

use std::fmt::Write as _;

use axum::extract::Query;
use axum::response::{IntoResponse, Response};
use maud::html;

use super::layout::{self, empty, encode, json_text, workflow_link};
use super::{Fields, Panel, failure};
use opcode_runtime::store::{EventFilter, EventName, FoundEntry, Listing, StoreError};

/// Events a page shows.
const PAGE: u32 = 50;

/// The filters the page reads, kept in its page links.
const FILTERS: [&str; 3] = ["workflow", "type", "step"];

/// `GET /events?workflow=&type=&step=&page=`: newest first, a page at a
/// time.
pub async fn list(panel: Panel, Query(query): Query<Fields>) -> Response {
    let pick = |key: &str| {
        query
            .get(key)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let page = super::page_of(&query);
    let filter = EventFilter {
        workflow_id: pick("workflow"),
        event_type: pick("type"),
        step_id: pick("step"),
        ..EventFilter::default()
    };
    let (found, more) = match read_page(&panel, filter, page).await {
        Ok(read) => read,
        Err(e) => return failure(&e),
    };
    let mut kept = String::new();
    for key in FILTERS {
        if let Some(value) = pick(key) {
            let _ = write!(kept, "&{key}={}", encode(&value));
        }
    }
    let page_link = |to: u32| format!("/events?page={to}{kept}");
    let value = |key: &str| pick(key).unwrap_or_default();
    let body = html! {
        form.filters method="get" action="/events" {
            label { "Workflow " input type="search" name="workflow" value=(value("workflow")); }
            label { "Type "
                select name="type" {
                    option value="" { "any" }
                    @for t in EventName::ALL.iter().map(|n| n.as_str()) { option value=(t) selected[value("type") == t] { (t) } }
                }
            }
            label { "Step " input type="search" name="step" value=(value("step")); }
            button type="submit" { "Filter" }
        }
        section #event-list data-live {
            @if found.is_empty() { (empty("No event matches.")) } @else {
                div.scroll {
                    table {
                        thead { tr { th { "When" } th { "Workflow" } th.wide { "#" } th { "Event" } th { "Step" } th { "Payload" } } }
                        tbody {
                            @for f in &found {
                                tr {
                                    td { (panel.clock.time(Some(&f.entry.at))) }
                                    td { (workflow_link(&f.workflow_id)) }
                                    td.wide { (f.entry.seq) }
                                    td { a href={"/events?type=" (encode(&f.entry.event_type)) "&workflow=" (encode(&value("workflow")))} { code { (f.entry.event_type) } } }
                                    td { @if let Some(step) = &f.entry.step_id { a href={"/events?workflow=" (encode(&f.workflow_id)) "&step=" (encode(step))} { code { (step) } } } }
                                    td { details { summary { "payload" } (json_text(&f.entry.payload)) } }
                                }
                            }
                        }
                    }
                }
            }
            nav.pages {
                @if page > 1 { a rel="prev" href=(page_link(page - 1)) { "← Newer" } }
                span { "Page " (page) }
                @if more { a rel="next" href=(page_link(page + 1)) { "Older →" } }
            }
        }
    };
    layout::page(&panel, "Events", "/events", &query, None, &body).into_response()
}

/// Page `page` of the entries `filter` finds, newest first, and whether
/// older ones follow. One workflow's entries come in log order, so its
/// page is counted from the end.
async fn read_page(
    panel: &Panel,
    mut filter: EventFilter,
    page: u32,
) -> Result<(Vec<FoundEntry>, bool), StoreError> {
    let store = panel.store();
    let skip = (page - 1).saturating_mul(PAGE);
    if filter.workflow_id.is_none() {
        filter.limit = Some(PAGE + 1);
        filter.offset = skip;
        let mut found = store.find_entries(filter).await?;
        let more = found.len() > PAGE as usize;
        found.truncate(PAGE as usize);
        return Ok((found, more));
    }
    let total =
        u32::try_from(store.count(Listing::Entries(filter.clone())).await?).unwrap_or(u32::MAX);
    let end = total.saturating_sub(skip);
    let start = end.saturating_sub(PAGE);
    filter.offset = start;
    filter.limit = Some(end - start);
    let mut found = if end == 0 {
        Vec::new()
    } else {
        store.find_entries(filter).await?
    };
    found.reverse();
    Ok((found, start > 0))
}

/// `GET /agents`.
pub async fn agents(panel: Panel, Query(query): Query<Fields>) -> Response {
    let agents = match panel.store().agents().await {
        Ok(rows) => rows,
        Err(e) => return failure(&e),
    };
    let body = html! {
        section #agent-list data-live {
            @if agents.is_empty() {
                (empty("No agent yet: agents appear when they call a tool with an agent_id."))
            } @else {
                table {
                    thead { tr { th { "Agent" } th { "First seen" } th { "Last seen" } th {} } }
                    tbody {
                        @for a in &agents {
                            tr {
                                td { (a.id) }
                                td { (panel.clock.time(Some(&a.created_at))) }
                                td { (panel.clock.time(Some(&a.last_seen_at))) }
                                td { a href={"/workflows?agent=" (encode(&a.id))} { "Workflows →" } }
                            }
                        }
                    }
                }
            }
        }
    };
    layout::page(&panel, "Agents", "/agents", &query, None, &body).into_response()
}
