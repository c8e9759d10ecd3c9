//! Rate limits at the call (spec/flow-control.md, "Rate limits"): before a
//! rate-limited step's call is made, the store counts it in its key's
//! window; a full window answers R0136 with the window's end, and the VM
//! starts the same attempt again then, by a durable timer.

use opcode_stdlib::exec::{Actions, Call};
use opcode_vm::codes;
use opcode_vm::effect::Rate;
use opcode_vm::error::ActionError;
use serde_json::json;

use crate::store::{EventStore, RateCall};
use crate::time::now_ms;

/// Counts `call` in its window: `Ok` to make it now, or the R0136 that
/// says until when it waits (a store that fails: a retryable R0100).
pub async fn admit(
    store: &dyn EventStore,
    actions: &Actions,
    rate: &Rate,
    call: &Call,
) -> Result<(), ActionError> {
    let key = if let Some(key) = &rate.key {
        key.clone()
    } else {
        let target = actions.target(&call.action, &call.params);
        format!("host:{}", target.unwrap_or_else(|| call.action.clone()))
    };
    let asked = RateCall {
        key: key.clone(),
        limit: rate.limit,
        per_ms: rate.per_ms,
        now_ms: now_ms(),
    };
    match store.take_call(asked).await {
        Ok(None) => Ok(()),
        Ok(Some(until_ms)) => Err(ActionError::new(
            codes::R0136,
            "THROTTLED",
            format!(
                "rate limit `{key}` ({} calls a {} ms window) is full; the call waits for the next window",
                rate.limit, rate.per_ms
            ),
            false,
        )
        .with_details(json!({"key": key, "until_ms": until_ms, "limit": rate.limit, "per_ms": rate.per_ms}))),
        Err(error) => Err(ActionError::execution(format!(
            "counting the call in its rate limit `{key}` failed: {error}"
        ))),
    }
}
