//! `GET /`: what is happening now.

use axum::extract::Query;
use axum::response::{IntoResponse, Response};
use maud::html;

use super::layout::{self, empty, status, workflow_link};
use super::{Fields, Panel};
use opcode_runtime::store::EventFilter;

/// The statuses in the order the dashboard shows them.
pub(crate) const STATUSES: [&str; 7] = [
    "active",
    "suspended",
    "pending",
    "quarantined",
    "completed",
    "failed",
    "cancelled",
];

/// The dashboard.
pub async fn page(panel: Panel, Query(query): Query<Fields>) -> Response {
    let store = panel.store();
    let loaded = async {
        let counts = store.workflow_counts().await?;
        let pending = store
            .decisions(None, Some(opcode_runtime::store::DecisionStatus::Pending))
            .await?;
        let recent = store
            .find_entries(EventFilter {
                limit: Some(15),
                ..EventFilter::default()
            })
            .await?;
        let jobs = store.schedules().await?;
        Ok::<_, opcode_runtime::store::StoreError>((counts, pending, recent, jobs))
    };
    let (counts, pending, recent, jobs) = match loaded.await {
        Ok(data) => data,
        Err(e) => return super::failure(&e),
    };
    let plugins = panel.api.plugins_report();
    let count = |s: &str| {
        counts
            .iter()
            .find(|(c, _)| c.as_str() == s)
            .map_or(0, |c| c.1)
    };
    let body = html! {
        section #counts data-live {
            ul.cards {
                @for s in STATUSES {
                    li { a href={"/workflows?status=" (s)} {
                        span.count { (count(s)) }
                        (status(s))
                    } }
                }
            }
        }
        div.columns {
            section #pending data-live {
                h2 { "Pending decisions (" (pending.len()) ")" }
                @if pending.is_empty() {
                    (empty("No decision is waiting."))
                } @else {
                    ul.list {
                        @for d in pending.iter().take(10) {
                            li {
                                strong { (d.prompt) }
                                " — " (workflow_link(&d.workflow_id)) " · step " code { (d.step_id) }
                            }
                        }
                    }
                    a href="/decisions" { "Answer them →" }
                }
            }
            section #jobs data-live {
                h2 { "Scheduled jobs" }
                @if jobs.is_empty() {
                    (empty("No scheduled job."))
                } @else {
                    ul.list {
                        @for job in jobs.iter().take(10) {
                            li {
                                code { (job.cron) } " " (job.template_name)
                                @if job.enabled { " · next " (panel.clock.time(job.next_run_at.as_deref())) } @else { " · " span.muted { "disabled" } }
                            }
                        }
                    }
                }
                @if !plugins.is_empty() {
                    h2 { "Plugins" }
                    ul.list {
                        @for p in &plugins {
                            li { (p["name"].as_str().unwrap_or("?")) " " (status(p["status"].as_str().unwrap_or("?"))) }
                        }
                    }
                }
            }
        }
        section #recent data-live {
            h2 { "Recent activity" }
            @if recent.is_empty() {
                (empty("Nothing has run yet. Define a workflow with opcode.define, or create a template here."))
            } @else {
                table {
                    thead { tr { th { "When" } th { "Workflow" } th { "Event" } th { "Step" } } }
                    tbody {
                        @for f in &recent {
                            tr {
                                td { (panel.clock.time(Some(&f.entry.at))) }
                                td { (workflow_link(&f.workflow_id)) }
                                td { code { (f.entry.event_type) } }
                                td { @if let Some(step) = &f.entry.step_id { code { (step) } } }
                            }
                        }
                    }
                }
            }
        }
    };
    layout::page(&panel, "Dashboard", "/", &query, None, &body).into_response()
}
