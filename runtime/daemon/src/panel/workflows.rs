//! The workflows: a filtered list, one workflow's page, and its actions.

use std::collections::HashMap;
use std::fmt::Write as _;

use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde_json::{Value, json};

use super::dashboard::STATUSES;
use super::layout::{self, csrf, empty, encode, json_text, short_id, status, workflow_link};
use super::{Fields, Panel, Posted, back, call, failure};
use super::{gantt, steps};
use crate::api::ToolError;
use opcode_runtime::store::{
    Admitted, DecisionStatus, EventName, PrunedFilter, Standing, WorkflowFilter, WorkflowStatus,
};

/// Events a workflow's page lists (its last ones; `/events` pages them all).
const RECENT: u64 = 50;

/// Events the timeline is drawn from (the run's last ones).
const CHARTED: u64 = 5_000;

/// Rows a page of the list shows.
const PAGE: u32 = 25;

/// The list's search fields, kept in its page links.
const SEARCH: [&str; 6] = ["q", "status", "agent", "template", "from", "to"];

/// `GET /workflows?q=&status=&agent=&template=&from=&to=&page=`.
pub async fn list(panel: Panel, Query(query): Query<Fields>) -> Response {
    let pick = |key: &str| {
        query
            .get(key)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let page = super::page_of(&query);
    let filter = WorkflowFilter {
        statuses: pick("status")
            .and_then(|s| WorkflowStatus::parse(&s))
            .into_iter()
            .collect(),
        agent_id: pick("agent"),
        template_name: pick("template"),
        id_contains: pick("q"),
        since: pick("from").and_then(|t| panel.clock.parse_local(&t)),
        until: pick("to").and_then(|t| panel.clock.parse_local(&t)),
        limit: Some(PAGE + 1),
        offset: (page - 1) * PAGE,
        ..WorkflowFilter::default()
    };
    let store = panel.store();
    let loaded = async {
        let rows = store.workflows(filter).await?;
        let agents = store.agents().await?;
        let templates = panel.latest_templates().await?;
        Ok::<_, opcode_runtime::store::StoreError>((rows, agents, templates))
    };
    let (mut rows, agents, templates) = match loaded.await {
        Ok(data) => data,
        Err(e) => return failure(&e),
    };
    let more = rows.len() > PAGE as usize;
    rows.truncate(PAGE as usize);
    let selected = |key: &str, value: &str| query.get(key).is_some_and(|v| v == value);
    let value = |key: &str| pick(key).unwrap_or_default();
    let mut kept = String::new();
    for key in SEARCH {
        if let Some(value) = pick(key) {
            let _ = write!(kept, "&{key}={}", encode(&value));
        }
    }
    let page_link = |to: u32| format!("/workflows?page={to}{kept}");
    let cancellable = rows.iter().any(|w| !w.status.is_ended());
    let body = html! {
        form.filters #search method="get" action="/workflows" {
            label { "Id " input type="search" name="q" value=(value("q")) placeholder="part of an id"; }
            label { "Status "
                select name="status" {
                    option value="" { "any" }
                    @for s in STATUSES { option value=(s) selected[selected("status", s)] { (s) } }
                }
            }
            label { "Agent "
                select name="agent" {
                    option value="" { "any" }
                    @for a in &agents { option value=(a.id) selected[selected("agent", &a.id)] { (a.id) } }
                }
            }
            label { "Template "
                select name="template" {
                    option value="" { "any" }
                    @for t in &templates { option value=(t.name) selected[selected("template", &t.name)] { (t.name) } }
                }
            }
            label { "Created from " input type="datetime-local" name="from" value=(value("from")); }
            label { "to " input type="datetime-local" name="to" value=(value("to")); }
            button type="submit" { "Search" }
        }
        section #workflow-list data-live {
            @if rows.is_empty() {
                (empty("No workflow matches."))
            } @else {
                form #bulk method="post" action="/workflows" {
                    (csrf(&panel))
                    div.scroll {
                        table {
                            thead { tr { th.pick { span.sr { "Select" } } th { "Run" } th { "Template" } th { "Status" } th.wide { "Agent" } th { "Created" } th.wide { "Duration" } } }
                            tbody {
                                @for w in &rows {
                                    tr {
                                        td.pick { @if !w.status.is_ended() { input type="checkbox" name={"run." (w.id)} value="on" aria-label={"Select " (w.id)}; } }
                                        td { a href={"/workflows/" (encode(&w.id))} { (w.name) } br; (short_id(&w.id)) }
                                        td { @if let Some(t) = &w.template_name {
                                            a href={"/templates/" (encode(t))} { @if *t != w.name { (t) " " } @if let Some(v) = w.template_version { "v" (v) } @else { (t) } }
                                        } }
                                        td { (status(w.status.as_str())) }
                                        td.wide { (w.agent_id.as_deref().unwrap_or("")) }
                                        td { (panel.clock.time(Some(&w.created_at))) }
                                        td.wide { (panel.clock.span(w.started_at.as_deref(), w.completed_at.as_deref()).unwrap_or_default()) }
                                    }
                                }
                            }
                        }
                    }
                    @if cancellable {
                        div.actions { button.danger type="submit" name="bulk" value="cancel" { "Cancel selected" } }
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
    layout::page(&panel, "Workflows", "/workflows", &query, None, &body).into_response()
}

/// `POST /workflows` with `bulk=cancel` and a `run.ID` field per chosen
/// run: `opcode.signal` `cancel` of each; back to the list saying how many.
pub async fn bulk(panel: Panel, Posted(fields): Posted) -> Response {
    if fields.get("bulk").map(String::as_str) != Some("cancel") {
        return back(
            "/workflows",
            Some("choose an action for the selected runs".into()),
        );
    }
    let mut ids: Vec<&str> = fields
        .iter()
        .filter(|(_, v)| v.as_str() == "on")
        .filter_map(|(k, _)| k.strip_prefix("run."))
        .collect();
    ids.sort_unstable();
    if ids.is_empty() {
        return back("/workflows", Some("select the runs to cancel first".into()));
    }
    let mut refused = Vec::new();
    for id in &ids {
        let args = json!({"workflow_id": id, "signal_type": "cancel", "wait": false,
            "payload": {"reason": "cancelled in the panel"}});
        if let Err(e) = call(&panel, "opcode.signal", args).await {
            refused.push(format!("{id}: {}", e.message));
        }
    }
    let done = ids.len() - refused.len();
    let notice = format!(
        "/workflows?notice={}",
        encode(&format!("Cancelled {done} of {}", ids.len()))
    );
    if refused.is_empty() {
        back(&notice, None)
    } else {
        back(&notice, Some(refused.join("; ")))
    }
}

/// `GET /workflows/{id}`.
pub async fn detail(panel: Panel, Path(id): Path<String>, Query(query): Query<Fields>) -> Response {
    let store = panel.store();
    let row = match store.workflow(&id).await {
        Ok(Some(row)) => row,
        Ok(None) => {
            let filter = PrunedFilter {
                id: Some(id.clone()),
                ..PrunedFilter::default()
            };
            return match store.pruned(filter).await {
                Ok(rows) if !rows.is_empty() => super::pruned::page(&panel, &query, &rows[0]),
                Ok(_) => {
                    layout::not_found(&panel, "/workflows", &query, &format!("workflow `{id}`"))
                }
                Err(e) => failure(&e),
            };
        }
        Err(e) => return failure(&e),
    };
    let loaded = async {
        let steps = store.steps(&id).await?;
        let from = row.last_seq.saturating_sub(CHARTED);
        let entries = store.entries(&id, from, false).await?;
        let awaited = opcode_runtime::waiting::awaited(store.as_ref(), &id).await?;
        let decisions = store.decisions(Some(&id), None).await?;
        let children = store
            .workflows(WorkflowFilter {
                parent_id: Some(id.clone()),
                ..WorkflowFilter::default()
            })
            .await?;
        // The decisions of suspended runs below an active one hold it.
        let waiting = if row.status == WorkflowStatus::Active {
            opcode_runtime::summary::waiting_below(store.as_ref(), &id).await?
        } else {
            Vec::new()
        };
        let program = store
            .source(&row.source_hash)
            .await?
            .and_then(|source| opcode_vm::Program::from_bytes(&source.program).ok());
        // A run waiting for a slot of its concurrency key has no step yet.
        let queued = match (row.status, steps.is_empty()) {
            (WorkflowStatus::Active, true) => store.standing(&id).await?,
            _ => None,
        };
        Ok::<_, opcode_runtime::store::StoreError>((
            steps, entries, decisions, children, waiting, awaited, program, queued,
        ))
    };
    let (steps, entries, decisions, children, waiting, awaited, program, queued) =
        match loaded.await {
            Ok(data) => data,
            Err(e) => return failure(&e),
        };
    let diagram = panel
        .api
        .call(
            "opcode.diagram",
            json!({"workflow_id": id, "format": "svg"}),
        )
        .await
        .unwrap_or(Value::Null);
    // Each step's last attempt's action and input, from its `step_started`.
    let mut inputs: HashMap<&str, Value> = HashMap::new();
    for entry in &entries {
        if let (Some(step), Some(EventName::StepStarted)) = (&entry.step_id, entry.name())
            && let Ok(payload) = serde_json::from_str::<Value>(&entry.payload)
            && payload.get("input").is_some()
        {
            inputs.insert(step, payload);
        }
    }
    let recent = &entries[entries.len().saturating_sub(RECENT as usize)..];
    let running = matches!(
        row.status.as_str(),
        "active" | "pending" | "suspended" | "quarantined"
    );
    let action = |name: &str, label: &str, class: &str| -> Markup {
        html! {
            form.inline method="post" action={"/workflows/" (encode(&id)) "/" (name)} {
                (csrf(&panel))
                button type="submit" class=(class) { (label) }
            }
        }
    };
    let body = html! {
        section #summary data-live {
            dl.facts {
                dt { "Status" } dd { (status(row.status.as_str())) }
                dt { "Id" } dd { (short_id(&row.id)) }
                dt { "Name" } dd { (row.name) }
                @if let Some(t) = &row.template_name {
                    dt { "Template" } dd { a href={"/templates/" (encode(t))} { (t) } @if let Some(v) = row.template_version { " v" (v) } }
                }
                @if let Some(agent) = &row.agent_id { dt { "Agent" } dd { (agent) } }
                @if let Some(parent) = &row.parent_id { dt { "Parent" } dd { (workflow_link(parent)) } }
                @if let Some(of) = rerun_of(&entries) { dt { "Re-run of" } dd { (workflow_link(&of)) " from its failed step" } }
                @if !waiting.is_empty() {
                    dt { "Held by" } dd { @for (run, _) in &waiting { (workflow_link(run)) " " } }
                }
                dt { "Created" } dd { (panel.clock.time(Some(&row.created_at))) }
                dt { "Started" } dd { (panel.clock.time(row.started_at.as_deref())) }
                dt { "Ended" } dd { (panel.clock.time(row.completed_at.as_deref())) }
                @if let Some(took) = panel.clock.span(row.started_at.as_deref(), row.completed_at.as_deref()) {
                    dt { "Duration" } dd { (took) @if row.completed_at.is_none() && running { " so far" } }
                }
            }
            div.actions {
                @if running { (action("cancel", "Cancel", "danger")) }
                @if let Some(Standing { key, limit, admitted: Admitted::Waits { position, holders } }) = &queued {
                    span.waiting {
                        "Waiting for a slot of concurrency key " code { (key) } " (limit " (limit) ", "
                        (position) " waiting before it), held by "
                        @for holder in holders { (workflow_link(holder)) " " }
                    }
                }
                @if let Some(first) = awaited.first() {
                    span.waiting {
                        @if let Some((_, prompt)) = &first.decision {
                            "Waiting for the decision of step " code { (first.step_id) } " (“" (prompt) "”)"
                            @if first.workflow_id != id { " in run " (workflow_link(&first.workflow_id)) }
                            ": resuming would not move it on. " a href="/decisions" { "Answer it →" }
                        } @else {
                            "Waiting for a signal at step " code { (first.step_id) }
                            @if first.workflow_id != id { " in run " (workflow_link(&first.workflow_id)) }
                            ": send it with opcode.signal (signal_type signal)."
                        }
                    }
                } @else if matches!(row.status.as_str(), "suspended" | "quarantined") { (action("resume", "Resume", "")) }
                @if row.status == WorkflowStatus::Failed { (action("retry", "Re-run from the failed step", "")) }
                (action("rerun", "Re-run", ""))
                a href={"/events?workflow=" (encode(&id))} { "Events" }
                a href={"/api/runs/" (encode(&id)) "/ag-ui"} { "AG-UI stream" }
                @if opcode_runtime::golden::exportable(row.status) {
                    a href={"/workflows/" (encode(&id)) "/test.json"} download title="This run as a workflow test case, for opcodec test" { "Test case" }
                }
            }
            @if let Some(output) = &row.output { h2 { "Output" } (json_text(output)) }
            @if let Some(error) = &row.error { h2 { "Error" } (json_text(error)) }
            h2 { "Inputs" } (json_text(&row.inputs))
        }
        section #diagram data-live {
            h2 { "Diagram" }
            (layout::diagram(&diagram))
        }
        section #steps data-live {
            h2 { "Steps" }
            (steps::Steps {
                rows: &steps,
                program: program.as_ref(),
                started: &inputs,
                rerun_of: rerun_of(&entries).as_deref(),
                ended: row.status.is_ended(),
            }.table())
        }
        section #decisions data-live {
            @if waiting.iter().any(|(_, pending)| !pending.is_empty()) {
                h2 { "Decisions of runs below" }
                ul.list {
                    @for (run, pending) in &waiting {
                        @for d in pending {
                            li {
                                (status(d.status.as_str())) " " strong { (d.prompt) } " · step " code { (d.step_id) }
                                " · run " (workflow_link(run))
                                " " a href="/decisions" { "Answer →" }
                            }
                        }
                    }
                }
            }
            @if !decisions.is_empty() {
                h2 { "Decisions" }
                ul.list {
                    @for d in &decisions {
                        li {
                            (status(d.status.as_str())) " " strong { (d.prompt) } " · step " code { (d.step_id) }
                            @if d.status == DecisionStatus::TimedOut {
                                " · timed out and " (layout::on_timeout(d.fallback.as_deref(), true))
                            }
                            @if let Some(resolution) = &d.resolution { (json_text(resolution)) }
                            @if d.status == DecisionStatus::Pending { " " a href="/decisions" { "Answer →" } }
                        }
                    }
                }
            }
            @if !children.is_empty() {
                h2 { "Child workflows" }
                ul.list { @for c in &children { li { (workflow_link(&c.id)) " " (status(c.status.as_str())) } } }
            }
        }
        section #timeline data-live data-refresh=[matches!(row.status.as_str(), "active" | "pending").then_some("2000")] {
            h2 { "Timeline" }
            (gantt::chart(&entries, running, panel.clock.now_ms()))
        }
        section #recent-events data-live {
            h2 { "Events" }
            p.muted {
                "The last " (recent.len()) " of " (row.last_seq) ". "
                a href={"/events?workflow=" (encode(&id))} { "All events, with filters →" }
            }
            div.scroll {
                table {
                    thead { tr { th.wide { "#" } th { "When" } th.wide { "Kind" } th { "Event" } th { "Step" } th { "Payload" } } }
                    tbody {
                        @for e in recent.iter().rev() {
                            tr {
                                td.wide { (e.seq) }
                                td { (panel.clock.time(Some(&e.at))) }
                                td.wide { (e.kind.as_str()) }
                                td { code { (e.event_type) } }
                                td { @if let Some(step) = &e.step_id { code { (step) } } }
                                td { details { summary { "payload" } (json_text(&e.payload)) } }
                            }
                        }
                    }
                }
            }
        }
    };
    let title = format!("Workflow {}", row.name);
    layout::page(&panel, &title, "/workflows", &query, Some(&id), &body).into_response()
}

