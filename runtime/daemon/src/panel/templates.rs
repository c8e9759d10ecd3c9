//! Templates: the list with the create form, one template's versions,
//! diagram and definition, and a run form.

use std::collections::BTreeMap;

use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde_json::{Value, json};

use super::layout::{self, csrf, empty, encode, json_text, time};
use super::{Fields, Panel, Posted, back, call, failure};
use opcode_runtime::store::{TemplateFilter, TemplateRow};

/// `GET /templates`.
pub async fn list(panel: Panel, Query(query): Query<Fields>) -> Response {
    render_list(&panel, &query, &Fields::new(), None).await
}

/// The list page, with the create form holding `form` and showing
/// `problems` (a tool error as JSON) when a create failed.
async fn render_list(
    panel: &Panel,
    query: &Fields,
    form: &Fields,
    problems: Option<&Value>,
) -> Response {
    let templates = match panel.store().templates(TemplateFilter::default()).await {
        Ok(rows) => rows,
        Err(e) => return failure(&e),
    };
    let mut by_name: BTreeMap<&str, Vec<&TemplateRow>> = BTreeMap::new();
    for t in &templates {
        by_name.entry(&t.name).or_default().push(t);
    }
    let field = |key: &str| form.get(key).map_or("", String::as_str);
    let format = if field("format") == "opc" {
        "opc"
    } else {
        "json"
    };
    let body = html! {
        section #template-list data-live {
            @if by_name.is_empty() {
                (empty("No template yet: create one below, or with opcode.define."))
            } @else {
                table {
                    thead { tr { th { "Template" } th { "Newest" } th { "Versions" } th { "Description" } th { "Defined" } } }
                    tbody {
                        @for (name, versions) in &by_name {
                            @let newest = versions.iter().max_by_key(|t| t.version);
                            tr {
                                td { a href={"/templates/" (encode(name))} { (name) } }
                                td { @if let Some(t) = newest { "v" (t.version) } }
                                td { (versions.len()) }
                                td { @if let Some(t) = newest { (t.description) } }
                                td { @if let Some(t) = newest { (time(Some(&t.created_at))) } }
                            }
                        }
                    }
                }
            }
        }
        section #create {
            h2 { "Create a template" }
            @if let Some(problems) = problems { (diagnostics(problems)) }
            form method="post" action="/templates" {
                (csrf(panel))
                label { "Name " input type="text" name="name" value=(field("name")) placeholder="taken from the definition when empty"; }
                label { "Description " input type="text" name="description" value=(field("description")); }
                fieldset.formats {
                    legend { "Format" }
                    label { input type="radio" name="format" value="json" checked[format == "json"]; " JSON" }
                    label { input type="radio" name="format" value="opc" checked[format == "opc"]; " .opc" }
                }
                label { "Definition "
                    textarea name="source" rows="14" spellcheck="false" required
                        placeholder="{\"steps\": [{\"id\": \"hello\", \"action\": \"workflow.log\", \"params\": {\"message\": \"hi\"}}]}" { (field("source")) }
                }
                label.check { input type="checkbox" name="expose" value="on" checked[!field("expose").is_empty()]; " Expose as an MCP tool of its own (named as the template)" }
                button type="submit" { "Create" }
            }
        }
    };
    let page = layout::page(panel, "Templates", "/templates", query, None, &body);
    if problems.is_some() {
        (StatusCode::UNPROCESSABLE_ENTITY, page).into_response()
    } else {
        page.into_response()
    }
}

