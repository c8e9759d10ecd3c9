//! The task that owns one loaded workflow.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use opcode_vm::effect::{Effect, SecretSite};
use opcode_vm::event::{EffectId, Event, RunMeta, TimerId};
use opcode_vm::{Plan, RunStatus, Vm};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use super::caller::{Caller, Finished, Who};
use super::programs::Loaded;
use super::round::{Reply, Round, workflow_update};
use super::step_rows::StepRows;
use super::{ExecError, Inner};
use crate::breaker::Transition;
use crate::log;
use crate::owner;
use crate::store::{
    Commit, DecisionChange, EventName, LeaseChange, NewWorkflow, StepDetail, WorkflowState,
};
use crate::time::now_ms;

mod end;

/// At most this many events share one round.
const MAX_ROUND: usize = 512;

/// A suspended run stays loaded while one of its timers is due this soon.
const KEEP_LOADED_FOR: u64 = 5_000;

/// A message to a run.
pub enum Msg {
    /// An event to apply.
    Deliver(Box<Incoming>),
    /// Look for messages in the run's inbox.
    Inbox,
    /// The process shuts down: note it, let the run go, then answer.
    Shutdown(oneshot::Sender<()>),
    /// This process's leases lapsed (their renewal failed for longer than
    /// their time to live): another process may take the run, so this one
    /// stops driving it and loads it again once the store takes writes.
    Lapsed(ExecError),
}

/// An event on its way into a run.
pub struct Incoming {
    event: Event,
    reply: Option<Reply>,
    inbox_id: Option<i64>,
    /// Sent from outside the process's own machinery (a decision, a
    /// signal, a cancel): a refusal is reported, not ignored.
    external: bool,
    /// Circuit breaker changes the call caused, logged before its result.
    breaker_changes: Vec<Transition>,
}

impl Incoming {
    /// An event from a caller.
    pub fn external(event: Event, reply: Option<Reply>) -> Incoming {
        Incoming {
            event,
            reply,
            inbox_id: None,
            external: true,
            breaker_changes: Vec::new(),
        }
    }

    /// Does it cancel the run?
    pub fn cancels(&self) -> bool {
        matches!(self.event, Event::Cancel { .. })
    }

    /// A timer that fired.
    fn fired(timer: TimerId) -> Incoming {
        Incoming {
            event: Event::TimerFired { timer },
            reply: None,
            inbox_id: None,
            external: false,
            breaker_changes: Vec::new(),
        }
    }

    /// An action's result.
    fn finished(effect: EffectId, finished: Finished) -> Incoming {
        Incoming {
            event: Event::ActionFinished {
                effect,
                result: finished.result,
            },
            reply: None,
            inbox_id: None,
            external: false,
            breaker_changes: finished.breaker_changes,
        }
    }
}

/// A loaded run.
pub struct RunTask {
    inner: Arc<Inner>,
    id: String,
    vm: Vm,
    loaded: Arc<Loaded>,
    caller: Arc<Caller>,
    who: RunFacts,
    last_seq: u64,
    last_at: u64,
    last_status: RunStatus,
    last_context: Value,
    create: Option<NewWorkflow>,
    /// The last commit gave the lease up.
    released: bool,
    /// Read the state (its step rows this much) with the commit that
    /// settles the run.
    report_state: Option<StepDetail>,
    /// The state the last commit left, when it was read.
    settled_state: Option<Arc<WorkflowState>>,
    tx: mpsc::UnboundedSender<Msg>,
    rx: mpsc::UnboundedReceiver<Msg>,
    inflight: HashMap<EffectId, (AbortHandle, String)>,
    timers: HashMap<TimerId, (AbortHandle, u64, Option<String>)>,
    taken: HashSet<i64>,
    scratch: Vec<Effect>,
    /// Step instances changed since their rows were written.
    step_rows: StepRows,
    resume_halted: bool,
    /// Answered once a shutdown has let the run go.
    shutting_down: Option<oneshot::Sender<()>>,
    lapsed: Option<ExecError>,
    /// It may start children (its program calls `workflow.run` or
    /// `workflow.map`): when it ends, those still running are cancelled,
    /// even when it was loaded only to be cancelled.
    has_children: bool,
}

