//! A debounced run before it starts (spec/flow-control.md, "Debounce"):
//! its id is announced at its burst's first delivery, and from then on
//! `opcode.status` answers it as `pending` (when it starts, how many
//! deliveries it gathered) and a cancel cancels it: the run is made at
//! once, cancelled in its first round (no step runs), and its burst is
//! forgotten, so the scheduler never starts it and a later delivery opens
//! a new burst with a new id.

use opcode_runtime::ExecError;
use opcode_runtime::store::{EventStore, PendingStart, StoreError};
use opcode_runtime::time::rfc3339;
use opcode_vm::codes;
use opcode_vm::event::Event;
use serde_json::{Value, json};

use super::{Api, ToolError};

/// The pending start whose run is `id`, if `id` names one (a burst's run
/// id is made from its template, key and first delivery; the open bursts
/// are few, one a key, and read only for an id no run has yet).
pub async fn pending(store: &dyn EventStore, id: &str) -> Result<Option<PendingStart>, ToolError> {
    if !id.starts_with("debounce-") {
        return Ok(None);
    }
    // Every pending start: those due by the end of time.
    let open = store.due_starts(i64::MAX as u64, u32::MAX).await?;
    Ok(open
        .into_iter()
        .find(|p| super::debounce::run_id(&p.template, &p.key, p.first_ms) == id))
}

/// `opcode.status` of a debounced run not started yet.
pub fn view(id: &str, start: &PendingStart) -> Value {
    json!({
        "workflow_id": id,
        "status": "pending",
        "template_name": start.template,
        "debounced": {
            "key": start.key,
            "starts_at": rfc3339(start.due_ms),
            "deliveries": start.deliveries,
        },
    })
}

/// Cancels the debounced run `id` of `start` before it started: made
/// cancelled, then its burst forgotten (a crash between the two leaves a
/// cancelled run the scheduler finds made, and forgets). Started meanwhile
/// by a scheduler, it is cancelled as any run is.
pub async fn cancel(
    api: &Api,
    id: &str,
    start: &PendingStart,
    reason: &str,
) -> Result<(), ToolError> {
    let Some(template) = api.store().template(&start.template, None).await? else {
        // The scheduler would drop it too.
        api.store().forget_start(start).await?;
        return Err(ToolError::new(
            codes::R0121,
            format!(
                "template `{}` is no longer defined: its debounced run `{id}` will not start",
                start.template
            ),
        ));
    };
    let params: Value = serde_json::from_str(&start.inputs).unwrap_or(Value::Null);
    let mut request =
        super::run::template_request(&api.exec, &template, &params, None, Some(id.to_owned()))?;
    request.cancelled = Some(reason.to_owned());
    match api.exec.start(request).await {
        Ok(_) => {}
        Err(ExecError::Store(StoreError::Exists(_))) => {
            let cancel = Event::Cancel {
                reason: reason.to_owned(),
            };
            match api.exec.deliver(id, cancel).await {
                Ok(_) | Err(ExecError::Ended { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Err(e) => return Err(e.into()),
    }
    api.store().forget_start(start).await?;
    Ok(())
}
