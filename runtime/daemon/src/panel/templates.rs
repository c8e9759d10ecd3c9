//! Templates: the list with the create form, one template's versions,
//! diagram and definition, and a run form.

use std::collections::BTreeMap;

use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde_json::{Value, json};

use super::form::{self, Problems};
use super::layout::{self, csrf, empty, encode, json_text};
use super::{Fields, Panel, Posted, back, call, diff, failure};
use opcode_runtime::store::{StoreError, TemplateFilter, TemplateRow};

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
                                td { @if let Some(t) = newest { (panel.clock.time(Some(&t.created_at))) } }
                            }
                        }
                    }
                }
            }
        }
        section #create {
            h2 { "Create a template" }
            form method="post" action="/templates" {
                (csrf(panel))
                label { "Name " input type="text" name="name" value=(field("name")) placeholder="taken from the definition when empty"; }
                label { "Description " input type="text" name="description" value=(field("description")); }
                fieldset.formats {
                    legend { "Format" }
                    label { input type="radio" name="format" value="json" checked[format == "json"]; " JSON" }
                    label { input type="radio" name="format" value="opc" checked[format == "opc"]; " .opc" }
                }
                div.paste {
                    label { "Definition "
                        textarea #source name="source" rows="14" spellcheck="false" required data-marks
                            aria-invalid=[problems.is_some().then_some("true")]
                            placeholder="{\"steps\": [{\"id\": \"hello\", \"action\": \"workflow.log\", \"params\": {\"message\": \"hi\"}}]}" { (field("source")) }
                    }
                    @if let Some(problems) = problems { (diagnostics(problems, field("source"))) }
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

/// A tool error, with its diagnostics one per line, each position a link
/// that selects its line in the text (`source`) and shows it with a caret.
fn diagnostics(error: &Value, source: &str) -> Markup {
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
                                " " a.where href="#source" data-line=(line) { "line " (line) ", column " (column) }
                            }
                            " " (d["message"].as_str().unwrap_or(""))
                            @if let (Some(line), Some(column)) = (d["line"].as_u64(), d["column"].as_u64()) {
                                (excerpt(source, line, column))
                            }
                            @if let Some(help) = d["help"].as_str() { br; span.help { "help: " (help) } }
                        }
                    }
                }
            }
        }
    }
}

/// Line `line` of `source` with a caret under column `column` (both from 1).
fn excerpt(source: &str, line: u64, column: u64) -> Markup {
    let Some(text) = source.lines().nth(line.saturating_sub(1) as usize) else {
        return html! {};
    };
    let text: String = text.chars().take(160).collect();
    let caret = " ".repeat(column.saturating_sub(1).min(160) as usize);
    html! { pre.excerpt { (line) " | " (text) "\n" (" ".repeat(line.to_string().len())) " | " (caret) "^" } }
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
    render_detail(&panel, &name, &query, None).await
}

