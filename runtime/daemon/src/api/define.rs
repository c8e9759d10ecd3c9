//! `opcode.define`: compile a workflow and store it as the next version of
//! a template, or reject it with its diagnostics as data.

use opcode_compiler::diagnostics::Diagnostics;
use opcode_compiler::diagnostics::render::json::to_json_array;
use opcode_vm::Program;
use opcode_vm::codes;
use serde_json::{Map, Value, json};

use super::args::Args;
use super::embedded::Embedded;
use super::{Api, ToolError, ToolResult};
use crate::stream::trigger::StreamTrigger;
use opcode_compiler::Embedding;
use opcode_runtime::registry::lookup::Known;
use opcode_runtime::schedule::{Missed, Schedule};
use opcode_runtime::store::{ScheduleRow, TemplateDraft};
use opcode_runtime::time::{now_ms, rfc3339};

/// The file name diagnostics are reported against.
const FILE: &str = "opcode.define";

/// Handles `opcode.define`.
pub async fn define(api: &Api, args: &Args) -> ToolResult {
    if let Some(agent) = args.get("agent") {
        if args.get("definition").is_some() {
            return Err(ToolError::new(
                codes::R0122,
                "give `definition` (a workflow) or `agent` (an agent definition), not both",
            ));
        }
        return super::agent_publish::publish(api, args, agent).await;
    }
    let from_opc;
    let args = match args.get("definition") {
        Some(Value::String(text)) if !text.trim_start().starts_with('{') => {
            from_opc = with_template_fields(args, opc_definition(api, text).await?);
            &from_opc
        }
        _ => args,
    };
    let name = args.str("name")?;
    check_name(name)?;
    let agent_id = args.opt_str("agent_id")?;
    let description = args.opt_str("description")?.unwrap_or_default();
    let definition = definition_of(args)?;
    // Compile the arguments' own shape, so that diagnostics' pointers name
    // the argument (`/definition/steps/0/action`).
    let mut wrapper = Map::new();
    wrapper.insert("name".into(), name.into());
    if !description.is_empty() {
        wrapper.insert("description".into(), description.into());
    }
    for key in [
        "input_schema",
        "output_schema",
        "triggers",
        "expose",
        "priority",
    ] {
        if let Some(value) = args.get(key) {
            wrapper.insert(key.into(), value.clone());
        }
    }
    // A definition sent as JSON text is compiled as the caller wrote it,
    // inside the wrapper, so its diagnostics can be said in that text.
    let (text, embedded) = if let Some(Value::String(json_text)) = args.get("definition") {
        let (text, embedded) = Embedded::wrap(&wrapper, json_text);
        (text, Some(embedded))
    } else {
        let mut whole = wrapper.clone();
        whole.insert("definition".into(), definition.clone());
        let text = serde_json::to_string_pretty(&whole).unwrap_or_default();
        (text, None)
    };
    wrapper.insert("definition".into(), definition);
    let wrapper = Value::Object(wrapper);
    let (program, diagnostics, stored) = compile(api, text.clone(), agent_id).await?;
    let for_caller = |rendered| for_caller(rendered, embedded.as_ref());
    let rendered = checked(program.is_some(), diagnostics, FILE, &text)
        .map(for_caller)
        .map_err(|mut e| {
            e.details = e.details.map(for_caller);
            e
        })?;
    check_priority(api, &wrapper)?;
    if let Some(program) = program {
        api.exec.keep_program(&stored, program);
    }
    let trigger = trigger_of(args, name, agent_id)?;
    if let Some(triggers) = args.opt_object("triggers")? {
        let refused = |(pointer, message): (String, String)| {
            ToolError::new(codes::R0122, message).with_details(json!({ "pointer": pointer }))
        };
        super::webhook::Webhook::of(triggers).map_err(refused)?;
        if let Some(stream) = StreamTrigger::of(name, triggers).map_err(refused)?
            && let Some(refusal) = api.brokers().refusal(&stream)
        {
            return Err(refused(refusal));
        }
    }
    api.seen(agent_id).await?;
    let schedule = trigger
        .as_ref()
        .map(|job| json!({"id": job.id, "cron": job.cron, "timezone": job.timezone}));
    let expose = wrapper.get("expose") == Some(&Value::Bool(true));
    if expose {
        super::template_tools::check_name(name)?;
    }
    // The same arguments again (a retry, an agent unsure it defined it)
    // are the newest version already: nothing new is stored.
    let previous = api.store().template(name, None).await?;
    let was_exposed = previous
        .as_ref()
        .is_some_and(super::template_tools::exposed);
    if let Some(latest) = previous
        && latest.definition == stored
    {
        return Ok(answer(
            &latest.name,
            latest.version,
            schedule,
            &rendered,
            true,
        ));
    }
    let text_of = |key: &str| wrapper.get(key).map(Value::to_string);
    let row = api
        .store()
        .define_template(TemplateDraft {
            name: name.to_owned(),
            description: description.to_owned(),
            definition: stored,
            input_schema: text_of("input_schema"),
            output_schema: text_of("output_schema"),
            triggers: text_of("triggers").unwrap_or_else(|| "{}".into()),
            agent_id: agent_id.map(str::to_owned),
            at: rfc3339(now_ms()),
        })
        .await?;
    let row = api.templates.keep(row, true);
    if expose || was_exposed {
        api.tools_changed();
    }
    match trigger {
        Some(job) => api.store().save_schedule(job).await?,
        None => {
            api.store().delete_schedule(&trigger_id(name)).await?;
        }
    }
    Ok(answer(&row.name, row.version, schedule, &rendered, false))
}

