//! Rate limits at the call (spec/flow-control.md, "Rate limits"): once a
//! rate-limited step's call holds its worker slot, with nothing left to
//! wait for, the store counts it in its key's window and it is made at
//! once; a full window answers R0136 with the window's end, and the VM
//! starts the same attempt again then, by a durable timer.

use opcode_stdlib::exec::{Actions, Call};
use opcode_vm::codes;
use opcode_vm::effect::Rate;
use opcode_vm::error::ActionError;
use serde_json::json;

use crate::store::{EventStore, RateCall, Rated};
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
    };
    match store.take_call(asked).await {
        Ok(Rated::Counted { .. }) => Ok(()),
        // The window's end by this process's clock: the store's clock (the
        // database's) need not agree with it, the time left does.
        Ok(Rated::Full { wait_ms, .. }) => Err(ActionError::new(
            codes::R0136,
            "THROTTLED",
            format!(
                "rate limit `{key}` ({} calls a {} ms window) is full; the call waits for the next window",
                rate.limit, rate.per_ms
            ),
            false,
        )
        .with_details(json!({"key": key, "until_ms": now_ms() + wait_ms, "limit": rate.limit, "per_ms": rate.per_ms}))),
        Err(error) => Err(ActionError::execution(format!(
            "counting the call in its rate limit `{key}` failed: {error}"
        ))),
    }
}
