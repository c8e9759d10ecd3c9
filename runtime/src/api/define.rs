//! `opcode.define`: compile a workflow and store it as the next version of
//! a template, or reject it with its diagnostics as data.

use opcode_compiler::diagnostics::render::json::to_json_array;
use opcode_vm::codes;
use serde_json::{Map, Value, json};

use super::args::Args;
use super::{Api, ToolError, ToolResult};
use crate::store::TemplateDraft;
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
    Ok(json!({
        "name": row.name,
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
