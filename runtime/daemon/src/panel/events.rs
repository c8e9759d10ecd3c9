//! The event log across workflows, and the agents.

use axum::extract::Query;
use axum::response::{IntoResponse, Response};
use maud::html;

use super::layout::{self, empty, encode, json_text, time, workflow_link};
use super::{Fields, Panel, failure};
use opcode_runtime::store::{EventFilter, FoundEntry};

/// Events a page shows.
const SHOWN: u32 = 200;

/// `GET /events?workflow=&type=`.
pub async fn list(panel: Panel, Query(query): Query<Fields>) -> Response {
    let pick = |key: &str| {
        query
            .get(key)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let (workflow, event_type) = (pick("workflow"), pick("type"));
    let store = panel.store();
    let read = async {
        match (&workflow, &event_type) {
            // One workflow's log: its last entries, newest first.
            (Some(id), None) => {
                let last = store.workflow(id).await?.map_or(0, |w| w.last_seq);
                let entries = store
                    .entries(id, last.saturating_sub(u64::from(SHOWN)), false)
                    .await?;
                Ok(entries
                    .into_iter()
                    .rev()
                    .map(|entry| FoundEntry {
                        workflow_id: id.clone(),
                        entry,
                    })
                    .collect())
            }
            (Some(_), Some(_)) => {
                let filter = EventFilter {
                    workflow_id: workflow.clone(),
                    event_type: event_type.clone(),
                    ..EventFilter::default()
                };
                // Found in log order; shown newest first.
                Ok(store
                    .find_entries(filter)
                    .await?
                    .into_iter()
                    .rev()
                    .collect())
            }
            (None, _) => {
                let filter = EventFilter {
                    event_type: event_type.clone(),
                    limit: Some(SHOWN),
                    ..EventFilter::default()
                };
                store.find_entries(filter).await
            }
        }
    };
    let mut found: Vec<FoundEntry> = match read.await {
        Ok(rows) => rows,
        Err(e) => return failure(&e),
    };
    found.truncate(SHOWN as usize);
    let body = html! {
        form.filters method="get" action="/events" {
            label { "Workflow " input type="text" name="workflow" value=[workflow.as_deref()]; }
            label { "Type " input type="text" name="type" value=[event_type.as_deref()] placeholder="step_failed"; }
            button type="submit" { "Filter" }
        }
        section #event-list data-live {
            @if found.is_empty() { (empty("No event matches.")) } @else {
                table {
                    thead { tr { th { "When" } th { "Workflow" } th { "#" } th { "Event" } th { "Step" } th { "Payload" } } }
                    tbody {
                        @for f in &found {
                            tr {
                                td { (time(Some(&f.entry.at))) }
                                td { (workflow_link(&f.workflow_id)) }
                                td { (f.entry.seq) }
                                td { a href={"/events?type=" (encode(&f.entry.event_type))} { code { (f.entry.event_type) } } }
                                td { @if let Some(step) = &f.entry.step_id { code { (step) } } }
                                td { details { summary { "payload" } (json_text(&f.entry.payload)) } }
                            }
                        }
                    }
                }
            }
        }
    };
    layout::page(&panel, "Events", "/events", &query, None, &body).into_response()
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
                                td { (time(Some(&a.created_at))) }
                                td { (time(Some(&a.last_seen_at))) }
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
