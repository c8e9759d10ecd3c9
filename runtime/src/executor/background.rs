//! The background loop: renews this process's leases, hands inbox messages
//! to loaded runs, loads again the runs a refused write unloaded, (when
//! adopting) loads workflows whose timers are due or whose inbox has mail,
//! and (when taking over) runs whose owner died. A shared store's notices
//! wake it at once, and commits other processes made are announced here.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use tokio::sync::broadcast;

use super::run::Msg;
use super::{Appended, Change, ExecError, Inner, writes};
use crate::owner;
use crate::store::{Commit, Notice, StoreError, WorkflowStatus};
use crate::time::{now_ms, parse_ms};

/// A workflow that failed to load is not tried again for this long.
const BACKOFF: Duration = Duration::from_secs(30);

/// The running loop; dropping it stops the loop.
#[derive(Debug)]
pub struct Background {
    handle: JoinHandle<()>,
}

impl Drop for Background {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

impl Background {
    /// Spawns the loop.
    pub(crate) fn spawn(inner: Arc<Inner>) -> Background {
        Background {
            handle: tokio::spawn(serve(inner)),
        }
    }
}

/// At most this many orphans are taken over per poll, so that the other
/// processes get their share.
const TAKE_OVER_AT_ONCE: u32 = 16;

async fn serve(inner: Arc<Inner>) {
    let renew_every = inner.config.lease_ttl / 3;
    let mut renewed = Instant::now();
    // When the store was last looked at for work (mail, timers, orphans).
    let mut looked = Instant::now();
    let mut failed: HashMap<String, Instant> = HashMap::new();
    // When the keys with runs waiting for a slot were last looked at.
    let mut promoted = Instant::now();
    let mut notices = inner.store.notices();
    // The earliest timer due, so that a run waiting for it is loaded on
    // time rather than at the next poll (the first pass is at once).
    let mut next_due: Option<u64> = Some(0);
    loop {
        let nap = next_due.map_or(inner.config.poll, |due| {
            inner
                .config
                .poll
                .min(Duration::from_millis(due.saturating_sub(now_ms())))
        });
        let look = tokio::select! {
            () = tokio::time::sleep(nap) => true,
            () = inner.wake.notified() => true,
            notice = next_notice(notices.as_mut()) => {
                // A burst of notices is heard at once, and makes one pass.
                let mut look = inner.heard(notice);
                while let Some(notice) = queued_notice(notices.as_mut()) {
                    look |= inner.heard(notice);
                }
                look
            }
        };
        if renewed.elapsed() >= renew_every {
            // A failed renewal is tried again at the next poll.
            if renew(&inner, renewed.elapsed()).await {
                renewed = Instant::now();
            }
        }
        if !look && looked.elapsed() < inner.config.poll {
            continue;
        }
        looked = Instant::now();
        reload_stranded(&inner).await;
        if inner.config.adopt && promoted.elapsed() >= super::admission::PROMOTE_EVERY {
            promoted = Instant::now();
            super::admission::promote_waiting(&inner).await;
        }
        failed.retain(|_, at| at.elapsed() < BACKOFF);
        let mut wanted: BTreeSet<String> = BTreeSet::new();
        let mut mail: HashMap<String, Vec<i64>> = HashMap::new();
        if let Ok(messages) = inner.store.inbox(None).await {
            for message in messages {
                let sender = inner.runs().get(&message.workflow_id).cloned();
                match sender {
                    Some(tx) => {
                        let _ = tx.send(Msg::Inbox);
                    }
                    None if inner.config.adopt => {
                        mail.entry(message.workflow_id.clone())
                            .or_default()
                            .push(message.id);
                        wanted.insert(message.workflow_id);
                    }
                    None => {}
                }
            }
        }
        if inner.config.adopt
            && let Ok(timers) = inner.store.next_timers(64).await
        {
            let now = now_ms();
            next_due = None;
            for (id, due) in timers {
                match parse_ms(&due) {
                    Some(due) if due <= now => {
                        wanted.insert(id);
                    }
                    Some(due) => next_due = Some(next_due.map_or(due, |n| n.min(due))),
                    None => {}
                }
            }
        }
        if inner.config.take_over
            && let Ok(orphans) = inner.store.orphans(TAKE_OVER_AT_ONCE).await
        {
            for id in orphans {
                if !failed.contains_key(&id) && !inner.runs().contains_key(&id) {
                    take_over(&inner, &id, &mut failed).await;
                }
            }
        }
        for id in wanted {
            if failed.contains_key(&id) || inner.runs().contains_key(&id) {
                continue;
            }
            match adopt(&inner, &id).await {
                // A quarantined run waits for a hand to resume it.
                Ok(()) | Err(ExecError::Held { .. } | ExecError::Quarantined(_)) => {}
                Err(ExecError::Ended { .. }) => {
                    // Mail for a run that has ended: nobody will read it.
                    let commit = Commit {
                        workflow_id: id.clone(),
                        inbox_taken: mail.remove(&id).unwrap_or_default(),
                        ..Commit::default()
                    };
                    let _ = inner.store.commit(commit).await;
                }
                Err(e) => {
                    tracing::warn!(workflow = %id, error = %e, "cannot load workflow; retrying later");
                    failed.insert(id, Instant::now());
                }
            }
        }
    }
}

/// A notice already queued, if any; a lag is notices missed.
fn queued_notice(notices: Option<&mut broadcast::Receiver<Notice>>) -> Option<Notice> {
    match notices?.try_recv() {
        Ok(notice) => Some(notice),
        Err(broadcast::error::TryRecvError::Lagged(_)) => Some(Notice::Missed),
        Err(_) => None,
    }
}

/// The next notice of a shared store (never, for a store without them); a
/// lag is notices missed.
async fn next_notice(notices: Option<&mut broadcast::Receiver<Notice>>) -> Notice {
    let Some(notices) = notices else {
        return std::future::pending().await;
    };
    match notices.recv().await {
        Ok(notice) => notice,
        Err(broadcast::error::RecvError::Lagged(_)) => Notice::Missed,
        Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
    }
}

impl Inner {
    /// Announces a commit another process made, as this process announces
    /// its own (its entries are in the store); mail and misses need nothing
    /// more than the loop's next pass. Whether the store must be looked at
    /// for work: not for a commit of this process, or of a run it holds
    /// (one per commit, on a busy daemon: looking each time cost three
    /// queries a commit).
    fn heard(&self, notice: Notice) -> bool {
        let Notice::Committed {
            workflow_id,
            owner,
            status,
        } = notice
        else {
            return true;
        };
        if owner.as_deref() == Some(owner::current()) || self.runs().contains_key(&workflow_id) {
            return false;
        }
        let _ = self.changes.send(Change {
            id: workflow_id.clone(),
            status,
            loaded: false,
            state: None,
            error: None,
            asking: false,
        });
        let _ = self.appended.send(Arc::new(Appended {
            workflow_id,
            status,
            entries: Vec::new(),
        }));
        true
    }
}

/// Takes over a run whose owner died, as a recovery (it counts towards
/// quarantine, spec/limits.md); one that cannot be loaded waits a while.
async fn take_over(inner: &Arc<Inner>, id: &str, failed: &mut HashMap<String, Instant>) {
    let Ok(Some(row)) = inner.store.workflow(id).await else {
        return;
    };
    match inner.recover_one(&row).await {
        Ok(true) => tracing::info!(workflow = %id, "took over a run whose owner is gone"),
        // Quarantined; or another process took it first, or it ended.
        Ok(false) | Err(ExecError::Held { .. } | ExecError::Ended { .. }) => {}
        Err(e) => {
            tracing::warn!(workflow = %id, error = %e, "cannot take over workflow; retrying later");
            failed.insert(id.to_owned(), Instant::now());
        }
    }
}

/// Loads again the runs a write the store refused unloaded; those it
/// refuses again wait for the next try.
async fn reload_stranded(inner: &Arc<Inner>) {
    for id in inner.writes.due() {
        match inner.load(&id, Vec::new(), false).await {
            Err(ExecError::Store(e)) if writes::refused(&e) => {
                tracing::debug!(workflow = %id, error = %e, "the store still refuses writes");
            }
            Ok(()) => {
                tracing::info!(workflow = %id, "the store takes writes again: run reloaded");
                inner.writes.settle(&id);
            }
            Err(e) => {
                tracing::debug!(workflow = %id, error = %e, "stranded run not reloaded");
                inner.writes.settle(&id);
            }
        }
    }
}

/// Renews this process's leases, `since` the last renewal that succeeded;
/// says whether it succeeded. A failure is recorded with the store's
/// health; once the leases have lapsed, every loaded run stops (another
/// process may take it) and is loaded again when the store takes writes.
async fn renew(inner: &Arc<Inner>, since: Duration) -> bool {
    super::services::keep_worktrees(inner).await;
    let renewed = inner
        .store
        .renew(owner::current(), inner.config.lease_ttl)
        .await;
    inner.writes.record_lease(&renewed);
    let Err(error) = renewed else {
        return true;
    };
    let (ttl, poll) = (inner.config.lease_ttl, inner.config.poll * 2);
    if since < ttl / 3 + poll {
        tracing::warn!(%error, "renewing this process's leases failed; trying again");
    }
    if since >= ttl {
        if since < ttl + poll {
            tracing::error!(%error, "this process's leases lapsed: its runs stop until the store takes writes");
        }
        let lapsed = ExecError::Store(StoreError::Backend(format!(
            "this process's leases lapsed: renewing them failed for {} s ({error})",
            since.as_secs()
        )));
        let runs: Vec<_> = inner.runs().values().cloned().collect();
        for run in runs {
            let _ = run.send(Msg::Lapsed(lapsed.clone()));
        }
    }
    false
}

/// Loads `id`, which a timer or its inbox wants: through recovery when a
/// dead process left it running (counted, and quarantined when it keeps
/// ending the process, whichever path finds it first), else as it is.
async fn adopt(inner: &Arc<Inner>, id: &str) -> Result<(), ExecError> {
    match inner.store.workflow(id).await? {
        Some(row) if matches!(row.status, WorkflowStatus::Pending | WorkflowStatus::Active) => {
            inner.recover_one(&row).await.map(|_| ())
        }
        _ => inner.load(id, Vec::new(), false).await,
    }
}
