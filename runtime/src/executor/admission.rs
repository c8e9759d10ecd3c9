//! Admission by concurrency key (spec/flow-control.md, "Admission"): a run
//! that waits for a slot asks the store for one; when a holder ends, or
//! every few seconds for keys with waiting runs (a process may have died
//! between a run's end and the promotion), the store gives the free slots
//! to the waiting runs and, in the same transaction, leaves each its
//! admission in its inbox, read wherever it is loaded.

use std::sync::Arc;
use std::time::Duration;

use super::run::Msg;
use super::{ExecError, Inner};
use crate::store::{Admission, Admitted};
use crate::time::{now_ms, rfc3339};
use opcode_vm::effect::AdmitRequest;
use opcode_vm::event::Event;
use opcode_vm::policy::OnLimit;

/// `duration` in milliseconds.
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// How long to wait before asking the store again after it failed.
const RETRY: Duration = Duration::from_secs(2);

/// How often a run waiting for a slot asks again by itself.
const RECHECK: Duration = Duration::from_secs(30);

/// How often the keys with waiting runs are looked at.
pub(crate) const PROMOTE_EVERY: Duration = Duration::from_secs(2);

/// Asks the store for a slot for run `id` and tells the run once it holds
/// one or is refused (loading it again if it rested meanwhile); a run that
/// must wait is told later, through its inbox, by whoever promotes it.
/// With `cancel_running`, the oldest holder is cancelled. A run one of
/// whose ancestors holds a slot of the same key runs in that slot: it
/// would otherwise wait for a run that waits for it.
pub(crate) fn ask(inner: &Arc<Inner>, id: &str, request: Arc<AdmitRequest>) {
    let (inner, id) = (inner.clone(), id.to_owned());
    tokio::spawn(async move {
        if ancestor_holds(&inner, &id, &request.key).await {
            tell(&inner, &id, None).await;
            return;
        }
        let admission = Admission {
            key: request.key.clone(),
            workflow_id: id.clone(),
            limit: request.limit,
            turn: now_ms().saturating_add(
                u64::from(request.priority).saturating_mul(millis(inner.config.priority_aging)),
            ),
            wait: request.on_limit != OnLimit::RefuseNewest,
            at: rfc3339(now_ms()),
        };
        let mut first = true;
        loop {
            let refused = match admit(&inner, &admission).await {
                Admitted::Holds => None,
                Admitted::Refused { holders } => Some(format!("held by {}", holders.join(", "))),
                Admitted::Waits { position, holders } => {
                    if first {
                        tracing::debug!(workflow = %id, key = %request.key, position, "waiting for a concurrency slot");
                        if request.on_limit == OnLimit::CancelRunning
                            && let Some(oldest) = holders.first()
                        {
                            cancel_holder(&inner, oldest, &id, &request.key).await;
                        }
                    }
                    first = false;
                    // A backstop for a promotion that was lost: ask again
                    // while the run is loaded here (told meanwhile, it
                    // refuses the second answer).
                    tokio::time::sleep(RECHECK).await;
                    if !inner.runs().contains_key(&id) {
                        return;
                    }
                    continue;
                }
            };
            return tell(&inner, &id, refused).await;
        }
    });
}

/// The store's answer to `admission`, asked again until the store answers.
async fn admit(inner: &Arc<Inner>, admission: &Admission) -> Admitted {
    loop {
        match inner.store.admit(admission.clone()).await {
            Ok(answer) => return answer,
            Err(error) => {
                tracing::warn!(workflow = %admission.workflow_id, %error, "asking for a concurrency slot failed; retrying");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// Cancels `holder`, whose slot run `id` takes (`on_limit: cancel_running`).
async fn cancel_holder(inner: &Arc<Inner>, holder: &str, id: &str, key: &str) {
    let reason =
        format!("run `{id}` of concurrency key `{key}` takes its slot (on_limit: cancel_running)");
    if let Err(error) = inner.deliver(holder, Event::Cancel { reason }).await {
        tracing::debug!(workflow = %holder, %error, "holder not cancelled");
    }
}

/// Does an ancestor of run `id` hold a slot of `key`? (At most
/// `limits.run_depth` ancestors are read; a read that fails says no.)
async fn ancestor_holds(inner: &Arc<Inner>, id: &str, key: &str) -> bool {
    let mut at = id.to_owned();
    for _ in 0..inner.config.limits.run_depth {
        let Ok(Some(row)) = inner.store.workflow(&at).await else {
            return false;
        };
        let Some(parent) = row.parent_id else {
            return false;
        };
        if let Ok(Some(standing)) = inner.store.standing(&parent).await
            && standing.key == key
            && standing.admitted == Admitted::Holds
        {
            return true;
        }
        at = parent;
    }
    false
}

/// Gives the free slots of `key` to its waiting runs. The store tells
/// them in the same transaction (their inboxes); a run loaded here is
/// nudged to read its inbox at once, one loaded elsewhere is woken by the
/// store's notice or its owner's next poll, and one whose owner died reads
/// it when it is taken over.
pub(crate) async fn promote(inner: &Arc<Inner>, key: &str) {
    let admitted = match inner.store.promote(key).await {
        Ok(admitted) => admitted,
        Err(error) => {
            tracing::warn!(%key, %error, "giving concurrency slots failed; retrying later");
            return;
        }
    };
    for id in admitted {
        let loaded = inner.runs().get(&id).cloned();
        if let Some(run) = loaded {
            let _ = run.send(Msg::Inbox);
        }
    }
}

/// Tells run `id` it holds a slot, or was refused one (three tries). A run
/// told twice (asked again after a restart) refuses the second.
async fn tell(inner: &Arc<Inner>, id: &str, refused: Option<String>) {
    for _ in 0..3 {
        let event = Event::Admitted {
            refused: refused.clone(),
        };
        match inner.deliver(id, event).await {
            Ok(_) | Err(ExecError::Refused(_) | ExecError::Ended { .. }) => return,
            Err(error) => {
                tracing::warn!(workflow = %id, %error, "a run's admission was not told; retrying");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// [`promote`] in the background (a run that ended frees its slot).
pub(crate) fn promote_later(inner: &Arc<Inner>, key: &str) {
    let (inner, key) = (inner.clone(), key.to_owned());
    tokio::spawn(async move { promote(&inner, &key).await });
}

/// [`promote`] for every key runs wait on.
pub(crate) async fn promote_waiting(inner: &Arc<Inner>) {
    let Ok(keys) = inner.store.waiting().await else {
        return;
    };
    for (key, _) in keys {
        promote(inner, &key).await;
    }
}
