//! The executor: drives VMs against the event store.
//!
//! Each loaded workflow is one task ([`run::RunTask`]) that owns its VM. A
//! round takes every event waiting for the run, applies them, writes the
//! inputs, the records and the derived state in one commit, and only then
//! performs the effects (actions on tokio, local timers); immediate actions
//! (computations that touch nothing outside the process, [`caller`]) run
//! inside the round instead. A workflow that only waits for decisions or
//! signals is unloaded: what remains is its rows, and its timers in the
//! `timers` table, which the background loop ([`background`]) watches.
//! Loading replays the log's inputs into a fresh VM and performs what was
//! pending: in-flight actions run again with the same idempotency key,
//! timers are re-armed (a past one fires at once).
//!
//! Workflows are owned through leases ([`crate::owner`]), so two processes
//! sharing a database never drive the same workflow; an event for a
//! workflow another live process owns is left in its inbox.

mod admission;
mod asks;
mod background;
mod caller;
mod ceiling;
mod fences;
mod held;
mod load;
mod observer;
mod programs;
mod quarantine;
mod round;
mod run;
mod services;
mod slots;
mod stand_in;
mod step_rows;
mod throttle;
mod tree;
mod types;
mod writes;

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use opcode_stdlib::exec::{ExternalActions, Secrets};
use opcode_stdlib::limits::Limits;
use opcode_vm::catalog::ActionSpec;

use crate::breaker::Breakers;
use opcode_vm::event::{Event, RunMeta};
use opcode_vm::{Program, Vm};
use serde_json::Value;
use tokio::sync::{Notify, broadcast, mpsc, oneshot};

pub use self::background::Background;
pub use self::ceiling::CeilingCheck;
use self::fences::Fences;
pub use self::observer::{LogLine, Observer};
use self::programs::Programs;
use self::run::{Incoming, Msg, RunFacts, RunTask, Setup};
pub use self::services::Emitted;
use self::services::RuntimeServices;
pub use self::stand_in::{Answer, StandIn};
use self::step_rows::StepRows;
pub use self::types::{
    Appended, Change, Config, Delivery, ExecError, Recovery, Settled, StartRequest, Until,
};
pub use self::writes::WriteFailure;
use self::writes::Writes;
use crate::log::{self, stamp};
use crate::store::{
    Commit, EntryKind, EventName, EventStore, LeaseChange, NewWorkflow, Source, StepDetail,
    StoreError, WorkflowFilter, WorkflowRow, WorkflowState, WorkflowStatus,
};
use crate::time::now_ms;
use crate::workspace::Workspaces;

/// Drives workflows. Cheap to clone.
#[derive(Clone)]
pub struct Executor {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

/// The shared state.
pub(crate) struct Inner {
    store: Arc<dyn EventStore>,
    config: Config,
    programs: Programs,
    secrets: Arc<dyn Secrets>,
    services: Arc<dyn opcode_stdlib::exec::Services>,
    runs: Mutex<HashMap<String, mpsc::UnboundedSender<Msg>>>,
    slots: Arc<slots::Slots>,
    breakers: Arc<Breakers>,
    changes: broadcast::Sender<Change>,
    emitted: broadcast::Sender<Emitted>,
    appended: broadcast::Sender<Arc<Appended>>,
    observer: std::sync::OnceLock<Arc<dyn Observer>>,
    wake: Notify,
    writes: Writes,
    fences: Fences,
    notifier: std::sync::OnceLock<Arc<dyn Notifier>>,
    external: std::sync::OnceLock<Arc<dyn ExternalActions>>,
    stand_in: std::sync::OnceLock<Arc<dyn StandIn>>,
    asks: asks::Asks,
    trees: tree::Trees,
}

/// Delivers `workflow.notify` messages to the agent that started a run.
pub trait Notifier: Send + Sync {
    /// Sends `note` (`{message, workflow_id, step_id, data}`) to `agent_id`;
    /// answers `{"notified": bool, "reason"?: why not}` and never fails.
    fn notify(&self, agent_id: Option<&str>, note: Value) -> Value;
}

impl Executor {
    /// An executor over `store`, taking secrets from `secrets`.
    pub fn new(store: Arc<dyn EventStore>, secrets: Arc<dyn Secrets>, config: Config) -> Executor {
        let budget = config.limits.cel;
        let inner = Arc::new_cyclic(|weak| {
            let (changes, _) = broadcast::channel(1024);
            let (emitted, _) = broadcast::channel(1024);
            let (appended, _) = broadcast::channel(1024);
            Inner {
                slots: slots::Slots::new(config.max_actions, config.priority_aging),
                breakers: Arc::new(Breakers::new(config.breakers.clone())),
                store,
                config,
                programs: Programs::new(budget),
                secrets,
                services: Arc::new(RuntimeServices::new(weak.clone())),
                runs: Mutex::new(HashMap::new()),
                changes,
                emitted,
                appended,
                observer: std::sync::OnceLock::new(),
                wake: Notify::new(),
                writes: Writes::default(),
                fences: Fences::default(),
                notifier: std::sync::OnceLock::new(),
                external: std::sync::OnceLock::new(),
                stand_in: std::sync::OnceLock::new(),
                asks: asks::Asks::default(),
                trees: tree::Trees::default(),
            }
        });
        Executor { inner }
    }

