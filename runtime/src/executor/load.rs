//! Loading a run into this process: its lease claimed, its log's inputs
//! replayed into a fresh VM (or its Program rebuilt), its task started.

use std::path::PathBuf;
use std::sync::Arc;

use opcode_vm::{Effect, Vm};
use tokio::sync::mpsc;

use super::run::{Incoming, Msg, RunFacts, RunTask, Setup};
use super::step_rows::StepRows;
use super::{ExecError, Inner};
use crate::store::{Claim, WorkflowRow, WorkflowStatus};
use crate::{log, owner};

impl Inner {
    /// Makes sure `id` is loaded here and hands it `first`; with `resume`,
    /// a run suspended by its deadline carries on.
    pub(super) async fn load(
        self: &Arc<Self>,
        id: &str,
        first: Vec<Incoming>,
        resume: bool,
    ) -> Result<(), ExecError> {
        // A quarantined run loads only to be resumed or cancelled; a
        // cancel does not perform again what it was doing.
        let cancelling = first.iter().any(Incoming::cancels);
        // Registering before loading makes concurrent loads of one id queue
        // behind the first instead of replaying twice.
        let (tx, rx) = {
            let mut runs = self.runs();
            if let Some(tx) = runs.get(id) {
                for incoming in first {
                    let _ = tx.send(Msg::Deliver(Box::new(incoming)));
                }
                return Ok(());
            }
            let (tx, rx) = mpsc::unbounded_channel();
            for incoming in first {
                let _ = tx.send(Msg::Deliver(Box::new(incoming)));
            }
            runs.insert(id.to_owned(), tx.clone());
            (tx, rx)
        };
        self.fences.wait_left(id).await;
        match self.replay(id, tx, rx, resume || cancelling).await {
            Ok((task, quarantined)) => {
                let task = if resume { task.resuming() } else { task };
                let pending = if quarantined && !resume {
                    Vec::new()
                } else {
                    task.pending()
                };
                tokio::spawn(task.run(pending));
                Ok(())
            }
            Err(e) => {
                self.runs().remove(id);
                Err(e)
            }
        }
    }

    /// Claims `id` and rebuilds its VM from the log; also says whether it
    /// was quarantined (loaded only if `quarantine_ok`).
    pub(super) async fn replay(
        self: &Arc<Self>,
        id: &str,
        tx: mpsc::UnboundedSender<Msg>,
        rx: mpsc::UnboundedReceiver<Msg>,
        quarantine_ok: bool,
    ) -> Result<(RunTask, bool), ExecError> {
        let row = self
            .store
            .workflow(id)
            .await?
            .ok_or_else(|| ExecError::NotFound(id.to_owned()))?;
        if row.status.is_ended() {
            return Err(ExecError::Ended {
                id: id.to_owned(),
                status: row.status,
            });
        }
        let quarantined = row.status == WorkflowStatus::Quarantined;
        if quarantined && !quarantine_ok {
            return Err(ExecError::Quarantined(id.to_owned()));
        }
        self.claim(id).await?;
        let result = self.rebuild(&row, tx, rx).await;
        if result.is_err() {
            self.release_lease(id).await;
        }
        result.map(|task| (task, quarantined))
    }

    pub(super) async fn rebuild(
        self: &Arc<Self>,
        row: &WorkflowRow,
        tx: mpsc::UnboundedSender<Msg>,
        rx: mpsc::UnboundedReceiver<Msg>,
    ) -> Result<RunTask, ExecError> {
        // Read the row again under the lease: the last owner may have
        // committed between the first read and the claim.
        let row = self
            .store
            .workflow(&row.id)
            .await?
            .unwrap_or_else(|| row.clone());
        let source =
            self.store.source(&row.source_hash).await?.ok_or_else(|| {
                ExecError::Program(format!("the source of `{}` is missing", row.id))
            })?;
        let loaded = self.programs.load(&source.definition, &source.program)?;
        let entries = self.store.entries(&row.id, 0, true).await?;
        let mut vm = Vm::new(loaded.plan.clone());
        let mut sink = Vec::new();
        // Rows are whole for a suspended run; any other's last writer may
        // have died with some unwritten (decision 0042).
        let rewrite = row.status != WorkflowStatus::Suspended;
        let mut step_rows = StepRows::new(self.config.step_rows_within);
        for entry in &entries {
            let (at, event) = log::decode(entry).map_err(|e| ExecError::Replay {
                id: row.id.clone(),
                reason: e.to_string(),
            })?;
            vm.apply_into(at, &event, &loaded.host, &mut sink)
                .map_err(|e| ExecError::Replay {
                    id: row.id.clone(),
                    reason: format!("entry {} was refused: {e}", entry.seq),
                })?;
            if rewrite {
                for effect in &sink {
                    if let Effect::Record(record) = effect {
                        step_rows.note(record, &entry.at);
                    }
                }
            }
            sink.clear();
        }
        step_rows.due_now();
        let base_dir = row
            .base_dir
            .as_deref()
            .map_or_else(|| self.config.base_dir.clone(), PathBuf::from);
        let who = RunFacts::of(vm.meta(), &loaded.plan.program, vm.input_secrets());
        let setup = Setup {
            id: row.id.clone(),
            vm,
            loaded,
            base_dir,
            last_seq: row.last_seq,
            who,
            step_rows,
        };
        let task = RunTask::new(self.clone(), setup, tx.clone(), rx);
        // Messages left for the run while nobody owned it.
        let _ = tx.send(Msg::Inbox);
        Ok(task)
    }

    /// Takes the lease of `id`, from a dead owner if need be.
    pub(super) async fn claim(&self, id: &str) -> Result<(), ExecError> {
        let (me, ttl) = (owner::current(), self.config.lease_ttl);
        let claimed = self.store.claim(id, me, None, ttl).await;
        self.writes.record_lease(&claimed);
        let granted = |epoch| {
            self.fences.hold(id, epoch);
            Ok(())
        };
        match claimed? {
            Claim::Granted { epoch } => granted(epoch),
            Claim::Held { owner, .. } if owner::is_dead(&owner) => {
                let taken = self.store.claim(id, me, Some(&owner), ttl).await;
                self.writes.record_lease(&taken);
                match taken? {
                    Claim::Granted { epoch } => granted(epoch),
                    Claim::Held { owner, .. } => Err(ExecError::Held {
                        id: id.to_owned(),
                        owner,
                    }),
                }
            }
            Claim::Held { owner, .. } => Err(ExecError::Held {
                id: id.to_owned(),
                owner,
            }),
        }
    }

    /// Gives the lease of `id` up (a failure leaves it to expire).
    pub(super) async fn release_lease(&self, id: &str) {
        self.fences.forget(id);
        let _ = self.store.release(id, owner::current()).await;
    }
}