/// What `opcode.define` answers: the version, its schedule if it has one,
/// the warnings, and whether it was already the newest.
fn answer(
    name: &str,
    version: i64,
    schedule: Option<Value>,
    warnings: &Value,
    unchanged: bool,
) -> Value {
    let mut out = json!({
        "name": name,
        "version": format!("v{version}"),
        "version_number": version,
        "warnings": warnings,
    });
    if let Some(schedule) = schedule {
        out["schedule"] = schedule;
    }
    if unchanged {
        out["unchanged"] = json!(true);
    }
    out
}

/// Refuses a template priority above what the settings let callers ask
/// (`priority_highest`): a template would otherwise lift every run of it.
fn check_priority(api: &Api, wrapper: &Value) -> Result<(), ToolError> {
    let Some(priority) = wrapper.get("priority").and_then(Value::as_u64) else {
        return Ok(());
    };
    let highest = api.priority_highest();
    if priority < u64::from(highest) {
        return Err(ToolError::new(
            codes::R0122,
            format!(
                "`priority` {priority} is above the highest the settings allow \
                 (`priority_highest` is {highest}; 0 is first, 9 last)"
            ),
        )
        .with_details(json!({"argument": "priority", "highest": highest})));
    }
    Ok(())
}

/// The longest template name, in characters.
const MAX_NAME_CHARS: usize = 200;

/// Refuses a template name that could not be told apart or shown safely:
/// empty, longer than [`MAX_NAME_CHARS`], holding a control character (a
/// NUL would cut it short in the store, aliasing another), a slash or a
/// backslash, or starting with a dot (it names a file next to a workflow).
fn check_name(name: &str) -> Result<(), ToolError> {
    let problem = if name.trim().is_empty() {
        Some("must not be empty")
    } else if name.chars().count() > MAX_NAME_CHARS {
        Some("must be at most 200 characters")
    } else if name.chars().any(char::is_control) {
        Some("must not hold control characters (NUL, tabs, line breaks)")
    } else if opcode_stdlib::exec::path_like(name) {
        Some("must not hold `/` or `\\`, nor start with `.`")
    } else {
        None
    };
    match problem {
        Some(why) => {
            let shown: String = name
                .chars()
                .take(40)
                .collect::<String>()
                .escape_debug()
                .to_string();
            Err(
                ToolError::new(codes::R0122, format!("the template name `{shown}` {why}"))
                    .with_details(json!({"argument": "name"})),
            )
        }
        None => Ok(()),
    }
}

