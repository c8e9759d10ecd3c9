//! `opcode.status`: a workflow's run view (spec/mcp.md): status, output,
//! error and pending decisions; steps, events and inputs when asked.

use opcode_vm::codes;

use super::args::Args;
use super::view::{Asked, render};
use super::{Api, ToolResult};

/// Handles `opcode.status`: a debounced run not started yet is `pending`.
pub async fn status(api: &Api, args: &Args) -> ToolResult {
    let id = args.str("workflow_id")?;
    let asked = Asked::from_args(args, api.inline_limit)?;
    match render(api, id, None, &asked).await {
        Err(unknown) if unknown.code == codes::R0121 => {
            match super::pending::pending(api.store().as_ref(), id).await? {
                Some(start) => Ok(super::pending::view(id, &start)),
                None => Err(unknown),
            }
        }
        answer => answer,
    }
}
