//! `opcode.query` of `test_cases`: runs at rest written as workflow test
//! cases (spec/testing.md, "Golden runs"), for `opcodec test` to replay.

use opcode_runtime::golden::{self, ExportError};
use opcode_runtime::store::{Listing, WorkflowStatus};
use opcode_vm::codes;
use serde_json::Value;

use super::args::Args;
use super::listing::{counted, workflow_filter};
use super::{Api, ToolError};

/// One page of test cases and how many runs match: the run
/// `filter.workflow_id`, or the runs at rest the other keys select.
pub async fn page(
    api: &Api,
    filter: &Args,
    limit: u32,
    offset: u32,
) -> Result<(Vec<Value>, usize), ToolError> {
    if let Some(id) = filter.opt_str("workflow_id")? {
        if let Some(other) = filter
            .keys()
            .find(|k| !matches!(*k, "workflow_id" | "limit" | "offset"))
        {
            return Err(ToolError::new(
                codes::R0122,
                format!("`filter.workflow_id` names one run: drop `filter.{other}`"),
            ));
        }
        let case = golden::export(api.store().as_ref(), id)
            .await
            .map_err(refusal)?;
        let page = if offset == 0 && limit > 0 {
            vec![case]
        } else {
            Vec::new()
        };
        return Ok((page, 1));
    }
    let mut runs = workflow_filter(filter, limit, offset)?;
    if let Some(busy) = runs.statuses.iter().find(|s| !golden::exportable(**s)) {
        return Err(ToolError::new(
            codes::R0122,
            format!(
                "a {} run is not at rest: test cases are made of runs that ended or rest suspended",
                busy.as_str()
            ),
        ));
    }
    if runs.statuses.is_empty() {
        // Every status a test case can be made of.
        runs.statuses = WorkflowStatus::ALL
            .into_iter()
            .filter(|s| golden::exportable(*s))
            .collect();
    }
    let rows = api.store().workflows(runs.clone()).await?;
    let total = counted(api, rows.len(), limit, offset, Listing::Workflows(runs)).await?;
    let mut cases = Vec::with_capacity(rows.len());
    for row in &rows {
        match golden::export(api.store().as_ref(), &row.id).await {
            Ok(case) => cases.push(case),
            // Pruned or moved on since it was listed: not a case any more.
            Err(ExportError::NotFound(_) | ExportError::NotAtRest(..)) => {}
            Err(e) => return Err(refusal(e)),
        }
    }
    Ok((cases, total))
}

/// An export's failure as the tool's error.
fn refusal(e: ExportError) -> ToolError {
    match e {
        ExportError::NotFound(_) => ToolError::new(codes::R0121, e.to_string()),
        ExportError::NotAtRest(..) => ToolError::new(codes::R0122, e.to_string()),
        ExportError::Store(e) => e.into(),
    }
}