/// What a run starts from.
pub struct Setup {
    /// The workflow.
    pub id: String,
    /// Its VM, replayed.
    pub vm: Vm,
    /// Its program.
    pub loaded: Arc<Loaded>,
    /// Where relative paths resolve.
    pub base_dir: PathBuf,
    /// The log's last sequence.
    pub last_seq: u64,
    /// Who started it, from what, and where it works.
    pub who: RunFacts,
    /// Step rows to write (again) at once: a replay's, when its last
    /// writer may have left them behind.
    pub step_rows: StepRows,
}

/// The facts of a run its action calls need.
#[derive(Debug, Clone, Default)]
pub struct RunFacts {
    /// The agent that started it.
    pub agent_id: Option<String>,
    /// The template it runs.
    pub template: Option<String>,
    /// Its workspace.
    pub workspace: Option<PathBuf>,
    /// Is it a child run?
    pub child: bool,
    /// The session it belongs to.
    pub session: Option<String>,
    /// Every secret it may reveal: those its program names and those its
    /// parent passed. Their values are masked in all its actions' results.
    pub secrets: Vec<String>,
    /// Its priority: 0 first, 9 last.
    pub priority: u8,
}

impl RunFacts {
    /// The facts of a run of `program` that `meta` and the `passed`
    /// secrets of its inputs describe.
    pub fn of(meta: &RunMeta, program: &opcode_vm::Program, passed: &[SecretSite]) -> RunFacts {
        let mut secrets: Vec<String> = program
            .secret_names()
            .into_iter()
            .map(str::to_owned)
            .collect();
        secrets.extend(passed.iter().flat_map(|site| {
            site.parts
                .iter()
                .filter_map(|p| p.secret().map(str::to_owned))
        }));
        secrets.sort();
        secrets.dedup();
        RunFacts {
            agent_id: meta.agent_id.clone(),
            template: meta.template_name.clone(),
            workspace: meta.workspace.as_ref().map(PathBuf::from),
            child: meta.parent_id.is_some(),
            session: meta.session_id.clone(),
            secrets,
            priority: meta.priority(),
        }
    }

    /// The call's view of them, for step instance `step` of run `run_id`.
    pub fn who<'a>(&'a self, run_id: &'a str, step: &'a str) -> Who<'a> {
        Who {
            run_id,
            step,
            agent_id: self.agent_id.as_deref(),
            template: self.template.as_deref(),
            workspace: self.workspace.as_deref(),
            session: self.session.as_deref(),
            secrets: &self.secrets,
            priority: self.priority,
        }
    }
}

impl RunTask {
    /// A task for `setup`, fed by `rx`.
    pub fn new(
        inner: Arc<Inner>,
        setup: Setup,
        tx: mpsc::UnboundedSender<Msg>,
        rx: mpsc::UnboundedReceiver<Msg>,
    ) -> RunTask {
        let actions = inner.programs.actions(
            &setup.base_dir,
            &inner.services,
            &inner.config,
            inner.external.get(),
        );
        let caller = Arc::new(Caller::new(&inner, actions));
        let last_status = setup.vm.status();
        let last_context = setup.vm.context().clone();
        let program = &setup.loaded.plan.program;
        let has_children = program.calls("workflow.run") || program.calls("workflow.map");
        RunTask {
            inner,
            id: setup.id,
            vm: setup.vm,
            loaded: setup.loaded,
            caller,
            who: setup.who,
            last_seq: setup.last_seq,
            last_at: 0,
            last_status,
            last_context,
            create: None,
            released: false,
            report_state: None,
            settled_state: None,
            tx,
            rx,
            inflight: HashMap::new(),
            timers: HashMap::new(),
            taken: HashSet::new(),
            scratch: Vec::new(),
            step_rows: setup.step_rows,
            resume_halted: false,
            shutting_down: None,
            lapsed: None,
            has_children,
        }
    }

    /// The first commit also creates the workflow and takes its lease.
    pub fn creating(mut self, create: NewWorkflow) -> RunTask {
        self.create = Some(create);
        self
    }

    /// The state is read with the commit that first settles the run (it
    /// ends or suspends), its step rows as much as `report` says, and
    /// announced with its status.
    pub fn reporting_state(mut self, report: Option<StepDetail>) -> RunTask {
        self.report_state = report;
        self
    }