    /// Reads the program compiled from `definition` (compiled once, then
    /// cached; starting a run of the same definition reuses it).
    pub fn with_program<R>(
        &self,
        definition: &str,
        read: impl FnOnce(&Program) -> R,
    ) -> Result<R, ExecError> {
        let loaded = self.inner.programs.load(definition, &[])?;
        Ok(read(&loaded.plan.program))
    }

    /// Keeps `program`, compiled from `definition`, for the runs of it to
    /// come (`opcode.define` has just compiled it: the first run need not
    /// compile it again).
    pub fn keep_program(&self, definition: &str, program: Program) {
        self.inner.programs.insert(definition, program);
    }

    /// Sets who runs actions besides the built-in ones (once, before the
    /// first run; later calls are ignored).
    pub fn set_external(&self, external: Arc<dyn ExternalActions>) {
        let _ = self.inner.external.set(external);
    }

    /// Sets who answers calls in place of the actions (once, before the
    /// first run; later calls are ignored).
    pub fn set_stand_in(&self, stand_in: Arc<dyn StandIn>) {
        let _ = self.inner.stand_in.set(stand_in);
    }

    /// Sets the signatures of the actions `provider` offers, so workflows
    /// using them compile (and are checked against them).
    pub fn set_external_actions(&self, provider: &str, specs: Vec<ActionSpec>) {
        self.inner.programs.set_external_actions(provider, specs);
    }

    /// Sets who delivers `workflow.notify` (once; later calls are ignored).
    pub fn set_notifier(&self, notifier: Arc<dyn Notifier>) {
        let _ = self.inner.notifier.set(notifier);
    }

    /// The settings' isolation ceiling for workflows of `agent`, for
    /// [`opcode_compiler::Compiler::compile_with`].
    pub fn ceiling<'a>(&'a self, agent: Option<&'a str>) -> CeilingCheck<'a> {
        CeilingCheck {
            settings: &self.inner.config.isolation.defaults,
            agent,
        }
    }