/// Compiles `text` as the daemon knows it (the isolation ceiling of
/// `agent`'s workflows, the settings' agents and the registry's releases),
/// on a thread of its own: a large definition takes a while, and the async
/// threads keep answering meanwhile. Answers the text to store too: `text`
/// with each step naming a published agent by name alone pinned to the
/// release it names (spec/registry.md, "Steps naming a release").
async fn compile(
    api: &Api,
    text: String,
    agent: Option<&str>,
) -> Result<(Option<Program>, Diagnostics, String), ToolError> {
    let known = if Known::may_name_agents(&text) {
        let entries = api.exec.agents().entries.keys().cloned();
        Known::load(api.store().as_ref(), entries).await?
    } else {
        Known::default()
    };
    let (exec, agent) = (api.exec.clone(), agent.map(str::to_owned));
    tokio::task::spawn_blocking(move || {
        let ceiling = exec.ceiling(agent.as_deref());
        let embedding = Embedding {
            isolation: Some(&ceiling),
            agents: Some(&known),
        };
        let compiler = exec.compiler();
        let (program, diagnostics) = compiler.compile_with(&text, FILE, embedding);
        if program.is_none() {
            return (program, diagnostics, text);
        }
        let pinned = compiler.pin_agents(&text, FILE, &known);
        if pinned == text {
            return (program, diagnostics, text);
        }
        let (program, _) = compiler.compile_with(&pinned, FILE, embedding);
        (program, diagnostics, pinned)
    })
    .await
    .map_err(|e| ToolError::new(codes::R0123, format!("the compiler stopped: {e}")))
}

/// Diagnostics (an array, or an object holding `diagnostics`) as the
/// caller can use them. A definition sent as JSON text has them said in
/// that text (`embedded`). Otherwise the text compiled is ours, not the
/// caller's: fixes go as RFC 6902 patches on the arguments it sent
/// (`/definition/…`), without text edits at offsets it never saw, and a
/// fix with no patch is left out whole (spec/mcp.md, `opcode.define`).
fn for_caller(mut rendered: Value, embedded: Option<&Embedded>) -> Value {
    let list = match rendered.get_mut("diagnostics") {
        Some(list) => list,
        None => &mut rendered,
    };
    if let Some(embedded) = embedded {
        *list = embedded.relocate(list.take());
        return rendered;
    }
    for diagnostic in list.as_array_mut().into_iter().flatten() {
        let Some(members) = diagnostic.as_object_mut() else {
            continue;
        };
        if let Some(fix) = members.get_mut("fix").and_then(Value::as_object_mut) {
            fix.remove("edits");
            if fix
                .get("patch")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
            {
                members.remove("fix");
            }
        }
    }
    rendered
}

/// The diagnostics as data, or R0123 with them when one is an error.
fn checked(
    compiled: bool,
    diagnostics: Diagnostics,
    file: &str,
    text: &str,
) -> Result<Value, ToolError> {
    let sorted = diagnostics.into_sorted();
    let rendered = to_json_array(&sorted, file, text);
    let count = rendered
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["severity"] == "error")
        .count();
    if compiled && count == 0 {
        return Ok(rendered);
    }
    Err(ToolError::new(
        codes::R0123,
        format!(
            "the workflow does not compile ({count} error{}); nothing was stored",
            if count == 1 { "" } else { "s" }
        ),
    )
    .with_details(json!({ "diagnostics": rendered })))
}

/// Compiles `text` as the file `file` (JSON or `.opc` by its extension):
/// its diagnostics as data, or R0123 with them when one is an error.
pub fn check_text(api: &Api, text: &str, file: &str) -> Result<Value, ToolError> {
    let (program, diagnostics) = api.exec.compiler().compile(text, file);
    checked(program.is_some(), diagnostics, file, text)
}

/// A `definition` in `.opc` text: checked as written (so diagnostics point
/// into it), then converted to the workflow object; on a thread of its
/// own, as [`compile`].
async fn opc_definition(api: &Api, text: &str) -> Result<Value, ToolError> {
    const OPC_FILE: &str = "definition.opc";
    let (exec, text) = (api.exec.clone(), text.to_owned());
    tokio::task::spawn_blocking(move || {
        let (program, diagnostics) = exec.compiler().compile(&text, OPC_FILE);
        checked(program.is_some(), diagnostics, OPC_FILE, &text)?;
        opcode_compiler::syntax::opc::to_json(&text).map_err(|diagnostics| {
            checked(false, diagnostics, OPC_FILE, &text)
                .err()
                .unwrap_or_else(|| ToolError::new(codes::R0123, "the .opc text does not convert"))
        })
    })
    .await
    .map_err(|e| ToolError::new(codes::R0123, format!("the compiler stopped: {e}")))?
}