    /// A run suspended by its deadline resumes once loaded.
    pub fn resuming(mut self) -> RunTask {
        self.resume_halted = true;
        self
    }

    /// The effects the replayed VM still waits on.
    pub fn pending(&self) -> Vec<Effect> {
        self.vm.pending()
    }

    /// Runs until the workflow ends or is unloaded.
    pub async fn run(mut self, pending: Vec<Effect>) {
        self.charge_tree();
        if let Err(e) = self.restart(pending).await {
            return self.stop(&e).await;
        }
        if self.resume_halted && self.vm.halted() {
            let _ = self.tx.send(Msg::Deliver(Box::new(Incoming::external(
                Event::Resume,
                None,
            ))));
        }
        loop {
            if self.vm.status().is_terminal() {
                return self.finish().await;
            }
            if self.idle() && self.unload() {
                return self.release(self.vm.status().into()).await;
            }
            let Some(batch) = self.next_batch().await else {
                return self.finish().await;
            };
            // A lapse alone brings no work: the run just stops.
            let lapse_only = batch.is_empty() && self.lapsed.is_some();
            if !lapse_only && let Err(e) = self.round(batch).await {
                return self.stop(&e).await;
            }
            if let Some(error) = self.lapsed.take() {
                return self.stop(&error).await;
            }
            if let Some(done) = self.shutting_down.take() {
                return self.interrupt(done).await;
            }
        }
    }

    /// Performs again what a replayed run was waiting on, after noting the
    /// re-dispatched actions durably (they may run a second time); reads
    /// start while the notes are written.
    async fn restart(&mut self, pending: Vec<Effect>) -> Result<(), ExecError> {
        let at = log::stamp(self.now());
        let notes: Vec<_> = pending
            .iter()
            .filter_map(|e| match e {
                Effect::Dispatch(d) => {
                    let step = self.loaded.plan.instance_name(&d.inst);
                    let key = format!("{}/{step}/{}", self.id, d.attempt);
                    Some(log::note(
                        &at,
                        EventName::ActionRedispatched,
                        Some(step),
                        &json!({"action": d.action, "attempt": d.attempt, "idempotency_key": key}),
                    ))
                }
                _ => None,
            })
            .collect();
        let pending = self.start_reads(pending);
        if !notes.is_empty() {
            let count = notes.len() as u64;
            let commit = Commit {
                workflow_id: self.id.clone(),
                after_seq: self.last_seq,
                entries: notes,
                steps: self.step_rows.take(&self.vm),
                ..Commit::default()
            };
            self.inner.commit(commit, None).await?;
            self.last_seq += count;
        }
        for effect in pending {
            self.perform(effect);
        }
        Ok(())
    }

    /// Waits for the next message, then takes every message already
    /// waiting; an empty batch when unwritten step rows fall due first.
    async fn next_batch(&mut self) -> Option<Vec<Incoming>> {
        let first = match self.step_rows.due_at() {
            Some(due) => match tokio::time::timeout_at(due, self.rx.recv()).await {
                Ok(first) => first?,
                Err(_) => return Some(Vec::new()),
            },
            None => self.rx.recv().await?,
        };
        let mut batch = Vec::new();
        self.take(first, &mut batch).await;
        while batch.len() < MAX_ROUND {
            match self.rx.try_recv() {
                Ok(msg) => self.take(msg, &mut batch).await,
                Err(_) => break,
            }
        }
        Some(batch)
    }

    async fn take(&mut self, msg: Msg, batch: &mut Vec<Incoming>) {
        match msg {
            Msg::Deliver(incoming) => batch.push(*incoming),
            Msg::Shutdown(done) => self.shutting_down = Some(done),
            Msg::Lapsed(error) => self.lapsed = Some(error),
            Msg::Inbox => {
                let Ok(messages) = self.inner.store.inbox(Some(&self.id)).await else {
                    return;
                };
                for message in messages {
                    if !self.taken.insert(message.id) {
                        continue;
                    }
                    match serde_json::from_str::<Event>(&message.event) {
                        Ok(event) => batch.push(Incoming {
                            event,
                            reply: None,
                            inbox_id: Some(message.id),
                            external: true,
                            breaker_changes: Vec::new(),
                        }),
                        Err(e) => {
                            tracing::warn!(
                                workflow = %self.id,
                                message = message.id,
                                error = %e,
                                "dropping an unreadable inbox message"
                            );
                        }
                    }
                }
            }
        }
    }