    /// Where this executor's runs work.
    pub fn workspaces(&self) -> Option<&Workspaces> {
        self.inner.config.workspaces.as_ref()
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn EventStore> {
        &self.inner.store
    }

    /// The secret `name`, from where runs take theirs (the vault, then the
    /// environment).
    pub async fn secret(&self, name: &str) -> Option<String> {
        self.inner.secrets.secret(name).await
    }

    /// The compiler the executor compiles definitions with (the built-in
    /// actions and the external ones known now).
    pub fn compiler(&self) -> Arc<opcode_compiler::Compiler> {
        self.inner.programs.compiler()
    }

    /// The run-time bounds in force (spec/limits.md).
    pub fn limits(&self) -> &Limits {
        &self.inner.config.limits
    }

    /// Writes have been failing since when, and why (none: the last write
    /// succeeded).
    pub fn write_failure(&self) -> Option<WriteFailure> {
        self.inner.writes.failure()
    }

    /// Status changes, as they are committed.
    pub fn changes(&self) -> broadcast::Receiver<Change> {
        self.inner.changes.subscribe()
    }

    /// `workflow.emit` events, live.
    pub fn emitted(&self) -> broadcast::Receiver<Emitted> {
        self.inner.emitted.subscribe()
    }

    /// Log entries as they are committed, every workflow's.
    pub fn appended(&self) -> broadcast::Receiver<Arc<Appended>> {
        self.inner.appended.subscribe()
    }

    /// Sets who watches the executor (the daemon's metrics; once, later
    /// calls are ignored).
    pub fn set_observer(&self, observer: Arc<dyn Observer>) {
        let _ = self.inner.observer.set(observer);
    }

    /// Starts a run and returns its id once its creation is committed.
    pub async fn start(&self, request: StartRequest) -> Result<String, ExecError> {
        self.inner.start(request).await
    }

    /// Delivers an event (decision, signal, cancel, resume) to a workflow,
    /// loading it if needed.
    pub async fn deliver(&self, id: &str, event: Event) -> Result<Delivery, ExecError> {
        self.inner.deliver(id, event).await
    }

    /// Loads a workflow and carries on with what it was doing (a run
    /// suspended by its deadline is resumed with a fresh deadline).
    pub async fn resume(&self, id: &str) -> Result<(), ExecError> {
        self.inner.resume(id).await
    }

    /// Waits until the workflow has ended (or, with [`Until::Settled`], is
    /// waiting for a decision or signal) and returns its status.
    pub async fn wait(&self, id: &str, until: Until) -> Result<WorkflowStatus, ExecError> {
        let changes = self.inner.changes.subscribe();
        let look = !self.inner.runs().contains_key(id);
        let settled = self.inner.wait(id, until, changes, look).await?;
        Ok(settled.status)
    }

    /// [`Executor::wait`] for a run this process started after `changes`
    /// was taken from [`Executor::changes`]: its announcements are all in
    /// `changes`, so the store is read only if some were missed.
    pub async fn wait_from(
        &self,
        id: &str,
        until: Until,
        changes: broadcast::Receiver<Change>,
    ) -> Result<Settled, ExecError> {
        self.inner.wait(id, until, changes, false).await
    }

    /// Deals with the workflows a dead process left running, as
    /// [`Config::recovery`] says; returns the ids of those it resumed or
    /// parked (not of those it quarantined, see `spec/limits.md`).
    pub async fn recover(&self) -> Result<Vec<String>, ExecError> {
        self.inner.recover().await
    }

    /// Lets every loaded run go before the process exits: each notes the
    /// shutdown in its log and gives its lease up, so another process may
    /// take it at once and the next start does not count it as a crash.
    /// Waits at most `wait` (a run in the middle of a round finishes the
    /// round first).
    pub async fn shutdown(&self, wait: Duration) {
        let runs: Vec<_> = self.inner.runs().values().cloned().collect();
        let mut answers = Vec::with_capacity(runs.len());
        for tx in runs {
            let (done, answer) = oneshot::channel();
            if tx.send(Msg::Shutdown(done)).is_ok() {
                answers.push(answer);
            }
        }
        let _ = tokio::time::timeout(wait, futures::future::join_all(answers)).await;
    }

    /// Starts the background loop (lease renewal, due timers, inboxes); it
    /// stops when the returned handle is dropped.
    pub fn background(&self) -> Background {
        Background::spawn(self.inner.clone())
    }

    /// The delegated agents this executor's actions run (where their
    /// transcripts are kept).
    pub fn agents(&self) -> &opcode_stdlib::agents::AgentsConfig {
        &self.inner.config.agents
    }

    /// Action calls waiting for a worker slot (given out by their runs'
    /// priority, then by age).
    pub fn calls_waiting(&self) -> usize {
        self.inner.slots.waiting()
    }

    /// Ids of the workflows loaded in this process.
    pub fn loaded(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.inner.runs().keys().cloned().collect();
        ids.sort();
        ids
    }
}

impl Inner {
    fn runs(&self) -> MutexGuard<'_, HashMap<String, mpsc::UnboundedSender<Msg>>> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Who watches this executor.
    fn observer(&self) -> &dyn Observer {
        self.observer
            .get()
            .map_or(&observer::Unobserved as &dyn Observer, |o| o.as_ref())
    }

