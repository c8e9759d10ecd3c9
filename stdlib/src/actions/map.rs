//! `workflow.map`: one child workflow per list item, a bounded number at a
//! time, outputs in item order.

use futures::StreamExt;
use opcode_vm::error::ActionError;
use serde_json::{Map, Value, json};

use opcode_vm::effect::SecretSite;
use opcode_vm::program::PathSeg;

use crate::call::{BoxFuture, Call, Child, Services, sites_under};

/// A child's position and its result.
type Finished = (usize, Result<Value, ActionError>);

/// Children running at once when the call does not say.
const DEFAULT_CONCURRENCY: usize = 8;

/// Runs `workflow.map`, with at most `max_items` children.
pub async fn run<'a>(
    call: &'a Call,
    services: &'a dyn Services,
    max_items: u64,
) -> Result<Value, ActionError> {
    let template = call.required("template_name")?;
    let Some(Value::Array(items)) = call.params.get("items") else {
        return Err(ActionError::validation("`items` must be a list"));
    };
    if items.len() as u64 > max_items {
        return Err(opcode_vm::limits::exceeded(
            "map_items",
            items.len() as u64,
            max_items,
            format!(
                "`items` has {} entries; workflow.map runs at most {max_items} children (limits.map_items)",
                items.len()
            ),
        ));
    }
    let limit = match call.params.get("max_concurrency") {
        None | Some(Value::Null) => DEFAULT_CONCURRENCY,
        Some(v) => v
            .as_u64()
            .filter(|n| *n >= 1)
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
            .ok_or_else(|| ActionError::validation("`max_concurrency` must be at least 1"))?,
    };
    let fail_fast = match call.str("on_failure").unwrap_or("fail_fast") {
        "fail_fast" => true,
        "collect" => false,
        other => {
            return Err(ActionError::validation(format!(
                "`on_failure` must be fail_fast or collect, not `{other}`"
            )));
        }
    };
    let common = match call.params.get("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(_) => return Err(ActionError::validation("`params` must be an object")),
    };
    let item_param = call.str("item_param").unwrap_or("item");
    let index_param = call.str("index_param");
    let shared = sites_under(&call.passed, &[PathSeg::Key("params".into())]);
    let inputs: Vec<(Value, Vec<SecretSite>)> = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let mut params = common.clone();
            params.insert(item_param.to_owned(), item.clone());
            if let Some(name) = index_param {
                params.insert(name.to_owned(), json!(i));
            }
            // The item's secrets become the item input's.
            let mut secrets: Vec<SecretSite> = shared
                .iter()
                .filter(|s| !matches!(s.path.first(), Some(PathSeg::Key(k)) if k == item_param))
                .cloned()
                .collect();
            let item_path = [PathSeg::Key("items".into()), PathSeg::Index(i as u64)];
            for mut site in sites_under(&call.passed, &item_path) {
                site.path.insert(0, PathSeg::Key(item_param.to_owned()));
                secrets.push(site);
            }
            (Value::Object(params), secrets)
        })
        .collect();
    let version = call.str("version");
    let start =
        |(index, (params, secrets)): (usize, (Value, Vec<SecretSite>))| -> BoxFuture<'a, Finished> {
            Box::pin(async move {
                let child = Child {
                    template,
                    version,
                    params: &params,
                    secrets: &secrets,
                    index: Some(index),
                };
                (index, services.run_child(call, child).await)
            })
        };
    let mut running = futures::stream::iter(inputs.into_iter().enumerate())
        .map(start)
        .buffered(limit);
    let mut children = Vec::with_capacity(items.len());
    while let Some((index, result)) = running.next().await {
        match result {
            Ok(done) => children.push(done),
            Err(error) if fail_fast => {
                drop(running);
                cancel_after(call, services, index, items.len()).await;
                let cause = serde_json::to_value(&error).unwrap_or(Value::Null);
                return Err(ActionError {
                    message: format!("child {index} of `{template}` failed: {}", error.message),
                    retryable: false,
                    details: Some(json!({"index": index, "error": cause})),
                    ..error
                });
            }
            Err(error) => {
                let detail = |key: &str| error.details.as_ref().and_then(|d| d.get(key)).cloned();
                children.push(json!({
                    "workflow_id": detail("workflow_id"),
                    "status": detail("status").unwrap_or_else(|| json!("failed")),
                    "output": null,
                    "error": serde_json::to_value(&error).unwrap_or(Value::Null),
                }));
            }
        }
    }
    let failed = children
        .iter()
        .filter(|c| c["status"] != "completed")
        .count();
    Ok(json!({
        "outputs": children.iter().map(|c| c["output"].clone()).collect::<Vec<_>>(),
        "completed": children.len() - failed,
        "failed": failed,
        "children": children,
    }))
}

/// Cancels the children after a failed one: those running, and any the
/// stream had not yet started (cancelling an unknown run is harmless).
async fn cancel_after(call: &Call, services: &dyn Services, failed: usize, count: usize) {
    for index in (0..count).filter(|i| *i != failed) {
        services.cancel_child(call, index).await;
    }
}
