//! Scheduled jobs: list, create (validated like `opcode schedule add`, with
//! a preview of the next fire times), enable, disable, delete.

use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde_json::Value;

use super::clock::Clock;
use super::layout::{self, csrf, empty, encode, workflow_link};
use super::{Fields, Panel, Posted, back, failure};
use opcode_runtime::schedule::{self, NewJob, Schedule};
use opcode_runtime::time::{now_ms, rfc3339};

/// Fire times the preview shows.
const PREVIEW: usize = 5;

/// `GET /scheduler`.
pub async fn list(panel: Panel, Query(query): Query<Fields>) -> Response {
    render(&panel, &query, &Fields::new(), None).await
}

async fn render(panel: &Panel, query: &Fields, form: &Fields, problem: Option<&str>) -> Response {
    let store = panel.store();
    let loaded = async {
        let jobs = store.schedules().await?;
        let templates = panel.latest_templates().await?;
        Ok::<_, opcode_runtime::store::StoreError>((jobs, templates))
    };
    let (jobs, templates) = match loaded.await {
        Ok(data) => data,
        Err(e) => return failure(&e),
    };
    let field = |key: &str| form.get(key).map_or("", String::as_str);
    let timezone = if field("timezone").is_empty() {
        "UTC"
    } else {
        field("timezone")
    };
    let action = |id: &str, name: &str, label: &str, class: &str| -> Markup {
        html! {
            form.inline method="post" action={"/scheduler/" (encode(id)) "/" (name)} {
                (csrf(panel))
                button type="submit" class=(class) { (label) }
            }
        }
    };
    let body = html! {
        section #job-list data-live {
            @if jobs.is_empty() {
                (empty("No scheduled job."))
            } @else {
                table {
                    thead { tr { th { "Job" } th { "Template" } th { "Cron" } th { "Next" } th { "Last" } th { "Last status" } th {} } }
                    tbody {
                        @for job in &jobs {
                            tr class={@if !job.enabled { "disabled" }} {
                                td { code { (job.id) } br; span.muted { (job.origin) } }
                                td { a href={"/templates/" (encode(&job.template_name))} { (job.template_name) } @if let Some(v) = job.template_version { " v" (v) } }
                                td { code { (job.cron) } " " span.muted { (job.timezone) } }
                                td { @if job.enabled { (panel.clock.time(job.next_run_at.as_deref())) br; span.muted { (panel.clock.exact(job.next_run_at.as_deref(), Some(&job.timezone))) } } @else { span.muted { "disabled" } } }
                                td { (panel.clock.time(job.last_run_at.as_deref())) }
                                td {
                                    (job.last_run_status.as_deref().unwrap_or(""))
                                    @if let Some(id) = &job.last_workflow_id { " " (workflow_link(id)) }
                                }
                                td.buttons {
                                    @if job.enabled { (action(&job.id, "disable", "Disable", "")) } @else { (action(&job.id, "enable", "Enable", "")) }
                                    (action(&job.id, "delete", "Delete", "danger"))
                                }
                            }
                        }
                    }
                }
            }
        }
        section #create-job {
            h2 { "Schedule a template" }
            @if let Some(problem) = problem { p.flash.error role="alert" { (problem) } }
            @if templates.is_empty() {
                (empty("Define a template first."))
            } @else {
                form method="post" action="/scheduler" {
                    (csrf(panel))
                    label { "Template "
                        select name="template" required {
                            @for t in &templates { option value=(t.name) selected[field("template") == t.name] { (t.name) " (v" (t.version) ")" } }
                        }
                    }
                    label { "Version " input type="number" name="version" min="1" value=(field("version")) placeholder="newest at each run"; }
                    label { "Cron " input type="text" name="cron" required value=(field("cron")) placeholder="*/5 * * * *" data-cron-preview="#cron-preview"; }
                    label { "Timezone " input type="text" name="timezone" value=(timezone); }
                    output #cron-preview { @if !field("cron").is_empty() { (preview_of(&panel.clock, field("cron"), timezone)) } }
                    label { "Params (JSON object) " textarea name="params" rows="3" spellcheck="false" { (field("params")) } }
                    label { "Agent " input type="text" name="agent" value=(field("agent")); }
                    label { "Missed while down "
                        select name="missed" {
                            option value="run_once" { "run once" }
                            option value="skip" selected[field("missed") == "skip"] { "skip" }
                        }
                    }
                    button type="submit" { "Create" }
                    button type="submit" formmethod="get" formaction="/scheduler/preview" formnovalidate { "Preview" }
                }
            }
        }
    };
    let page = layout::page(panel, "Scheduler", "/scheduler", query, None, &body);
    if problem.is_some() {
        (StatusCode::UNPROCESSABLE_ENTITY, page).into_response()
    } else {
        page.into_response()
    }
}