    /// Writes `commit`, then counts and broadcasts what it appended; with
    /// `read_back`, also reads the workflow's state as it left it, its step
    /// rows this much.
    async fn commit(
        &self,
        mut commit: Commit,
        read_back: Option<StepDetail>,
    ) -> Result<Option<WorkflowState>, StoreError> {
        let id = commit.workflow_id.clone();
        if commit.create.is_none() {
            commit.fence = self.fences.of(&id);
        }
        let lease = match &commit.lease {
            Some(LeaseChange::Take { .. }) => Some(true),
            Some(LeaseChange::Release { .. }) => Some(false),
            None => None,
        };
        let kinds: Vec<(EntryKind, Option<EventName>)> = commit
            .entries
            .iter()
            .map(|e| (e.kind, EventName::parse(e.event_type)))
            .collect();
        let feed =
            (self.appended.receiver_count() > 0 && !commit.entries.is_empty()).then(|| Appended {
                workflow_id: commit.workflow_id.clone(),
                status: commit.update.as_ref().map(|u| u.status),
                entries: commit
                    .entries
                    .iter()
                    .zip(commit.after_seq + 1..)
                    .map(|(e, seq)| e.stored(seq))
                    .collect(),
            });
        let written = if let Some(detail) = read_back {
            self.store.commit_and_state(commit, detail).await
        } else {
            self.store.commit(commit).await.map(|()| None)
        };
        self.writes.record(&written);
        let state = written?;
        match lease {
            // A creation's lease is the run's first grant.
            Some(true) => self.fences.hold(&id, 1),
            Some(false) => self.fences.forget(&id),
            None => {}
        }
        self.observer().appended(&kinds);
        if let Some(feed) = feed {
            let _ = self.appended.send(Arc::new(feed));
        }
        Ok(state)
    }

    fn publish(
        &self,
        id: &str,
        status: WorkflowStatus,
        loaded: bool,
        state: Option<Arc<WorkflowState>>,
    ) {
        let _ = self.changes.send(Change {
            id: id.to_owned(),
            status: Some(status),
            loaded,
            state,
            error: None,
            asking: false,
        });
    }

    /// Tells waiters an action of `id` asked a question: the run waits for
    /// its answer.
    fn publish_asking(&self, id: &str) {
        let _ = self.changes.send(Change {
            id: id.to_owned(),
            status: Some(WorkflowStatus::Active),
            loaded: true,
            state: None,
            error: None,
            asking: true,
        });
    }

    /// Tells waiters `id` left this process before settling, and why.
    fn publish_failure(&self, id: &str, error: &ExecError) {
        let _ = self.changes.send(Change {
            id: id.to_owned(),
            status: None,
            loaded: false,
            state: None,
            error: Some(error.clone()),
            asking: false,
        });
    }

    /// What a new run may take in of action outputs: `limits.run_outputs`,
    /// and for a child no more than its tree has left of
    /// `limits.tree_outputs`.
    fn output_budget(&self, parent: Option<&str>) -> u64 {
        let limits = &self.config.limits;
        match parent {
            Some(parent) => {
                let taken = self.trees.taken_by(opcode_stdlib::exec::tree_root(parent));
                limits
                    .run_outputs
                    .min(limits.tree_outputs.saturating_sub(taken))
            }
            None => limits.run_outputs,
        }
    }

