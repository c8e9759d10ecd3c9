//! An in-memory [`EventStore`] for tests: the same contract as the libSQL
//! store, nothing persisted.

mod catalog;
mod delegated;
mod registry;
mod retention;
mod run_log;
mod slots;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::commit::{self, Write};
use super::{
    AgentRow, BoxFuture, Commit, DecisionChange, DecisionFilter, DecisionRow, DecisionStatus,
    Fence, InboxMessage, LeaseChange, LogEntry, PrunedRow, ScheduleRow, SecretRow, Source, StepRow,
    StoreError, StoreResult, TemplateRow, TimerChange, TimerRow, VaultHeader, WorkflowRow,
    WorkflowStatus, WorkflowUpdate,
};

#[derive(Default, Clone)]
struct State {
    workflows: HashMap<String, WorkflowRow>,
    sources: HashMap<String, Source>,
    blobs: HashMap<String, String>,
    entries: HashMap<String, Vec<LogEntry>>,
    steps: HashMap<String, BTreeMap<String, StepRow>>,
    timers: HashMap<String, BTreeMap<u64, TimerRow>>,
    decisions: BTreeMap<(String, String), DecisionRow>,
    inbox: BTreeMap<i64, InboxMessage>,
    next_message: i64,
    leases: HashMap<String, (String, String)>,
    /// The epoch of each workflow's last lease grant (kept when released).
    epochs: HashMap<String, u64>,
    templates: BTreeMap<(String, i64), TemplateRow>,
    agents: HashMap<String, AgentRow>,
    schedules: BTreeMap<String, ScheduleRow>,
    vault: Option<VaultHeader>,
    secrets: BTreeMap<String, SecretRow>,
    /// What is left of pruned runs, by id.
    pruned: BTreeMap<String, PrunedRow>,
    /// The runs of concurrency keys, by run.
    slots: BTreeMap<String, slots::SlotRow>,
    /// The calls counted in each rate limit window, by key and start.
    windows: BTreeMap<(String, u64), u64>,
    /// The runs debounced triggers will start, by template and key.
    pending: BTreeMap<(String, String), super::PendingStart>,
    /// Worktrees' writer leases and until when (milliseconds), by worktree.
    worktrees: BTreeMap<String, (super::WorktreeLease, u64)>,
    /// Calls' transcripts, by run, step and attempt.
    transcripts: BTreeMap<(String, String, u32), String>,
    /// Agent sessions' turns, oldest first: run, step, turn.
    sessions: BTreeMap<String, Vec<(String, String, String)>>,
    /// Published agent releases, by name and version.
    agent_releases: BTreeMap<(String, String), super::AgentRelease>,
    /// Agents' skills' text, by hash.
    agent_skills: BTreeMap<String, String>,
    agent_evals: BTreeMap<(String, String), super::AgentEval>,
    /// Why writes are refused, while they are (a full disk, for tests).
    refusing: Option<String>,
    /// Copies of the whole store after each commit, while they are kept.
    snapshots: Option<Vec<State>>,
}

/// The in-memory store.
#[derive(Default)]
pub struct MemoryStore {
    state: Mutex<State>,
    /// While commits are held (a slow disk, for tests): those sent
    /// meanwhile, in the order they were sent, with where each answer goes.
    held: Mutex<Option<Vec<HeldCommit>>>,
}

