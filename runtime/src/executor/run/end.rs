//! How a run's task ends: unloaded while it waits, finished, stopped by
//! an error, interrupted by a shutdown; its lease let go.

use opcode_vm::RunStatus;
use serde_json::json;
use tokio::sync::oneshot;

use super::{KEEP_LOADED_FOR, Msg, RunTask};
use crate::executor::{ExecError, quarantine, writes};
use crate::store::{Commit, LeaseChange, StoreError, WorkflowStatus};
use crate::time::now_ms;
use crate::{log, owner};

impl RunTask {
    /// Waiting only for decisions or signals, with no timer due soon.
    pub(super) fn idle(&self) -> bool {
        let soon = now_ms() + KEEP_LOADED_FOR;
        self.vm.status() == RunStatus::Suspended
            && self.inflight.is_empty()
            && self.step_rows.is_empty()
            && self.timers.values().all(|(_, due, _)| *due > soon)
    }

    /// Leaves the runs map unless a message arrived; the map is locked
    /// while checking, so no sender can slip a message in after the check.
    pub(super) fn unload(&mut self) -> bool {
        let mut runs = self.inner.runs();
        if !self.rx.is_empty() {
            return false;
        }
        runs.remove(&self.id);
        self.inner.fences.leaving(&self.id);
        true
    }

    /// Leaves the runs map; a load of the run waits until this task has
    /// given its lease up ([`Self::let_go`]). Only its own place: a
    /// creation refused as a duplicate leaves early, and a load of the
    /// run may have taken the id since.
    pub(super) fn leave(&self) {
        let mut runs = self.inner.runs();
        if !runs
            .get(&self.id)
            .is_some_and(|tx| tx.same_channel(&self.tx))
        {
            return;
        }
        runs.remove(&self.id);
        self.inner.fences.leaving(&self.id);
        self.inner.asks.forget_run(&self.id);
    }

    /// The run ended (or its channel closed).
    pub(super) async fn finish(mut self) {
        self.leave();
        if self.has_children && self.vm.status().is_terminal() {
            crate::executor::tree::cancel_children(&self.inner, &self.id, self.vm.status().into());
        }
        if let Some(key) = self
            .vm
            .concurrency_key()
            .filter(|_| self.vm.status().is_terminal())
        {
            // Its slot is free: the next waiting run of its key takes it.
            crate::executor::admission::promote_later(&self.inner, key);
        }
        if self.vm.status().is_terminal()
            && !self.who.child
            && let (Some(workspaces), Some(ws)) =
                (&self.inner.config.workspaces, &self.who.workspace)
        {
            workspaces.remove(ws).await;
        }
        let ended = ExecError::Ended {
            id: self.id.clone(),
            status: self.vm.status().into(),
        };
        self.refuse_queued(&ended);
        for (_, (handle, _)) in self.inflight.drain() {
            handle.abort();
        }
        self.release(self.vm.status().into()).await;
    }

    /// A commit failed: the log is the truth, so drop this copy of the run.
    /// It is replayed when next loaded; after a write the store refused,
    /// the background loop loads it again until the store takes writes.
    pub(super) async fn stop(mut self, error: &ExecError) {
        // A creation that found the run stored started nothing: the run
        // itself (running elsewhere, or ended) is not told of it.
        let exists = matches!(error, ExecError::Store(StoreError::Exists(_)));
        if exists {
            tracing::debug!(workflow = %self.id, "a run of this id exists; nothing started");
        } else {
            tracing::warn!(workflow = %self.id, %error, "workflow unloaded after an error; it replays when next loaded");
        }
        self.leave();
        if matches!(error, ExecError::Store(e) if writes::refused(e)) {
            self.inner.writes.strand(&self.id);
        }
        self.refuse_queued(error);
        for (_, (handle, _)) in self.inflight.drain() {
            handle.abort();
        }
        self.let_go().await;
        if !exists {
            self.inner.publish_failure(&self.id, error);
        }
        self.inner.wake.notify_one();
    }

    /// The process shuts down: notes it in the log (so that the recovery
    /// at the next start does not count it as a crash, see
    /// [`super::quarantine`]) and lets the run go; its actions in flight
    /// run again at the next start.
    pub(super) async fn interrupt(mut self, done: oneshot::Sender<()>) {
        self.leave();
        for (_, (handle, _)) in self.inflight.drain() {
            handle.abort();
        }
        if self.create.is_none() {
            let at = log::stamp(self.now());
            let note = log::note(
                &at,
                quarantine::INTERRUPTED,
                None,
                &json!({"reason": "shutdown"}),
            );
            let commit = Commit {
                workflow_id: self.id.clone(),
                after_seq: self.last_seq,
                entries: vec![note],
                steps: self.step_rows.take(&self.vm),
                lease: (!self.released).then(|| LeaseChange::Release {
                    owner: owner::current().to_owned(),
                }),
                ..Commit::default()
            };
            if self.inner.commit(commit, None).await.is_ok() {
                self.last_seq += 1;
                self.released = true;
            }
        }
        self.refuse_queued(&ExecError::Stopped(self.id.clone()));
        self.release(self.vm.status().into()).await;
        let _ = done.send(());
    }

    /// Answers the events sent before the run left the runs map.
    fn refuse_queued(&mut self, error: &ExecError) {
        while let Ok(msg) = self.rx.try_recv() {
            if let Msg::Deliver(incoming) = msg
                && let Some(reply) = incoming.reply
            {
                let _ = reply.send(Err(error.clone()));
            }
        }
    }

    /// Lets the run go and tells waiters how it left.
    pub(super) async fn release(&mut self, status: WorkflowStatus) {
        self.let_go().await;
        let state = self
            .settled_state
            .take()
            .filter(|s| s.workflow.status == status);
        self.inner.publish(&self.id, status, false, state);
        // Mail that came while a waiting run left is looked for at once;
        // an ended run gets none.
        if !status.is_ended() {
            self.inner.wake.notify_one();
        }
    }

    /// Stops the local timers (the durable ones stay in the store) and
    /// gives the lease up.
    async fn let_go(&mut self) {
        for (_, (handle, _, _)) in self.timers.drain() {
            handle.abort();
        }
        if !self.released {
            self.inner.release_lease(&self.id).await;
        }
        self.inner.fences.left(&self.id);
    }
}