    async fn start(self: &Arc<Self>, request: StartRequest) -> Result<String, ExecError> {
        let id = request
            .id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let loaded = match request.program {
            Some(program) => self.programs.insert(&request.definition, program),
            None => self.programs.load(&request.definition, &[])?,
        };
        let plan = loaded.plan.clone();
        let report_state = request.report_state;
        let workspace = request
            .workspace
            .clone()
            .or_else(|| self.config.workspaces.as_ref().map(|w| w.for_run(&id)));
        let meta = RunMeta {
            run_id: id.clone(),
            name: plan.program.header.name.clone(),
            template_name: request.template_name.clone(),
            template_version: request.template_version.map(|v| v.to_string()),
            agent_id: request.agent_id.clone(),
            parent_id: request.parent_id.clone(),
            workspace: workspace.as_ref().map(|w| w.to_string_lossy().into_owned()),
            session_id: request.session_id.clone(),
            max_loop_iterations: Some(self.config.limits.loop_iterations),
            max_step_instances: Some(self.config.limits.step_instances),
            max_output_bytes: Some(self.output_budget(request.parent_id.as_deref())),
            priority: request.priority,
            rerun_of: request.rerun.as_ref().map(|(of, _)| of.clone()),
            carried: request
                .rerun
                .clone()
                .map(|(_, kept)| kept)
                .unwrap_or_default(),
        };
        let who = RunFacts::of(&meta, &plan.program, &request.secrets);
        let base_dir = request
            .base_dir
            .clone()
            .unwrap_or_else(|| self.config.base_dir.clone());
        let create = NewWorkflow {
            id: id.clone(),
            name: meta.name.clone(),
            source: Source {
                hash: plan.program.header.source_hash.clone(),
                definition: request.definition,
                program: loaded.bytes.clone(),
            },
            inputs: request.inputs.to_string(),
            agent_id: request.agent_id,
            parent_id: request.parent_id,
            template_name: request.template_name,
            template_version: request.template_version,
            template_latest: request.template_latest,
            base_dir: Some(base_dir.to_string_lossy().into_owned()),
            created_at: stamp(now_ms()),
        };
        // The first commit creates the workflow and takes its lease at once.
        let (tx, rx) = mpsc::unbounded_channel();
        let (reply, answer) = oneshot::channel();
        let started = Incoming::external(
            Event::Started {
                inputs: request.inputs,
                meta: Box::new(meta),
                secrets: request.secrets,
            },
            Some(reply),
        );
        let _ = tx.send(Msg::Deliver(Box::new(started)));
        if let Some(reason) = request.cancelled {
            // In the same first round: its dispatches are dropped unmade.
            let cancel = Incoming::external(Event::Cancel { reason }, None);
            let _ = tx.send(Msg::Deliver(Box::new(cancel)));
        }
        match self.runs().entry(id.clone()) {
            // Loaded here, so it exists: the task of a second creation would
            // take the live run's place in the map and give its lease up.
            Entry::Occupied(_) => return Err(ExecError::Store(StoreError::Exists(id))),
            Entry::Vacant(slot) => slot.insert(tx.clone()),
        };
        let setup = Setup {
            id: id.clone(),
            vm: Vm::new(plan),
            loaded,
            base_dir,
            last_seq: 0,
            who,
            step_rows: StepRows::new(self.config.step_rows_within),
        };
        let task = RunTask::new(self.clone(), setup, tx, rx)
            .creating(create)
            .reporting_state(report_state);
        tokio::spawn(task.run(Vec::new()));
        match answer.await {
            Ok(Ok(())) => Ok(id),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(ExecError::Stopped(id)),
        }
    }

    async fn deliver(self: &Arc<Self>, id: &str, event: Event) -> Result<Delivery, ExecError> {
        let (reply, answer) = oneshot::channel();
        let incoming = Incoming::external(event.clone(), Some(reply));
        match self.load(id, vec![incoming], false).await {
            Ok(()) => {}
            Err(ExecError::Held { owner, .. }) => {
                let payload = serde_json::to_string(&event).unwrap_or_default();
                self.store.send(id, payload, stamp(now_ms())).await?;
                return Ok(Delivery::Queued { owner });
            }
            Err(e) => return Err(e),
        }
        match answer.await {
            Ok(Ok(())) => Ok(Delivery::Applied),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(ExecError::Stopped(id.to_owned())),
        }
    }

    async fn resume(self: &Arc<Self>, id: &str) -> Result<(), ExecError> {
        // A run still loaded (its deadline halted it while a timer runs)
        // takes the resume as an input; one that is not loads resuming.
        let loaded = self.runs().contains_key(id);
        if loaded {
            // One that is not halted (recovered, running) has nothing to lift.
            return match self.deliver(id, Event::Resume).await {
                Ok(_) | Err(ExecError::Refused(_)) => Ok(()),
                Err(e) => Err(e),
            };
        }
        self.load(id, Vec::new(), true).await
    }

