//! What the tools say of a run retention pruned (spec/store.md,
//! "Retention"): naming it answers R0133 with its tombstone, not "not
//! found", and `opcode.query` lists tombstones as the resource `pruned`.

use opcode_vm::codes;
use serde_json::{Value, json};

use super::{Api, ToolError};
use opcode_runtime::store::{PrunedFilter, PrunedRow};

/// A pruned run as the tools show it.
pub fn pruned_json(row: &PrunedRow) -> Value {
    json!({
        "workflow_id": row.id,
        "name": row.name,
        "template_name": row.template_name,
        "template_version": row.template_version,
        "status": row.status.as_str(),
        "agent_id": row.agent_id,
        "parent_workflow_id": row.parent_workflow_id,
        "created_at": row.created_at,
        "completed_at": row.completed_at,
        "pruned_at": row.pruned_at,
        "export": row.export,
    })
}

impl Api {
    /// Why run `id` cannot be read: pruned (R0133, with its tombstone),
    /// or never there (R0121).
    pub async fn unknown_run(&self, id: &str) -> ToolError {
        let filter = PrunedFilter {
            id: Some(id.to_owned()),
            limit: Some(1),
            ..PrunedFilter::default()
        };
        match self.store().pruned(filter).await {
            Ok(rows) if !rows.is_empty() => {
                ToolError::new(codes::R0133, rows[0].describe()).with_details(pruned_json(&rows[0]))
            }
            Ok(_) => ToolError::new(codes::R0121, format!("workflow `{id}` not found")),
            Err(e) => e.into(),
        }
    }
}