    fn now(&mut self) -> u64 {
        // Never backwards: the VM orders timers by these times.
        self.last_at = now_ms().max(self.last_at);
        self.last_at
    }

    /// Applies a batch and the results of the immediate actions it leads
    /// to, commits it all, then performs the other effects.
    async fn round(&mut self, batch: Vec<Incoming>) -> Result<(), ExecError> {
        let mut round = Round::new(self.now());
        let plan = self.loaded.plan.clone();
        for incoming in batch {
            let step_id = self.step_of(&incoming.event);
            self.apply(&mut round, incoming, step_id, &plan);
        }
        self.run_immediate(&mut round, &plan).await;
        if round.is_empty() && self.create.is_none() && !self.step_rows.is_due() {
            for (reply, result) in round.replies.drain(..) {
                let _ = reply.send(result);
            }
            return Ok(());
        }
        let commit = self.commit_of(&mut round);
        let commit = self.masked(commit).await;
        let appended = commit.entries.len() as u64;
        let releases = self.vm.status().is_terminal();
        let settles = releases || self.vm.status() == RunStatus::Suspended;
        let read_back = self.report_state.filter(|_| settles);
        round.perform = self.start_reads(std::mem::take(&mut round.perform));
        match self.inner.commit(commit, read_back).await {
            Ok(state) => self.settled_state = state.map(Arc::new),
            Err(e) => {
                if matches!(e, crate::store::StoreError::Exists(_)) {
                    // A creation that found the run stored: out of the runs
                    // map before its caller hears, so what the caller sends
                    // next reaches the run, not this task.
                    self.leave();
                }
                let e = ExecError::Store(e);
                for (reply, _) in round.replies.drain(..) {
                    let _ = reply.send(Err(e.clone()));
                }
                return Err(e);
            }
        }
        if read_back.is_some() {
            self.report_state = None;
        }
        self.last_seq += appended;
        self.released = releases;
        self.charge_tree();
        for (reply, result) in round.replies.drain(..) {
            let _ = reply.send(result);
        }
        let status = self.vm.status();
        if status != self.last_status {
            self.last_status = status;
            self.inner.publish(&self.id, status.into(), true, None);
        }
        if round.asked {
            self.inner.publish_asking(&self.id);
        }
        for effect in std::mem::take(&mut round.perform) {
            self.perform(effect);
        }
        Ok(())
    }

    /// Counts what the run has taken in against its tree's byte budget
    /// (`limits.tree_outputs`), cancelling the tree when it passes it: a
    /// run with a parent, or that may start children, is in a tree.
    fn charge_tree(&self) {
        if !self.has_children && self.vm.meta().parent_id.is_none() {
            return;
        }
        let limit = self.inner.config.limits.tree_outputs;
        let bytes = self.vm.output_bytes();
        if let Some(total) = self.inner.trees.charge(&self.id, bytes, limit) {
            super::tree::cancel_over_budget(&self.inner, &self.id, total, limit);
        }
    }

    /// Starts the reads among `effects` before the commit that records
    /// them is written, and gives the other effects back, which wait for it:
    /// a read changes nothing, and its result is applied only in a later
    /// round, after the commit returned (decision 0043). A round and a
    /// restart both start their reads first, so results come back in the
    /// same order either way.
    fn start_reads(&mut self, effects: Vec<Effect>) -> Vec<Effect> {
        let (reads, others): (Vec<Effect>, Vec<Effect>) = effects
            .into_iter()
            .partition(|e| matches!(e, Effect::Dispatch(d) if self.caller.reads_only(d)));
        for read in reads {
            self.perform(read);
        }
        others
    }

