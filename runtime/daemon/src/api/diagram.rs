//! `opcode.diagram`: a template's or a workflow's structure as ASCII or
//! Mermaid text, or an SVG or PNG image, with step status drawn over a
//! workflow's. Images come back as `{format, mime_type, image}` (base64),
//! which the MCP layer sends as image content.

use opcode_compiler::diagram::{self, Statuses};
use opcode_vm::codes;
use serde_json::json;

use super::args::Args;
use super::{Api, ToolError, ToolResult};

/// Handles `opcode.diagram`.
pub async fn diagram(api: &Api, args: &Args) -> ToolResult {
    // opcode's `image` is a PNG.
    let format = match args.opt_str("format")?.unwrap_or("mermaid") {
        "image" => "png",
        other => other,
    };
    if !matches!(format, "ascii" | "mermaid" | "svg" | "png") {
        return Err(ToolError::new(
            codes::R0122,
            format!("unknown format `{format}`: use ascii, mermaid, svg, png or image"),
        ));
    }
    let include_status = args.opt_bool("include_status")?.unwrap_or(true);
    let (source, statuses) = if let Some(id) = args.opt_str("workflow_id")? {
        let Some(row) = api.store().workflow(id).await? else {
            return Err(api.unknown_run(id).await);
        };
        let source = api.store().source(&row.source_hash).await?.ok_or_else(|| {
            ToolError::new(codes::R0109, format!("the source of `{id}` is missing"))
        })?;
        let statuses = if include_status {
            Some(step_statuses(api, id).await?)
        } else {
            None
        };
        (source.definition, statuses)
    } else {
        if args.opt_str("template_name")?.is_none() {
            return Err(ToolError::new(
                codes::R0122,
                "give `template_name` or `workflow_id`",
            ));
        }
        let template = super::run::template(api, args, "template_name").await?;
        (template.definition, None)
    };
    let (program, _) = api.exec.compiler().compile(&source, "workflow.json");
    let program =
        program.ok_or_else(|| ToolError::new(codes::R0109, "the workflow no longer compiles"))?;
    let text = match format {
        "ascii" => diagram::ascii(&program, statuses.as_ref()),
        "mermaid" => diagram::mermaid(&program, statuses.as_ref()),
        _ => return image(format, &diagram::svg::svg(&program, statuses.as_ref())),
    };
    Ok(json!({ "format": format, "diagram": text }))
}

/// An SVG drawing as an SVG or PNG image.
fn image(format: &str, svg: &str) -> ToolResult {
    use base64::Engine;

    let (mime, bytes) = if format == "png" {
        let png = diagram::png::png(svg, system_fonts(), 2.0)
            .map_err(|e| ToolError::new(codes::R0109, format!("cannot draw the PNG: {e}")))?;
        ("image/png", png)
    } else {
        ("image/svg+xml", svg.as_bytes().to_vec())
    };
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok(json!({ "format": format, "mime_type": mime, "bytes": bytes.len(), "image": data }))
}

/// The system's fonts, loaded once.
fn system_fonts() -> resvg::usvg::fontdb::Database {
    static FONTS: std::sync::OnceLock<resvg::usvg::fontdb::Database> = std::sync::OnceLock::new();
    FONTS
        .get_or_init(|| {
            let mut db = resvg::usvg::fontdb::Database::new();
            db.load_system_fonts();
            db
        })
        .clone()
}

/// Each step's status; a step that ran several times (in a loop) shows
/// its latest instance's.
async fn step_statuses(api: &Api, id: &str) -> Result<Statuses, ToolError> {
    let mut steps = api.store().steps(id).await?;
    steps.sort_by(|a, b| a.started_at.cmp(&b.started_at));
    let mut statuses = Statuses::new();
    for step in steps {
        let base = step_of_instance(&step.step_id);
        statuses.insert(base.to_owned(), step.status.as_str().to_owned());
    }
    Ok(statuses)
}

/// `outer[1]/inner[0]` → `inner`.
fn step_of_instance(name: &str) -> &str {
    let last = name.rsplit('/').next().unwrap_or(name);
    last.split('[').next().unwrap_or(last)
}

#[cfg(test)]
mod tests {
    #[test]
    fn instances_map_to_their_step() {
        assert_eq!(super::step_of_instance("outer[1]/inner[0]"), "inner");
        assert_eq!(super::step_of_instance("plain"), "plain");
    }
}
