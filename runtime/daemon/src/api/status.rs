//! `opcode.status`: a workflow's run view (spec/mcp.md): status, output,
//! error and pending decisions; steps, events and inputs when asked.

use super::args::Args;
use super::view::{Asked, render};
use super::{Api, ToolResult};

/// Handles `opcode.status`.
pub async fn status(api: &Api, args: &Args) -> ToolResult {
    let id = args.str("workflow_id")?;
    let asked = Asked::from_args(args, api.inline_limit)?;
    render(api, id, None, &asked).await
}