    /// Applies one input to the VM and takes what it caused into `round`.
    fn apply(
        &mut self,
        round: &mut Round,
        incoming: Incoming,
        step_id: Option<String>,
        plan: &Plan,
    ) {
        for change in &incoming.breaker_changes {
            let note = log::note(
                &round.at,
                change.event_type,
                step_id.clone(),
                &change.payload,
            );
            round.entries.push(note);
        }
        if let Some(message) = incoming.inbox_id {
            round.inbox_taken.push(message);
        }
        let applied = self.vm.apply_into(
            round.at_ms,
            &incoming.event,
            &self.loaded.host,
            &mut self.scratch,
        );
        match applied {
            Ok(()) => {
                if let (Event::Admitted { refused: None }, Some(key)) =
                    (&incoming.event, self.vm.concurrency_key())
                {
                    let waited = round.at_ms.saturating_sub(self.vm.started_at());
                    self.inner.observer().admitted(key, waited as f64 / 1000.0);
                }
                round.applied(&incoming.event, step_id);
                round.absorb(
                    &mut self.scratch,
                    &incoming.event,
                    plan,
                    &mut self.step_rows,
                );
                self.forget(&incoming.event);
                if let Some(reply) = incoming.reply {
                    round.replies.push((reply, Ok(())));
                }
            }
            Err(rejected) => {
                self.scratch.clear();
                if incoming.external {
                    if incoming.inbox_id.is_some() {
                        round.entries.push(log::note(
                            &round.at,
                            EventName::InputRejected,
                            None,
                            &json!({"event": incoming.event.name(), "reason": rejected.to_string()}),
                        ));
                    }
                    if let Some(reply) = incoming.reply {
                        round
                            .replies
                            .push((reply, Err(ExecError::Refused(rejected.clone()))));
                    }
                }
            }
        }
    }

    /// Runs the round's immediate actions in place and applies their
    /// results in this same round, so that a chain of them (and the run's
    /// start or end around it) costs one commit. Stops when none is left,
    /// no worker slot is free, or the round is full.
    async fn run_immediate(&mut self, round: &mut Round, plan: &Plan) {
        for _ in 0..MAX_ROUND {
            round.drop_cancelled_dispatches();
            let next = round.perform.iter().position(
                |e| matches!(e, Effect::Dispatch(d) if self.caller.immediate(d, &self.id)),
            );
            let Some(at) = next else { return };
            let Some(slot) = self.caller.free_slot() else {
                return;
            };
            let Effect::Dispatch(dispatch) = round.perform.remove(at) else {
                return;
            };
            let step = plan.instance_name(&dispatch.inst);
            let who = self.who.who(&self.id, &step);
            let finished = self.caller.call(&dispatch, &who, Some(slot)).await;
            let incoming = Incoming::finished(dispatch.effect, finished);
            self.apply(round, incoming, Some(step), plan);
        }
    }

    /// `commit` with the run's secret values masked in all it writes: what
    /// the VM made of its steps' outputs (the run's output and error, a
    /// decision's prompt and context, the log's payloads, step rows), so a
    /// value joined from pieces of secret-bearing outputs (two halves in an
    /// `output` template) is masked as a whole (spec/security.md, "Secrets
    /// and the store").
    async fn masked(&self, mut commit: Commit) -> Commit {
        if self.who.secrets.is_empty() {
            return commit;
        }
        let revealed = self.caller.revealed(&self.who.secrets).await;
        if revealed.is_empty() {
            return commit;
        }
        let mask = |text: &mut String| {
            if !text.is_empty() {
                *text = revealed.text(text);
            }
        };
        for entry in &mut commit.entries {
            mask(&mut entry.payload);
        }
        if let Some(update) = &mut commit.update {
            for text in [&mut update.output, &mut update.error, &mut update.context] {
                text.as_mut().map(mask);
            }
        }
        for decision in &mut commit.decisions {
            if let DecisionChange::Ask(row) = decision {
                mask(&mut row.prompt);
                mask(&mut row.context);
            }
        }
        for step in &mut commit.steps {
            step.output.as_mut().map(mask);
            step.error.as_mut().map(mask);
        }
        commit
    }