/// A tool error, with its diagnostics one per line.
fn diagnostics(error: &Value) -> Markup {
    let list = error["details"]["diagnostics"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    html! {
        div.diagnostics role="alert" {
            p { strong { (error["code"].as_str().unwrap_or("")) } " " (error["message"].as_str().unwrap_or("")) }
            @if !list.is_empty() {
                ul {
                    @for d in &list {
                        li class=(d["severity"].as_str().unwrap_or("error")) {
                            code { (d["code"].as_str().unwrap_or("")) }
                            @if let (Some(line), Some(column)) = (d["line"].as_u64(), d["column"].as_u64()) {
                                " " span.where { "line " (line) ", column " (column) }
                            }
                            " " (d["message"].as_str().unwrap_or(""))
                            @if let Some(help) = d["help"].as_str() { br; span.help { "help: " (help) } }
                        }
                    }
                }
            }
        }
    }
}

/// The `opcode.define` arguments for the pasted text: a `.opc` workflow, a
/// workflow object, or a whole template (`{name, definition, input_schema…}`,
/// the shape of opcode's example files). JSON is compiled as pasted first,
/// so diagnostics point into the text the user sees.
fn define_args(panel: &Panel, fields: &Fields) -> Result<Value, Value> {
    let refuse = |message: &str| json!({"code": "R0122", "message": message});
    let source = fields.get("source").map_or("", String::as_str);
    let given = |key: &str| fields.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
    let opc = fields.get("format").is_some_and(|f| f == "opc");
    let mut args = if opc {
        if source.trim_start().starts_with('{') {
            return Err(refuse("this text is JSON: choose the JSON format"));
        }
        let name = opcode_compiler::syntax::opc::to_json(source)
            .ok()
            .and_then(|v| v.get("name").and_then(Value::as_str).map(str::to_owned));
        json!({"name": name, "definition": source})
    } else {
        crate::api::check_text(&panel.api, source, "pasted.json")
            .map_err(|e| e.to_json()["error"].clone())?;
        let Ok(Value::Object(mut pasted)) = serde_json::from_str::<Value>(source) else {
            return Err(refuse("paste a JSON object"));
        };
        if pasted.get("definition").is_some_and(Value::is_object) {
            pasted.retain(|key, _| {
                matches!(
                    key.as_str(),
                    "name"
                        | "description"
                        | "definition"
                        | "input_schema"
                        | "output_schema"
                        | "triggers"
                        | "expose"
                )
            });
            Value::Object(pasted)
        } else {
            let name = pasted.remove("name");
            json!({"name": name, "definition": pasted})
        }
    };
    if let Some(name) = given("name") {
        args["name"] = json!(name);
    }
    if let Some(description) = given("description") {
        args["description"] = json!(description);
    }
    if given("expose").is_some() {
        args["expose"] = json!(true);
    }
    if !args["name"].is_string() {
        return Err(refuse(
            "give the template a name (or a `name` in the definition)",
        ));
    }
    Ok(args)
}

/// `POST /templates`: `opcode.define` of the pasted text.
pub async fn create(panel: Panel, Query(query): Query<Fields>, Posted(fields): Posted) -> Response {
    let args = match define_args(&panel, &fields) {
        Ok(args) => args,
        Err(error) => return render_list(&panel, &query, &fields, Some(&error)).await,
    };
    let name = args["name"].as_str().unwrap_or_default().to_owned();
    match panel.api.call("opcode.define", args).await {
        Ok(answer) => {
            let version = answer["version_number"].as_i64().unwrap_or(1);
            back(
                &format!("/templates/{}?version={version}", encode(&name)),
                None,
            )
        }
        Err(e) => render_list(&panel, &query, &fields, Some(&e.to_json()["error"])).await,
    }
}

/// `GET /templates/{name}?version=`.
pub async fn detail(
    panel: Panel,
    Path(name): Path<String>,
    Query(query): Query<Fields>,
) -> Response {
    let filter = TemplateFilter {
        name: Some(name.clone()),
        ..TemplateFilter::default()
    };
    let versions = match panel.store().templates(filter).await {
        Ok(rows) => rows,
        Err(e) => return failure(&e),
    };
    let wanted: Option<i64> = query
        .get("version")
        .and_then(|v| v.trim_start_matches('v').parse().ok());
    let Some(shown) = versions
        .iter()
        .find(|t| Some(t.version) == wanted)
        .or_else(|| versions.iter().max_by_key(|t| t.version))
    else {
        return layout::not_found(&panel, "/templates", &query, &format!("template `{name}`"));
    };
    let diagram = panel
        .api
        .call(
            "opcode.diagram",
            json!({"template_name": name, "version": shown.version, "format": "svg"}),
        )
        .await
        .unwrap_or(Value::Null);
    let here = format!("/templates/{}", encode(&name));
    let body = html! {
        nav.versions {
            "Versions: "
            @for t in &versions {
                @if t.version == shown.version { strong { "v" (t.version) } } @else {
                    a href={(here) "?version=" (t.version)} { "v" (t.version) }
                }
                " "
            }
        }
        @if !shown.description.is_empty() { p { (shown.description) } }
        p.muted { "Defined " (time(Some(&shown.created_at))) @if let Some(agent) = &shown.agent_id { " by " (agent) } }
        section {
            h2 { "Run it" }
            form method="post" action={(here) "/run"} {
                (csrf(&panel))
                input type="hidden" name="version" value=(shown.version);
                label { "Params (JSON object) " textarea name="params" rows="3" spellcheck="false" { "{}" } }
                label { "Agent " input type="text" name="agent"; }
                button type="submit" { "Run v" (shown.version) }
            }
        }
        section { h2 { "Diagram" } (layout::diagram(&diagram)) }
        section {
            h2 { "Definition" }
            (json_text(&shown.definition))
            @if let Some(schema) = &shown.input_schema { h2 { "Input schema" } (json_text(schema)) }
        }
    };
    layout::page(
        &panel,
        &format!("Template {name}"),
        "/templates",
        &query,
        None,
        &body,
    )
    .into_response()
}

/// `POST /templates/{name}/run`: `opcode.run` without waiting.
pub async fn run(panel: Panel, Path(name): Path<String>, Posted(fields): Posted) -> Response {
    let here = format!("/templates/{}", encode(&name));
    let params = fields
        .get("params")
        .map_or("{}", |p| if p.trim().is_empty() { "{}" } else { p });
    let Ok(params) = serde_json::from_str::<Value>(params) else {
        return back(&here, Some("the params are not JSON".into()));
    };
    let mut args = json!({"template_name": name, "params": params, "wait": false});
    if let Some(version) = fields.get("version").and_then(|v| v.parse::<i64>().ok()) {
        args["version"] = json!(version);
    }
    if let Some(agent) = fields.get("agent").filter(|a| !a.is_empty()) {
        args["agent_id"] = json!(agent);
    }
    match call(&panel, "opcode.run", args).await {
        Ok(answer) => match answer.as_ref().and_then(|a| a["workflow_id"].as_str()) {
            Some(id) => back(&format!("/workflows/{}", encode(id)), None),
            None => back("/workflows", None),
        },
        Err(e) => back(&here, Some(format!("{}: {}", e.code.id, e.message))),
    }
}