/// A commit waiting for [`MemoryStore::hold_commits`] to let go.
type HeldCommit = (Commit, tokio::sync::oneshot::Sender<StoreResult<()>>);

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore").finish_non_exhaustive()
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// Refuses every commit and lease write with `why` from now on, as a
    /// full disk would (`None`: takes them again), so tests can drive the
    /// executor through a storage outage.
    pub fn refuse_writes(&self, why: Option<&str>) {
        self.lock().refusing = why.map(str::to_owned);
    }

    /// Holds every commit from now on until called with `false`, as a
    /// slow disk would, so tests can see what runs while a commit is
    /// written; then writes them in the order they were sent.
    pub fn hold_commits(&self, hold: bool) {
        let mut queue = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if hold {
            queue.get_or_insert_with(Vec::new);
            return;
        }
        for (commit, answer) in queue.take().unwrap_or_default() {
            let _ = answer.send(self.write(&commit));
        }
    }

    /// Writes `commit` now, all or nothing (`apply` checks everything
    /// before it changes anything), unless writes are refused.
    fn write(&self, commit: &Commit) -> StoreResult<()> {
        self.refused()?;
        let mut state = self.lock();
        state.apply(commit)?;
        if let Some(mut kept) = state.snapshots.take() {
            kept.push(state.clone());
            state.snapshots = Some(kept);
        }
        Ok(())
    }

    /// Keeps a copy of the whole store after every commit from now on:
    /// each is how the store would be found had the process died right
    /// after that commit (see [`MemoryStore::snapshots`]).
    pub fn keep_snapshots(&self) {
        self.lock().snapshots.get_or_insert_with(Vec::new);
    }

    /// The copies kept since [`MemoryStore::keep_snapshots`], oldest first,
    /// each a store of its own.
    pub fn snapshots(&self) -> Vec<MemoryStore> {
        let kept = self.lock().snapshots.clone().unwrap_or_default();
        kept.into_iter()
            .map(|state| MemoryStore {
                state: Mutex::new(state),
                ..MemoryStore::default()
            })
            .collect()
    }

    /// Lets every lease expire, as time does after its owner died.
    pub fn expire_leases(&self) {
        for (_, until) in self.lock().leases.values_mut() {
            crate::time::rfc3339(0).clone_into(until);
        }
    }

    /// The refusal of a write while writes are refused.
    fn refused(&self) -> StoreResult<()> {
        match &self.lock().refusing {
            Some(why) => Err(StoreError::Backend(why.clone())),
            None => Ok(()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn ready<'a, T: Send + 'a>(value: T) -> BoxFuture<'a, T> {
    Box::pin(std::future::ready(value))
}

impl State {
    /// Registers an agent, or notes it was seen again.
    fn see_agent(&mut self, id: &str, at: &str) {
        let agent = self
            .agents
            .entry(id.to_owned())
            .or_insert_with(|| AgentRow {
                id: id.to_owned(),
                created_at: at.to_owned(),
                last_seen_at: String::new(),
            });
        if agent.last_seen_at.as_str() < at {
            at.clone_into(&mut agent.last_seen_at);
        }
    }

    /// Grants the lease of `id` to `owner` for `ttl`, at the next epoch
    /// unless `owner` holds it already; returns the epoch.
    fn grant(&mut self, id: &str, owner: &str, ttl: std::time::Duration) -> u64 {
        let until = crate::time::from_now(ttl);
        let held = self.leases.get(id).is_some_and(|(by, _)| by == owner);
        let epoch = self.epochs.entry(id.to_owned()).or_insert(0);
        if !held {
            *epoch += 1;
        }
        let epoch = *epoch;
        self.leases.insert(id.to_owned(), (owner.to_owned(), until));
        epoch
    }

    /// The newest version of template `name`.
    fn latest_version(&self, name: &str) -> Option<i64> {
        let range = (name.to_owned(), i64::MIN)..=(name.to_owned(), i64::MAX);
        self.templates
            .range(range)
            .next_back()
            .map(|((_, v), _)| *v)
    }

    /// Makes the writes of `c` ([`commit::plan`]): every refusal is
    /// checked before anything changes.
    fn apply(&mut self, c: &Commit) -> StoreResult<()> {
        let id = c.workflow_id.as_str();
        let writes = commit::plan(c)?;
        for write in &writes {
            self.check(id, write)?;
        }
        for write in writes {
            self.perform(id, write);
        }
        Ok(())
    }

    /// The refusal `write` gives, if any.
    fn check(&self, id: &str, write: &Write<'_>) -> StoreResult<()> {
        match *write {
            Write::RequireLatest { template, version }
                if self
                    .latest_version(template)
                    .is_some_and(|latest| latest > version) =>
            {
                return Err(StoreError::Outdated(template.to_owned()));
            }
            Write::Create { new, .. } if self.workflows.contains_key(&new.id) => {
                return Err(StoreError::Exists(new.id.clone()));
            }
            Write::Advance { from, .. } => match self.workflows.get(id) {
                Some(w) if w.last_seq == from => {}
                Some(w) => {
                    return Err(StoreError::Conflict {
                        id: id.to_owned(),
                        expected: from,
                        actual: w.last_seq,
                    });
                }
                None => return Err(StoreError::NotFound(id.to_owned())),
            },
            Write::Update(_) | Write::Fence(_) if !self.workflows.contains_key(id) => {
                return Err(StoreError::NotFound(id.to_owned()));
            }
            Write::Fence(Fence { owner, epoch })
                if self
                    .leases
                    .get(id)
                    .is_none_or(|(held_by, _)| held_by != owner)
                    || self.epochs.get(id) != Some(epoch) =>
            {
                return Err(StoreError::Fenced(id.to_owned()));
            }
            _ => {}
        }
        Ok(())
    }

    /// Makes one checked write.
    fn perform(&mut self, id: &str, write: Write<'_>) {
        match write {
            Write::RequireLatest { .. } | Write::Fence(_) => {}
            Write::Create {
                new,
                update,
                last_seq,
                lease,
            } => {
                self.sources
                    .entry(new.source.hash.clone())
                    .or_insert_with(|| new.source.clone());
                let mut row = WorkflowRow {
                    id: new.id.clone(),
                    name: new.name.clone(),
                    source_hash: new.source.hash.clone(),
                    status: WorkflowStatus::Pending,
                    inputs: new.inputs.clone(),
                    agent_id: new.agent_id.clone(),
                    parent_id: new.parent_id.clone(),
                    template_name: new.template_name.clone(),
                    template_version: new.template_version,
                    base_dir: new.base_dir.clone(),
                    last_seq,
                    updated_at: new.created_at.clone(),
                    created_at: new.created_at.clone(),
                    ..WorkflowRow::default()
                };
                if let Some(u) = update {
                    set_state(&mut row, u);
                }
                self.workflows.insert(new.id.clone(), row);
                if let Some(agent) = &new.agent_id {
                    self.see_agent(agent, &new.created_at);
                }
                if let Some((owner, ttl)) = lease {
                    self.grant(id, owner, ttl);
                }
            }
            Write::Advance { to, update, .. } => {
                if let Some(w) = self.workflows.get_mut(id) {
                    w.last_seq = to;
                    if let Some(u) = update {
                        set_state(w, u);
                    }
                }
            }
            Write::Update(u) => {
                if let Some(w) = self.workflows.get_mut(id) {
                    set_state(w, u);
                }
            }
            Write::PutBlobs(blobs) => {
                for b in blobs {
                    self.blobs
                        .entry(b.hash.clone())
                        .or_insert_with(|| b.text.clone());
                }
            }
            Write::Append { first_seq, entries } => {
                let log = self.entries.entry(id.to_owned()).or_default();
                log.extend(
                    entries
                        .iter()
                        .zip(first_seq..)
                        .map(|(e, seq)| e.stored(seq)),
                );
            }
            Write::PutSteps(rows) => {
                let steps = self.steps.entry(id.to_owned()).or_default();
                for row in rows {
                    let mut s = row.clone();
                    if let Some(old) = steps.get(&s.step_id) {
                        s.started_at = old.started_at.clone().or(s.started_at);
                    }
                    s.duration_ms =
                        commit::step_duration(s.started_at.as_deref(), s.completed_at.as_deref());
                    steps.insert(s.step_id.clone(), s);
                }
            }
            Write::Timer(TimerChange::Set(t)) => {
                let timers = self.timers.entry(id.to_owned()).or_default();
                timers.insert(t.timer_id, t.clone());
            }
            Write::Timer(TimerChange::Clear(timer)) => {
                if let Some(timers) = self.timers.get_mut(id) {
                    timers.remove(timer);
                }
            }
            Write::Decision(DecisionChange::Ask(d)) => {
                let mut d = (**d).clone();
                id.clone_into(&mut d.workflow_id);
                d.status = DecisionStatus::Pending;
                self.decisions.insert((id.to_owned(), d.id.clone()), d);
            }
            Write::Decision(DecisionChange::Settle {
                id: decision,
                status,
                resolution,
                resolved_by,
                at,
            }) => {
                if let Some(d) = self
                    .decisions
                    .get_mut(&(id.to_owned(), decision.clone()))
                    .filter(|d| d.status == DecisionStatus::Pending)
                {
                    d.status = *status;
                    d.resolution.clone_from(resolution);
                    d.resolved_by.clone_from(resolved_by);
                    d.resolved_at = Some(at.clone());
                }
            }
            Write::TakeInbox(message) => {
                self.inbox.remove(&message);
            }
            Write::Lease(LeaseChange::Take { owner, ttl }) => {
                self.grant(id, owner, *ttl);
            }
            Write::Lease(LeaseChange::Release { owner }) => {
                if self
                    .leases
                    .get(id)
                    .is_some_and(|(held_by, _)| held_by == owner)
                {
                    self.leases.remove(id);
                }
            }
        }
    }
}

/// Sets a workflow's derived state: `context` and `completed_at` only when
/// given, `started_at` only the first time.
fn set_state(w: &mut WorkflowRow, u: &WorkflowUpdate) {
    w.status.clone_from(&u.status);
    w.output.clone_from(&u.output);
    w.error.clone_from(&u.error);
    if u.context.is_some() {
        w.context.clone_from(&u.context);
    }
    if w.started_at.is_none() {
        w.started_at.clone_from(&u.started_at);
    }
    if u.completed_at.is_some() {
        w.completed_at.clone_from(&u.completed_at);
    }
    w.updated_at.clone_from(&u.updated_at);
}

impl State {
    /// The decisions `filter` names, unpaged, oldest first.
    fn decision_rows(&self, filter: &DecisionFilter) -> Vec<DecisionRow> {
        let mut rows: Vec<DecisionRow> = self
            .decisions
            .values()
            .filter(|d| {
                filter
                    .workflow_id
                    .as_ref()
                    .is_none_or(|w| &d.workflow_id == w)
            })
            .filter(|d| filter.status.is_none_or(|s| d.status == s))
            .filter(|d| {
                filter.agent_id.is_none()
                    || d.target_agent.is_none()
                    || d.target_agent == filter.agent_id
            })
            .cloned()
            .collect();
        rows.sort_by(|a, b| {
            (&a.created_at, &a.workflow_id, &a.id).cmp(&(&b.created_at, &b.workflow_id, &b.id))
        });
        rows
    }
}

/// `rows` after skipping `offset`, at most `limit` of them.
fn page<T>(rows: Vec<T>, limit: Option<u32>, offset: u32) -> Vec<T> {
    rows.into_iter()
        .skip(offset as usize)
        .take(limit.map_or(usize::MAX, |l| l as usize))
        .collect()
}
