//! Re-running a failed run from its failed step: a new run of the same
//! definition and inputs whose steps that completed before complete at
//! once with the outputs they gave (as the log kept them: secret values
//! redacted), so only the failed step and what follows it run again.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use crate::executor::StartRequest;
use crate::store::{EventStore, StepStatus, StoreError, WorkflowStatus};

/// The start of a run that re-runs failed run `id` from its failed step,
/// or why it cannot be (not found, not failed, its source gone).
pub async fn from_failure(
    store: &dyn EventStore,
    id: &str,
) -> Result<Result<StartRequest, String>, StoreError> {
    let Some(row) = store.workflow(id).await? else {
        return Ok(Err(format!("workflow `{id}` not found")));
    };
    if row.status != WorkflowStatus::Failed {
        return Ok(Err(format!(
            "workflow `{id}` is {}: only a failed run is re-run from its failed step",
            row.status.as_str()
        )));
    }
    let Some(source) = store.source(&row.source_hash).await? else {
        return Ok(Err(format!("the source of workflow `{id}` is missing")));
    };
    let mut kept = BTreeMap::new();
    for step in store.steps(id).await? {
        if step.status != StepStatus::Completed {
            continue;
        }
        let output = match step.output.as_deref() {
            Some(text) => serde_json::from_str(text).unwrap_or(Value::Null),
            None => Value::Null,
        };
        let output =
            crate::store::blobs::resolve(output, |hash| async move { store.blob(&hash).await })
                .await?;
        kept.insert(step.step_id, output);
    }
    Ok(Ok(StartRequest {
        definition: source.definition,
        inputs: serde_json::from_str(&row.inputs)
            .unwrap_or_else(|_| Value::Object(serde_json::Map::new())),
        agent_id: row.agent_id,
        template_name: row.template_name,
        template_version: row.template_version,
        base_dir: row.base_dir.map(PathBuf::from),
        rerun: Some((id.to_owned(), kept)),
        ..StartRequest::default()
    }))
}
