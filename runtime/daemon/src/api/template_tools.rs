//! Workflows as tools (spec/mcp.md): a template defined with `expose:
//! true` is listed as an MCP tool of its own, named as the template, its
//! `input_schema` the tool's, and a call runs it as `opcode.run` would.

use opcode_runtime::store::{TemplateFilter, TemplateRow};
use opcode_vm::codes;
use serde_json::{Value, json};

use super::schemas::{Hints, ToolSpec, tool};
use super::{Api, ToolError, ToolResult, outputs};

/// Was `row` defined with `expose: true`?
pub fn exposed(row: &TemplateRow) -> bool {
    super::templates::Head::of(row).expose
}

/// An exposed template's name must not pass for one of the six tools.
pub fn check_name(name: &str) -> Result<(), ToolError> {
    if tool(name).is_some() || name.starts_with("opcode.") {
        return Err(ToolError::new(
            codes::R0122,
            format!(
                "`{name}` cannot be exposed as a tool: names starting with `opcode.` are the daemon's own; rename the template"
            ),
        ));
    }
    Ok(())
}

/// The tool an exposed template version is.
fn spec_of(row: &TemplateRow) -> ToolSpec {
    let parse = |text: Option<&str>| text.and_then(|t| serde_json::from_str::<Value>(t).ok());
    let input_schema = parse(row.input_schema.as_deref())
        .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    let mut output_schema = outputs::run_view();
    if let Some(output) = parse(row.output_schema.as_deref()) {
        output_schema["properties"]["output"] = output;
    }
    let description = if row.description.is_empty() {
        format!(
            "Runs the workflow `{}` (v{}); answers its status and output, or the decision it waits for.",
            row.name, row.version
        )
    } else {
        row.description.clone()
    };
    ToolSpec {
        name: row.name.clone(),
        description,
        input_schema,
        output_schema,
        // A workflow's actions may change anything.
        hints: Hints {
            destructive: true,
            open_world: true,
            ..Hints::default()
        },
    }
}

impl Api {
    /// The tools of the exposed templates (their newest versions).
    pub async fn template_tools(&self) -> Result<Vec<ToolSpec>, ToolError> {
        let latest = TemplateFilter {
            latest_only: true,
            ..TemplateFilter::default()
        };
        let rows = self.store().templates(latest).await?;
        Ok(rows.iter().filter(|r| exposed(r)).map(spec_of).collect())
    }

    /// Is `name` an exposed template's tool?
    pub async fn is_template_tool(&self, name: &str) -> Result<bool, ToolError> {
        if tool(name).is_some() {
            return Ok(false);
        }
        Ok(self
            .store()
            .template(name, None)
            .await?
            .is_some_and(|r| exposed(&r)))
    }

    /// Runs the exposed template `name` with `params` (its version pinned
    /// or the newest), answering as `opcode.run` does (`wait: false`: at
    /// once, with the run's id).
    pub async fn call_template(
        &self,
        name: &str,
        params: Value,
        version: Option<i64>,
        wait: bool,
    ) -> ToolResult {
        let mut args = json!({"template_name": name, "params": params, "wait": wait});
        if let Some(version) = version {
            args["version"] = json!(version);
        }
        self.call("opcode.run", args).await
    }
}
