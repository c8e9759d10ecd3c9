//! `opcode.define`: compile a workflow and store it as the next version of
//! a template, or reject it with its diagnostics as data.

use opcode_compiler::diagnostics::render::json::to_json_array;
use opcode_vm::codes;
use serde_json::{Map, Value, json};

use super::args::Args;
use super::{Api, ToolError, ToolResult};
use crate::schedule::{Missed, Schedule};
use crate::store::{ScheduleRow, TemplateDraft};
use crate::time::{now_ms, rfc3339};

/// The file name diagnostics are reported against.
const FILE: &str = "opcode.define";

/// Handles `opcode.define`.
pub async fn define(api: &Api, args: &Args) -> ToolResult {
    let name = args.str("name")?;
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
    for key in ["input_schema", "output_schema", "triggers"] {
        if let Some(value) = args.get(key) {
            wrapper.insert(key.into(), value.clone());
        }
    }
    wrapper.insert("definition".into(), definition);
    let wrapper = Value::Object(wrapper);
    let text = serde_json::to_string_pretty(&wrapper).unwrap_or_default();
    let (program, diagnostics) = api.exec.compiler().compile(&text, FILE);
    let sorted = diagnostics.into_sorted();
    let rendered = to_json_array(&sorted, FILE, &text);
    let errors: Vec<Value> = rendered
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["severity"] == "error")
        .cloned()
        .collect();
    if program.is_none() || !errors.is_empty() {
        let count = errors.len();
        return Err(ToolError::new(
            codes::R0123,
            format!(
                "the workflow does not compile ({count} error{}); nothing was stored",
                if count == 1 { "" } else { "s" }
            ),
        )
        .with_details(json!({ "diagnostics": rendered })));
    }
    let trigger = trigger_of(args, name, agent_id)?;
    api.seen(agent_id).await?;
    let text_of = |key: &str| wrapper.get(key).map(Value::to_string);
    let row = api
        .store()
        .define_template(TemplateDraft {
            name: name.to_owned(),
            description: description.to_owned(),
            definition: text.clone(),
            input_schema: text_of("input_schema"),
            output_schema: text_of("output_schema"),
            triggers: text_of("triggers").unwrap_or_else(|| "{}".into()),
            agent_id: agent_id.map(str::to_owned),
            at: rfc3339(now_ms()),
        })
        .await?;
    let trigger_id = trigger_id(name);
    let schedule = if let Some(job) = trigger {
        let summary = json!({"id": job.id, "cron": job.cron, "timezone": job.timezone});
        api.store().save_schedule(job).await?;
        summary
    } else {
        api.store().delete_schedule(&trigger_id).await?;
        Value::Null
    };
    Ok(json!({
        "name": row.name,
        "schedule": schedule,
        "version": format!("v{}", row.version),
        "version_number": row.version,
        "warnings": rendered,
    }))
}

/// The `definition` argument: an object, or JSON text of one.
fn definition_of(args: &Args) -> Result<Value, ToolError> {
    match args.get("definition") {
        Some(Value::Object(map)) => Ok(Value::Object(map.clone())),
        Some(Value::String(text)) => serde_json::from_str::<Value>(text)
            .ok()
            .filter(Value::is_object)
            .ok_or_else(|| {
                ToolError::new(
                    codes::R0122,
                    "`definition` must be a workflow object (or JSON text of one)",
                )
            }),
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