    fn commit_of(&mut self, round: &mut Round) -> Commit {
        let context = (self.vm.context() != &self.last_context).then(|| {
            self.last_context = self.vm.context().clone();
            self.last_context.clone()
        });
        let changed = self.vm.status() != self.last_status
            || context.is_some()
            || round.started
            || self.create.is_some();
        let update =
            changed.then(|| workflow_update(&self.vm, &round.at, round.started, context.as_ref()));
        // Decision 0042: a running run's step rows wait until it rests or
        // answers a caller (the creation's caller waits for the id only).
        let rests = self.vm.status() != RunStatus::Active
            || round.holds()
            || (round.answers() && self.create.is_none())
            || self.step_rows.is_due();
        let steps = if rests {
            self.step_rows.take(&self.vm)
        } else {
            Vec::new()
        };
        let mut commit = round.commit(&self.id, self.last_seq, steps, update);
        let owner = owner::current().to_owned();
        let ended = self.vm.status().is_terminal();
        match self.create.take() {
            // A run that ends in its first round never holds the lease.
            Some(create) if ended => commit.create = Some(create),
            Some(create) => {
                commit.create = Some(create);
                let ttl = self.inner.config.lease_ttl;
                commit.lease = Some(LeaseChange::Take { owner, ttl });
            }
            // Ending gives the lease up in the same write.
            None if ended => commit.lease = Some(LeaseChange::Release { owner }),
            None => {}
        }
        commit
    }

    /// The step instance an input concerns, for the log's `step_id` column.
    fn step_of(&self, event: &Event) -> Option<String> {
        match event {
            Event::ActionFinished { effect, .. } => {
                self.inflight.get(effect).map(|(_, name)| name.clone())
            }
            Event::ActionAsked(ask) => self.inflight.get(&ask.effect).map(|(_, n)| n.clone()),
            Event::TimerFired { timer } => self.timers.get(timer).and_then(|t| t.2.clone()),
            Event::DecisionResolved { decision, .. } | Event::DecisionCancelled { decision } => {
                Some(decision.clone())
            }
            _ => None,
        }
    }

    /// Drops the bookkeeping of an answered action or a fired timer.
    fn forget(&mut self, event: &Event) {
        match event {
            Event::ActionFinished { effect, .. } => {
                self.inflight.remove(effect);
                self.inner.asks.forget(&self.id, *effect);
            }
            Event::TimerFired { timer } => {
                self.timers.remove(timer);
            }
            _ => {}
        }
    }

    fn perform(&mut self, effect: Effect) {
        match effect {
            Effect::Dispatch(d) => {
                let step = self.loaded.plan.instance_name(&d.inst);
                let effect = d.effect;
                let (caller, tx, run_id, name, facts) = (
                    self.caller.clone(),
                    self.tx.clone(),
                    self.id.clone(),
                    step.clone(),
                    self.who.clone(),
                );
                let handle = tokio::spawn(async move {
                    let who = facts.who(&run_id, &name);
                    let finished = caller.call(&d, &who, None).await;
                    let incoming = Incoming::finished(effect, finished);
                    let _ = tx.send(Msg::Deliver(Box::new(incoming)));
                });
                self.inflight.insert(effect, (handle.abort_handle(), step));
            }
            Effect::CancelDispatch { effect } => {
                if let Some((handle, _)) = self.inflight.remove(&effect) {
                    handle.abort();
                }
                self.inner.asks.forget(&self.id, effect);
            }
            Effect::AnswerAction {
                effect,
                key,
                choice,
            } => self.inner.asks.answer(&self.id, effect, &key, &choice),
            Effect::StartTimer {
                timer, due, inst, ..
            } => {
                let tx = self.tx.clone();
                let wait = Duration::from_millis(due.saturating_sub(now_ms()));
                let handle = tokio::spawn(async move {
                    tokio::time::sleep(wait).await;
                    let _ = tx.send(Msg::Deliver(Box::new(Incoming::fired(timer))));
                });
                let name = inst.map(|i| self.loaded.plan.instance_name(&i));
                self.timers
                    .insert(timer, (handle.abort_handle(), due, name));
            }
            Effect::CancelTimer { timer } => {
                if let Some((handle, _, _)) = self.timers.remove(&timer) {
                    handle.abort();
                }
            }
            Effect::Admit(request) => {
                super::admission::ask(&self.inner, &self.id, request);
            }
            Effect::RequestDecision(_)
            | Effect::CancelDecision { .. }
            | Effect::AwaitSignal { .. }
            | Effect::Record(_) => {}
        }
    }
}