    /// Waits with `changes` subscribed before the run could have left this
    /// process; `look` reads the store first (a run not loaded here).
    async fn wait(
        &self,
        id: &str,
        until: Until,
        mut changes: broadcast::Receiver<Change>,
        mut look: bool,
    ) -> Result<Settled, ExecError> {
        let settled = |status: WorkflowStatus| {
            status.is_ended() || (until == Until::Settled && status == WorkflowStatus::Suspended)
        };
        loop {
            if look {
                let row = self
                    .store
                    .workflow(id)
                    .await?
                    .ok_or_else(|| ExecError::NotFound(id.to_owned()))?;
                // A run that ended here is waited for until it has also left
                // (its lease given up), so callers see it fully settled.
                if settled(row.status) && !self.runs().contains_key(id) {
                    return Ok(Settled {
                        status: row.status,
                        state: None,
                    });
                }
            }
            // Another process may finish it: look again now and then.
            let left = tokio::time::timeout(Duration::from_secs(1), async {
                loop {
                    match changes.recv().await {
                        // It left this process after its last commit: the
                        // status it announces is the stored one.
                        Ok(change) if change.id == id && !change.loaded => {
                            return Some(change);
                        }
                        Ok(_) => {}
                        Err(broadcast::error::RecvError::Lagged(_)) => return None,
                        Err(broadcast::error::RecvError::Closed) => {
                            std::future::pending::<()>().await;
                        }
                    }
                }
            })
            .await;
            match left {
                // Another process owns the run now: wait for it there.
                Ok(Some(Change {
                    error:
                        Some(ExecError::Store(StoreError::Fenced(_) | StoreError::Conflict { .. })),
                    ..
                })) => look = true,
                Ok(Some(Change {
                    error: Some(error), ..
                })) => return Err(error),
                Ok(Some(Change {
                    status: Some(status),
                    state,
                    ..
                })) if settled(status) => {
                    return Ok(Settled { status, state });
                }
                _ => look = true,
            }
        }
    }

    async fn recover(self: &Arc<Self>) -> Result<Vec<String>, ExecError> {
        self.sweep_workspaces().await;
        tree::cancel_orphans(self).await?;
        let rows = self
            .store
            .workflows(WorkflowFilter {
                statuses: vec![WorkflowStatus::Pending, WorkflowStatus::Active],
                ..WorkflowFilter::default()
            })
            .await?;
        let mut recovered = Vec::new();
        for row in rows {
            if self.runs().contains_key(&row.id) {
                continue;
            }
            let outcome = match self.config.recovery {
                Recovery::Resume => self.recover_one(&row).await,
                Recovery::LeaveSuspended => self.park(&row).await.map(|()| true),
            };
            match outcome {
                Ok(true) => recovered.push(row.id),
                // Quarantined; or someone alive runs it, or it ended meanwhile.
                Ok(false) | Err(ExecError::Held { .. } | ExecError::Ended { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(recovered)
    }

    /// Removes the workspaces of runs that ended while their process was
    /// dying (killed between a run's end and its workspace's removal), and
    /// what a dead process was making. Workspaces of runs this store does
    /// not know are another daemon's: left alone.
    async fn sweep_workspaces(&self) {
        let Some(workspaces) = self.config.workspaces.clone() else {
            return;
        };
        let made = tokio::task::spawn_blocking({
            let workspaces = workspaces.clone();
            move || workspaces.made()
        })
        .await
        .unwrap_or_default();
        for (name, path) in made {
            if let Ok(Some(row)) = self.store.workflow(&name).await
                && row.status.is_ended()
                && workspaces.for_run(&row.id) == path
            {
                tracing::info!(workflow = %row.id, "removing the workspace its run left behind");
                workspaces.remove(&path).await;
            }
        }
    }

    /// Marks an interrupted workflow suspended, as opcode does.
    async fn park(&self, row: &WorkflowRow) -> Result<(), ExecError> {
        self.claim(&row.id).await?;
        let at = stamp(now_ms());
        let commit = Commit {
            workflow_id: row.id.clone(),
            after_seq: row.last_seq,
            entries: vec![log::note(
                &at,
                quarantine::INTERRUPTED,
                None,
                &serde_json::json!({"reason": "process_restart"}),
            )],
            update: Some(crate::store::WorkflowUpdate {
                status: WorkflowStatus::Suspended,
                output: row.output.clone(),
                error: row.error.clone(),
                updated_at: at,
                ..crate::store::WorkflowUpdate::default()
            }),
            ..Commit::default()
        };
        let result = self.commit(commit, None).await.map(|_| ());
        self.release_lease(&row.id).await;
        result?;
        self.publish(&row.id, WorkflowStatus::Suspended, false, None);
        Ok(())
    }
}