/// The arguments with `value` (converted `.opc` text) as the definition;
/// when it is a whole template (`definition` inside), its `description`,
/// schemas and triggers fill in what the arguments do not give.
fn with_template_fields(args: &Args, value: Value) -> Args {
    let Some(inner) = value.get("definition").filter(|d| d.is_object()) else {
        return args.with("definition", value);
    };
    let mut merged = args.with("definition", inner.clone());
    for key in [
        "description",
        "input_schema",
        "output_schema",
        "triggers",
        "expose",
        "priority",
    ] {
        if args.get(key).is_none()
            && let Some(field) = value.get(key)
        {
            merged = merged.with(key, field.clone());
        }
    }
    merged
}

/// The `definition` argument: an object, or JSON text of one.
fn definition_of(args: &Args) -> Result<Value, ToolError> {
    match args.get("definition") {
        Some(Value::Object(map)) => Ok(Value::Object(map.clone())),
        Some(Value::String(text)) => {
            // Read as the compiler reads files, so that a duplicate key or
            // a syntax error is refused where it is, under the same rule as
            // `opcodec check`, before a lenient reader takes the last value.
            let mut sink = Diagnostics::new();
            if opcode_compiler::syntax::json::parse(text, &mut sink).is_none() || sink.has_errors()
            {
                return Err(checked(false, sink, "definition.json", text)
                    .err()
                    .unwrap_or_else(|| {
                        ToolError::new(codes::R0122, "`definition` is not valid JSON")
                    }));
            }
            match serde_json::from_str::<Value>(text) {
                Ok(value) if value.is_object() => Ok(value),
                _ => Err(ToolError::new(
                    codes::R0122,
                    "`definition` must be a workflow object (or JSON text of one)",
                )),
            }
        }
        Some(other) => Err(ToolError::new(
            codes::R0122,
            format!(
                "`definition` must be a workflow object, got {}",
                super::args::kind(other)
            ),
        )),
        None => Err(ToolError::new(codes::R0122, "`definition` is required")),
    }
}

/// The id of the schedule a template's `triggers.cron` creates.
pub fn trigger_id(template: &str) -> String {
    format!("trigger:{template}")
}

/// The schedule `triggers.cron` asks for, checked; `None` without one.
fn trigger_of(
    args: &Args,
    name: &str,
    agent_id: Option<&str>,
) -> Result<Option<ScheduleRow>, ToolError> {
    let Some(triggers) = args.opt_object("triggers")? else {
        return Ok(None);
    };
    let Some(cron) = triggers.get("cron") else {
        return Ok(None);
    };
    let invalid = |pointer: &str, message: String| {
        ToolError::new(codes::R0122, message).with_details(json!({ "pointer": pointer }))
    };
    let Value::String(cron) = cron else {
        return Err(invalid(
            "/triggers/cron",
            "`triggers.cron` must be a cron expression".into(),
        ));
    };
    let timezone = match triggers.get("timezone") {
        None | Some(Value::Null) => "UTC".to_owned(),
        Some(Value::String(tz)) => tz.clone(),
        Some(_) => {
            return Err(invalid(
                "/triggers/timezone",
                "`triggers.timezone` must be a string".into(),
            ));
        }
    };
    Schedule::parse(cron, &timezone)
        .map_err(|e| invalid("/triggers/cron", format!("`triggers.cron`: {e}")))?;
    let missed = match triggers.get("missed").and_then(Value::as_str) {
        None => Missed::RunOnce,
        Some(text) => Missed::parse(text).ok_or_else(|| {
            invalid(
                "/triggers/missed",
                "`triggers.missed` is `run_once` or `skip`".into(),
            )
        })?,
    };
    let params = match triggers.get("params") {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(Value::Object(map)) => Value::Object(map.clone()).to_string(),
        Some(_) => {
            return Err(invalid(
                "/triggers/params",
                "`triggers.params` must be an object".into(),
            ));
        }
    };
    Ok(Some(ScheduleRow {
        id: trigger_id(name),
        template_name: name.to_owned(),
        template_version: None,
        cron: cron.clone(),
        timezone,
        params,
        agent_id: agent_id.map(str::to_owned),
        enabled: true,
        missed: missed.as_str().to_owned(),
        origin: "trigger".into(),
        created_at: rfc3339(now_ms()),
        ..ScheduleRow::default()
    }))
}
