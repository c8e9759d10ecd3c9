//! `opcode.diagram`: a template's or a workflow's structure as ASCII or
//! Mermaid text, or an SVG or PNG image, with step status drawn over a
//! workflow's. Images come back as `{format, mime_type, image}` (base64),
//! which the MCP layer sends as image content.

use opcode_compiler::diagram::{self, Statuses};
use opcode_vm::codes;
use serde_json::json;

use super::args::Args;
use super::{Api, ToolError, ToolResult};

/// Steps a drawn (svg, png) diagram may have: past it a picture is too
/// large to read, and to draw in bounded memory and time.
pub const MAX_IMAGE_STEPS: usize = 2_000;
/// Steps a text (ascii, mermaid) diagram may have.
pub const MAX_TEXT_STEPS: usize = 20_000;

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
    let compiler = api.exec.compiler();
    let format = format.to_owned();
    // Compiling and drawing take a while for a large workflow: off the
    // threads that answer requests.
    tokio::task::spawn_blocking(move || {
        let (program, _) = compiler.compile(&source, "workflow.json");
        let program = program
            .ok_or_else(|| ToolError::new(codes::R0109, "the workflow no longer compiles"))?;
        draw(&format, &program, statuses.as_ref())
    })
    .await
    .map_err(|e| ToolError::new(codes::R0100, format!("drawing the diagram failed: {e}")))?
}

/// `program` drawn as `format`, if it is small enough to draw.
fn draw(format: &str, program: &opcode_vm::Program, statuses: Option<&Statuses>) -> ToolResult {
    let steps = program.steps.len();
    let most = if matches!(format, "svg" | "png") {
        MAX_IMAGE_STEPS
    } else {
        MAX_TEXT_STEPS
    };
    if steps > most {
        let message = format!(
            "the workflow has {steps} steps; a {format} diagram draws at most {most}{}",
            if most == MAX_IMAGE_STEPS {
                " (ask for mermaid or ascii)"
            } else {
                ""
            }
        );
        return Err(ToolError::new(codes::R0130, message)
            .with_details(json!({"limit": "diagram_steps", "value": steps, "max": most})));
    }
    let text = match format {
        "ascii" => diagram::ascii(program, statuses),
        "mermaid" => diagram::mermaid(program, statuses),
        _ => return image(format, &diagram::svg::svg(program, statuses)),
    };
    Ok(json!({ "format": format, "diagram": text }))
}

/// An SVG drawing as an SVG or PNG image.
fn image(format: &str, svg: &str) -> ToolResult {
    use base64::Engine;

    let (mime, bytes) = if format == "png" {
        let png = diagram::png::png(svg, system_fonts(), 2.0).map_err(|e| {
            let code = match e {
                diagram::png::PngError::TooLarge { .. } => codes::R0130,
                diagram::png::PngError::Failed(_) => codes::R0109,
            };
            ToolError::new(code, format!("cannot draw the PNG: {e}"))
        })?;
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