/// A template's page; `run` (the posted run form and its problems) when a
/// run was refused, shown at the fields (422).
async fn render_detail(
    panel: &Panel,
    name: &str,
    query: &Fields,
    run: Option<(&Fields, &Problems)>,
) -> Response {
    let versions = match versions_of(panel, name).await {
        Ok(rows) => rows,
        Err(e) => return failure(&e),
    };
    let wanted: Option<i64> = run
        .and_then(|(posted, _)| posted.get("version"))
        .or(query.get("version"))
        .and_then(|v| v.trim_start_matches('v').parse().ok());
    let Some(shown) = versions
        .iter()
        .find(|t| Some(t.version) == wanted)
        .or_else(|| versions.iter().max_by_key(|t| t.version))
    else {
        return layout::not_found(panel, "/templates", query, &format!("template `{name}`"));
    };
    let diagram = diagram_of(panel, name, shown.version).await;
    let here = format!("/templates/{}", encode(name));
    let schema: Option<Value> = shown
        .input_schema
        .as_deref()
        .and_then(|s| serde_json::from_str(s).ok());
    let no_problems = Problems::new();
    let (posted, problems) = match run {
        Some((posted, problems)) => (Some(posted), problems),
        None => (None, &no_problems),
    };
    let generated = form::has_fields(schema.as_ref());
    let raw = posted
        .and_then(|p| p.get("params"))
        .map_or("", String::as_str);
    let older = versions
        .iter()
        .filter(|t| t.version < shown.version)
        .map(|t| t.version)
        .max();
    let body = html! {
        nav.versions {
            "Versions: "
            @for t in &versions {
                @if t.version == shown.version { strong { "v" (t.version) } } @else {
                    a href={(here) "?version=" (t.version)} { "v" (t.version) }
                }
                " "
            }
            @if let Some(older) = older {
                " " a href={(here) "/compare?a=" (older) "&b=" (shown.version)} { "Compare v" (older) " with v" (shown.version) " →" }
            }
        }
        @if !shown.description.is_empty() { p { (shown.description) } }
        p.muted { "Defined " (panel.clock.time(Some(&shown.created_at))) @if let Some(agent) = &shown.agent_id { " by " (agent) } }
        section #run {
            h2 { "Run it" }
            @if let Some(problem) = problems.get("") { p.flash.error role="alert" { (problem) } }
            form method="post" action={(here) "/run"} {
                (csrf(panel))
                input type="hidden" name="version" value=(shown.version);
                @if let Some(schema) = schema.as_ref().filter(|_| generated) {
                    fieldset.inputs { legend { "Inputs" } (form::fields(schema, posted, problems)) }
                    details open[!raw.is_empty()] {
                        summary { "Raw JSON instead" }
                        label { "Params (JSON object; when given, the fields above are not used) "
                            textarea name="params" rows="4" spellcheck="false" { (raw) } }
                    }
                } @else {
                    label { "Params (JSON object) " textarea name="params" rows="4" spellcheck="false" { @if raw.is_empty() { "{}" } @else { (raw) } } }
                }
                label { "Agent " input type="text" name="agent" value=(posted.and_then(|p| p.get("agent")).map_or("", String::as_str)); }
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
    let page = layout::page(
        panel,
        &format!("Template {name}"),
        "/templates",
        query,
        None,
        &body,
    );
    if run.is_some() {
        (StatusCode::UNPROCESSABLE_ENTITY, page).into_response()
    } else {
        page.into_response()
    }
}

/// Every version of template `name`, newest first.
async fn versions_of(panel: &Panel, name: &str) -> Result<Vec<TemplateRow>, StoreError> {
    let filter = TemplateFilter {
        name: Some(name.to_owned()),
        ..TemplateFilter::default()
    };
    panel.store().templates(filter).await
}

/// The SVG diagram of version `version` of template `name`.
async fn diagram_of(panel: &Panel, name: &str, version: i64) -> Value {
    panel
        .api
        .call(
            "opcode.diagram",
            json!({"template_name": name, "version": version, "format": "svg"}),
        )
        .await
        .unwrap_or(Value::Null)
}

/// `POST /templates/{name}/run`: `opcode.run` without waiting, with the
/// params the form gives (its fields, or the raw JSON); a form with
/// problems comes back with each at its field.
pub async fn run(
    panel: Panel,
    Path(name): Path<String>,
    Query(query): Query<Fields>,
    Posted(fields): Posted,
) -> Response {
    let version = fields.get("version").and_then(|v| v.parse::<i64>().ok());
    let template = match panel.store().template(&name, version).await {
        Ok(Some(t)) => t,
        Ok(None) => {
            return layout::not_found(&panel, "/templates", &query, &format!("template `{name}`"));
        }
        Err(e) => return failure(&e),
    };
    let schema: Option<Value> = template
        .input_schema
        .as_deref()
        .and_then(|s| serde_json::from_str(s).ok());
    let params = match form::params(schema.as_ref(), &fields) {
        Ok(params) => params,
        Err(problems) => {
            return render_detail(&panel, &name, &query, Some((&fields, &problems))).await;
        }
    };
    let mut args = json!({"template_name": name, "params": params, "wait": false, "version": template.version});
    if let Some(agent) = fields.get("agent").filter(|a| !a.is_empty()) {
        args["agent_id"] = json!(agent);
    }
    match call(&panel, "opcode.run", args).await {
        Ok(answer) => match answer.as_ref().and_then(|a| a["workflow_id"].as_str()) {
            Some(id) => back(&format!("/workflows/{}", encode(id)), None),
            None => back("/workflows", None),
        },
        Err(e) => {
            let problems =
                Problems::from([(String::new(), format!("{}: {}", e.code.id, e.message))]);
            render_detail(&panel, &name, &query, Some((&fields, &problems))).await
        }
    }
}

/// `GET /templates/{name}/compare?a=&b=`: two versions' definitions as a
/// diff and their diagrams side by side.
pub async fn compare(
    panel: Panel,
    Path(name): Path<String>,
    Query(query): Query<Fields>,
) -> Response {
    let versions = match versions_of(&panel, &name).await {
        Ok(rows) => rows,
        Err(e) => return failure(&e),
    };
    let pick = |key: &str| {
        let wanted: Option<i64> = query
            .get(key)
            .and_then(|v| v.trim_start_matches('v').parse().ok());
        versions.iter().find(|t| Some(t.version) == wanted)
    };
    let (Some(a), Some(b)) = (pick("a"), pick("b")) else {
        let what = format!("pair of versions of template `{name}` to compare (give ?a=&b=)");
        return layout::not_found(&panel, "/templates", &query, &what);
    };
    let (left, right) = (
        diagram_of(&panel, &name, a.version).await,
        diagram_of(&panel, &name, b.version).await,
    );
    let here = format!("/templates/{}", encode(&name));
    let body = html! {
        form.filters method="get" action={(here) "/compare"} {
            @for (key, chosen) in [("a", a.version), ("b", b.version)] {
                label { (key) " "
                    select name=(key) { @for t in &versions { option value=(t.version) selected[t.version == chosen] { "v" (t.version) } } }
                }
            }
            button type="submit" { "Compare" }
        }
        section #diff {
            h2 { "Definition: v" (a.version) " → v" (b.version) }
            (diff::unified(&pretty(a), &pretty(b), &format!("v{}", a.version), &format!("v{}", b.version)))
        }
        section.columns #diagrams {
            div { h2 { a href={(here) "?version=" (a.version)} { "v" (a.version) } } (layout::diagram(&left)) }
            div { h2 { a href={(here) "?version=" (b.version)} { "v" (b.version) } } (layout::diagram(&right)) }
        }
    };
    let title = format!("Template {name}: v{} and v{}", a.version, b.version);
    layout::page(&panel, &title, "/templates", &query, None, &body).into_response()
}

/// A version as the diff compares it: its definition and schemas, pretty.
fn pretty(t: &TemplateRow) -> String {
    let parse = |text: Option<&str>| text.and_then(|t| serde_json::from_str::<Value>(t).ok());
    let whole = json!({
        "description": t.description,
        "definition": parse(Some(&t.definition)),
        "input_schema": parse(t.input_schema.as_deref()),
        "output_schema": parse(t.output_schema.as_deref()),
        "triggers": parse(Some(&t.triggers)),
    });
    serde_json::to_string_pretty(&whole).unwrap_or_default()
}
