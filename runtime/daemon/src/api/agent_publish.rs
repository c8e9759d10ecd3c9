//! `opcode.define` with `agent`: publish an agent definition as a release
//! of the registry over MCP (spec/registry.md, "Over MCP"), refused with
//! its diagnostics (pointers under `/agent`) when it is not valid.

use opcode_compiler::agent::{AgentDefinition, SkillSource};
use opcode_compiler::diagnostics::codes::E0064;
use opcode_compiler::diagnostics::render::json::to_json_array;
use opcode_compiler::diagnostics::{Diagnostic, Diagnostics};
use opcode_runtime::registry::{self, Failure};
use opcode_runtime::store::Published;
use opcode_runtime::time::{now_ms, rfc3339};
use opcode_vm::codes;
use serde_json::{Value, json};

use super::args::Args;
use super::{Api, ToolError, ToolResult};

/// The file name diagnostics are reported against.
const FILE: &str = "agent.json";

/// Publishes the definition in `agent` (an object, or its JSON text).
pub async fn publish(api: &Api, args: &Args, agent: &Value) -> ToolResult {
    let (text, as_text) = match agent {
        Value::String(text) => (text.clone(), true),
        Value::Object(_) => (
            serde_json::to_string_pretty(agent).unwrap_or_default(),
            false,
        ),
        _ => {
            return Err(ToolError::new(
                codes::R0122,
                "`agent` is an agent definition: an object, or its JSON text (spec/registry.md)",
            ));
        }
    };
    let (definition, mut diagnostics) = opcode_compiler::agent::read(&text);
    if let Some(definition) = &definition {
        no_paths(definition, &mut diagnostics);
    }
    let definition = match definition {
        Some(definition) if !diagnostics.has_errors() => definition,
        _ => return Err(refused(&diagnostics, &text, as_text)),
    };
    if let Some(name) = args.opt_str("name")?
        && name != definition.name
    {
        return Err(ToolError::new(
            codes::R0122,
            format!(
                "`name` is `{name}`, and the agent's is `{}`: give one, or the same",
                definition.name
            ),
        ));
    }
    let allowed = api.exec.agents().mcp_allowed.clone();
    if let Some(first) = registry::refused_servers(&definition, allowed.as_deref())
        .into_iter()
        .next()
    {
        return Err(
            ToolError::new(first.code, first.message).with_details(json!({"help": first.help}))
        );
    }
    // Every skill gives its content: `no_paths` refused the others.
    let texts: Vec<String> = definition
        .skills
        .iter()
        .filter_map(|skill| match &skill.source {
            SkillSource::Content(text) => Some(text.clone()),
            SkillSource::Path(_) => None,
        })
        .collect();
    let by = args.opt_str("agent_id")?.map(str::to_owned);
    let (release, skills) = registry::release_of(&definition, &texts, rfc3339(now_ms()), by);
    let (name, version, digest) = (
        release.name.clone(),
        release.version.clone(),
        release.digest.clone(),
    );
    let unchanged = match registry::publish(api.store().as_ref(), release, skills).await {
        Ok(Published::Added) => false,
        Ok(Published::Unchanged) => true,
        Err(Failure::Refused(e)) => {
            return Err(ToolError::new(e.code, e.message).with_details(json!({"help": e.help})));
        }
        Err(Failure::Store(e)) => return Err(e.into()),
    };
    Ok(json!({
        "name": name,
        "version": version,
        "kind": "agent",
        "digest": digest,
        "unchanged": unchanged,
        "uri": format!("opcode://agents/{}/{}", name, version),
    }))
}

/// Over MCP a skill gives its text: the daemon reads no file a caller names.
fn no_paths(definition: &AgentDefinition, sink: &mut Diagnostics) {
    for (i, skill) in definition.skills.iter().enumerate() {
        if let SkillSource::Path(path) = &skill.source {
            sink.push(
                Diagnostic::error(
                    E0064,
                    skill.span,
                    format!("skill `{}` names the file `{path}`: over MCP a skill gives its `content`", skill.name),
                )
                .with_help("the daemon reads no file a caller names; send the file's text as `content`, or publish with `opcode agent publish`")
                .with_pointer(format!("/skills/{i}/path")),
            );
        }
    }
}

/// R0123 with the diagnostics, their pointers and patches under `/agent`;
/// text edits kept only for a definition sent as text (they are offsets
/// in it).
fn refused(diagnostics: &Diagnostics, text: &str, as_text: bool) -> ToolError {
    let sorted = diagnostics.clone().into_sorted();
    let mut rendered = to_json_array(&sorted, FILE, text);
    for diagnostic in rendered.as_array_mut().into_iter().flatten() {
        under_agent(diagnostic, "pointer");
        if let Some(fix) = diagnostic.get_mut("fix") {
            for op in fix["patch"].as_array_mut().into_iter().flatten() {
                under_agent(op, "path");
                under_agent(op, "from");
            }
            if !as_text && let Some(fix) = fix.as_object_mut() {
                fix.remove("edits");
            }
        }
    }
    let errors = sorted.iter().filter(|d| d.is_error()).count();
    ToolError::new(
        codes::R0123,
        format!("the agent definition has {errors} error(s); nothing was published"),
    )
    .with_details(json!({"diagnostics": rendered}))
}

fn under_agent(value: &mut Value, key: &str) {
    if let Some(pointer) = value.get(key).and_then(Value::as_str) {
        value[key] = format!("/agent{pointer}").into();
    }
}
