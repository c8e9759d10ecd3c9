//! The agent registry (spec/registry.md): every published agent, and one
//! agent's release with its skills and what changed since the release
//! before it.

use axum::extract::{Path, Query};
use axum::response::{IntoResponse, Response};
use maud::html;
use opcode_runtime::registry;

use super::layout::{self, empty, encode};
use super::{Fields, Panel, diff, failure};

/// `/registry`: each agent's newest release.
pub async fn list(panel: Panel, Query(query): Query<Fields>) -> Response {
    let agents = match registry::catalog(panel.store().as_ref()).await {
        Ok(rows) => rows,
        Err(e) => return failure(&e),
    };
    let body = html! {
        section #registry {
            @if agents.is_empty() {
                (empty("No agent is published yet: `opcode agent init NAME`, then `opcode agent publish NAME.agent.json`."))
            } @else {
                table {
                    thead { tr { th { "Agent" } th { "Newest" } th { "Role" } th { "Releases" } th { "Published" } th { "By" } th { "Last eval" } th { "What it is for" } } }
                    tbody {
                        @for a in &agents {
                            @let name = a["name"].as_str().unwrap_or_default();
                            tr {
                                td { a href={"/registry/" (encode(name))} { (name) } }
                                td { (a["newest"].as_str().unwrap_or_default()) }
                                td { (a["role"].as_str().unwrap_or_default()) }
                                td { (a["releases"]) }
                                td { (panel.clock.time(a["published_at"].as_str())) }
                                td { (a["published_by"].as_str().unwrap_or("—")) }
                                td { (eval_cell(&a["last_eval"])) }
                                td { (a["description"].as_str().unwrap_or_default()) }
                            }
                        }
                    }
                }
            }
        }
    };
    layout::page(&panel, "Agent registry", "/registry", &query, None, &body).into_response()
}

/// `/registry/NAME` (`?version=` for another than the newest): the
/// release, its versions, and its diff from the release before it.
pub async fn detail(
    panel: Panel,
    Path(name): Path<String>,
    Query(query): Query<Fields>,
) -> Response {
    let store = panel.store().as_ref();
    let releases = match store.agent_releases(Some(&name)).await {
        Ok(rows) => rows,
        Err(e) => return failure(&e),
    };
    let spec = match query.get("version") {
        Some(version) => format!("{name}@{version}"),
        None => name.clone(),
    };
    let Ok(release) = registry::find(&releases, &spec) else {
        return layout::not_found(
            &panel,
            "/registry",
            &query,
            &format!("published agent `{spec}`"),
        );
    };
    let shown = match registry::expanded(store, release).await {
        Ok(definition) => definition,
        Err(e) => return failure(&e),
    };
    let evals = match store.agent_evals(Some(&name)).await {
        Ok(rows) => rows,
        Err(e) => return failure(&e),
    };
    let eval = evals
        .iter()
        .find(|e| e.version == release.version)
        .map(|e| registry::eval_view(e, true));
    let earlier = registry::before(&releases, release);
    let changes = match earlier {
        Some(earlier) => match registry::expanded(store, earlier).await {
            Ok(before) => Some((earlier, before)),
            Err(e) => return failure(&e),
        },
        None => None,
    };
    let here = format!("/registry/{}", encode(&name));
    let body = html! {
        section #release {
            p {
                "Published " (panel.clock.time(Some(&release.published_at)))
                @if let Some(by) = &release.published_by { " by " (by) }
                ". Digest " code { (release.digest) }
            }
            p.versions {
                "Versions: "
                @for r in &releases {
                    @if r.version == release.version { strong { (r.version) } } @else {
                        a href={(here) "?version=" (encode(&r.version))} { (r.version) }
                    }
                    " "
                }
            }
            pre.definition { (registry::document(&shown)) }
        }
        section #eval {
            h2 { "Last eval" }
            @match &eval {
                Some(eval) => {
                    p {
                        (eval_cell(eval)) ", " (panel.clock.time(eval["at"].as_str()))
                        @if let Some(suite) = eval["suite"].as_str() { " (" code { (suite) } ")" }
                    }
                    table {
                        thead { tr { th { "Case" } th { "Result" } th { "Status" } th { "Why it failed" } } }
                        tbody {
                            @for case in eval["cases"].as_array().into_iter().flatten() {
                                tr {
                                    td { (case["name"].as_str().unwrap_or_default()) }
                                    td { @if case["passed"] == true { "passed" } @else { strong { "failed" } } }
                                    td { (case["status"].as_str().unwrap_or_default()) }
                                    td {
                                        @for failure in case["failures"].as_array().into_iter().flatten() {
                                            div { (failure.as_str().unwrap_or_default()) }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                None => { (empty("No eval suite has run on this release: `opcode agent test NAME.agent.json`.")) }
            }
        }
        section #changes {
            @match &changes {
                Some((earlier, before)) => {
                    h2 { "Changes from " (earlier.version) }
                    (diff::unified(&registry::document(before), &registry::document(&shown), &earlier.version, &release.version))
                }
                None => { (empty("The first release: nothing before it to compare.")) }
            }
        }
    };
    let title = format!("Agent {}@{}", release.name, release.version);
    layout::page(&panel, &title, "/registry", &query, None, &body).into_response()
}

/// A last eval result in a few words: `3 passed, 1 failed`, or `—`.
fn eval_cell(eval: &serde_json::Value) -> String {
    match (eval["passed"].as_u64(), eval["failed"].as_u64()) {
        (Some(passed), Some(failed)) => format!("{passed} passed, {failed} failed"),
        _ => "—".to_owned(),
    }
}