/// The next fire times of `cron` in `timezone`, shown in that zone, or
/// why it is invalid.
fn preview_of(clock: &Clock, cron: &str, timezone: &str) -> Markup {
    match Schedule::parse(cron, timezone) {
        Err(why) => html! { span.invalid { "Invalid: " (why) } },
        Ok(schedule) => {
            let mut times = Vec::new();
            let mut after = now_ms();
            while times.len() < PREVIEW {
                let Some(next) = schedule.next_after(after) else {
                    break;
                };
                times.push(rfc3339(next));
                after = next;
            }
            html! {
                span.valid { "Next: " }
                @for (i, at) in times.iter().enumerate() {
                    @if i > 0 { ", " }
                    (clock.exact(Some(at), Some(timezone)))
                }
                " " span.muted { "(" (timezone) ")" }
            }
        }
    }
}

/// `GET /scheduler/preview?cron=&timezone=`: the preview alone for the
/// script, or the page with the form kept (no script).
pub async fn preview(
    panel: Panel,
    headers: axum::http::HeaderMap,
    Query(query): Query<Fields>,
) -> Response {
    let cron = query.get("cron").map_or("", String::as_str);
    let timezone = query
        .get("timezone")
        .filter(|t| !t.is_empty())
        .map_or("UTC", String::as_str);
    if headers.get("x-panel-fragment").is_some() {
        return preview_of(&panel.clock, cron, timezone).into_response();
    }
    render(&panel, &Fields::new(), &query, None).await
}

/// `POST /scheduler`.
pub async fn create(panel: Panel, Posted(fields): Posted) -> Response {
    let get = |key: &str| {
        fields
            .get(key)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let params = match get("params").map(|p| serde_json::from_str::<Value>(&p)) {
        None => None,
        Some(Ok(value)) => Some(value),
        Some(Err(e)) => {
            return render(
                &panel,
                &Fields::new(),
                &fields,
                Some(&format!("the params are not JSON: {e}")),
            )
            .await;
        }
    };
    let version = match get("version").map(|v| v.parse::<i64>()) {
        None => None,
        Some(Ok(v)) if v > 0 => Some(v),
        Some(_) => {
            return render(
                &panel,
                &Fields::new(),
                &fields,
                Some("the version must be a positive number"),
            )
            .await;
        }
    };
    let template = get("template").unwrap_or_default();
    if let Some(version) = version {
        match panel.store().template(&template, Some(version)).await {
            Ok(Some(_)) => {}
            Ok(None) => {
                let problem = format!("template `{template}` has no version {version}");
                return render(&panel, &Fields::new(), &fields, Some(&problem)).await;
            }
            Err(e) => return failure(&e),
        }
    }
    let job = NewJob {
        template,
        version,
        cron: get("cron").unwrap_or_default(),
        timezone: get("timezone"),
        params,
        agent: get("agent"),
        missed: get("missed"),
        id: None,
        origin: "panel",
    };
    match job.into_row(rfc3339(now_ms())) {
        Err(problem) => render(&panel, &Fields::new(), &fields, Some(&problem)).await,
        Ok(row) => match panel.store().save_schedule(row).await {
            Ok(()) => back("/scheduler?notice=Scheduled", None),
            Err(e) => failure(&e),
        },
    }
}

/// `POST /scheduler/{id}/{enable|disable|delete}`.
pub async fn act(panel: Panel, Path((id, action)): Path<(String, String)>, _: Posted) -> Response {
    let store = panel.store().as_ref();
    let done = match action.as_str() {
        "enable" => schedule::set_enabled(store, &id, true).await,
        "disable" => schedule::set_enabled(store, &id, false).await,
        "delete" => store.delete_schedule(&id).await,
        other => return (StatusCode::NOT_FOUND, format!("no action `{other}`")).into_response(),
    };
    match done {
        Ok(true) => back("/scheduler", None),
        Ok(false) => back("/scheduler", Some(format!("no scheduled job `{id}`"))),
        Err(e) => back("/scheduler", Some(e.to_string())),
    }
}