/// `POST /workflows/{id}/{cancel|resume|rerun|retry}`.
pub async fn act(panel: Panel, Path((id, action)): Path<(String, String)>, _: Posted) -> Response {
    let here = format!("/workflows/{}", encode(&id));
    let result = match action.as_str() {
        "cancel" => {
            let args = json!({"workflow_id": id, "signal_type": "cancel", "payload": {"reason": "cancelled in the panel"}});
            call(&panel, "opcode.signal", args)
                .await
                .map(|_| here.clone())
        }
        "resume" => {
            let args = json!({"workflow_id": id, "signal_type": "resume"});
            call(&panel, "opcode.signal", args)
                .await
                .map(|_| here.clone())
        }
        "rerun" => rerun(&panel, &id).await,
        "retry" => retry(&panel, &id).await,
        other => return (StatusCode::NOT_FOUND, format!("no action `{other}`")).into_response(),
    };
    match result {
        Ok(to) => back(&to, None),
        Err(e) => back(&here, Some(format!("{}: {}", e.code.id, e.message))),
    }
}

/// Starts a run like workflow `id` (same template version, or the same
/// definition; same params and agent) and answers the new run's page.
async fn rerun(panel: &Panel, id: &str) -> Result<String, ToolError> {
    let store = panel.store();
    let row = store.workflow(id).await?.ok_or_else(|| {
        ToolError::new(
            opcode_vm::codes::R0121,
            format!("workflow `{id}` not found"),
        )
    })?;
    let params: Value = serde_json::from_str(&row.inputs).unwrap_or_else(|_| json!({}));
    let new_id = if let Some(name) = &row.template_name {
        let mut args = json!({"template_name": name, "params": params, "wait": false});
        if let Some(version) = row.template_version {
            args["version"] = json!(version);
        }
        if let Some(agent) = &row.agent_id {
            args["agent_id"] = json!(agent);
        }
        let answer = call(panel, "opcode.run", args).await?;
        answer
            .as_ref()
            .and_then(|a| a.get("workflow_id"))
            .and_then(Value::as_str)
            .unwrap_or(id)
            .to_owned()
    } else {
        // Not from a template (`opcode run FILE`): the same source and inputs.
        let source = store.source(&row.source_hash).await?.ok_or_else(|| {
            ToolError::new(opcode_vm::codes::R0109, "the workflow's source is missing")
        })?;
        let request = opcode_runtime::StartRequest {
            definition: source.definition,
            inputs: params,
            agent_id: row.agent_id.clone(),
            base_dir: row.base_dir.as_ref().map(std::path::PathBuf::from),
            ..opcode_runtime::StartRequest::default()
        };
        panel.api.executor().start(request).await?
    };
    Ok(format!("/workflows/{}", encode(&new_id)))
}

/// Re-runs failed workflow `id` from its failed step (its completed
/// steps' outputs kept) and answers the new run's page.
async fn retry(panel: &Panel, id: &str) -> Result<String, ToolError> {
    let request = opcode_runtime::rerun::from_failure(panel.store().as_ref(), id)
        .await?
        .map_err(|why| ToolError::new(opcode_vm::codes::R0114, why))?;
    let new_id = panel.api.executor().start(request).await?;
    Ok(format!("/workflows/{}", encode(&new_id)))
}

/// The run this one re-runs from its failed step, from its `run_started`.
fn rerun_of(entries: &[opcode_runtime::store::LogEntry]) -> Option<String> {
    let first = entries.first().filter(|e| e.seq == 1)?;
    let payload: Value = serde_json::from_str(&first.payload).ok()?;
    payload["meta"]["rerun_of"].as_str().map(str::to_owned)
}
