//! An in-memory [`EventStore`] for tests: the same contract as the libSQL
//! store, nothing persisted.

mod retention;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};

use super::commit::{self, Write};
use super::{
    AgentRow, Backlog, BoxFuture, Catalog, Claim, Commit, DecisionChange, DecisionFilter,
    DecisionRow, DecisionStatus, EventFilter, Expiry, Fence, FoundEntry, InboxMessage, LeaseChange,
    Listing, LogEntry, Prune, PrunedFilter, PrunedRow, RunLog, ScheduleAdvance, ScheduleRow,
    SecretRow, Source, StepRow, StoreError, StoreHealth, StoreResult, TemplateDraft,
    TemplateFilter, TemplateRow, TimerChange, TimerRow, VaultHeader, WorkflowFilter, WorkflowRow,
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
    /// Why writes are refused, while they are (a full disk, for tests).
    refusing: Option<String>,
    /// Copies of the whole store after each commit, while they are kept.
    snapshots: Option<Vec<State>>,
}

/// The in-memory store.
#[derive(Default)]
pub struct MemoryStore {
    state: Mutex<State>,
    /// True while commits are held (a slow disk, for tests).
    holding: tokio::sync::watch::Sender<bool>,
}

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
    /// written.
    pub fn hold_commits(&self, hold: bool) {
        self.holding.send_replace(hold);
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
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
        at.clone_into(&mut agent.last_seen_at);
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

impl RunLog for MemoryStore {
    fn commit(&self, commit: Commit) -> BoxFuture<'_, StoreResult<()>> {
        let mut holding = self.holding.subscribe();
        Box::pin(async move {
            let _ = holding.wait_for(|held| !held).await;
            // `apply` checks everything before it changes anything: all or nothing.
            self.refused()?;
            let mut state = self.lock();
            state.apply(&commit)?;
            if let Some(mut kept) = state.snapshots.take() {
                kept.push(state.clone());
                state.snapshots = Some(kept);
            }
            Ok(())
        })
    }

    fn workflow<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<WorkflowRow>>> {
        ready(Ok(self.lock().workflows.get(id).cloned()))
    }

    fn source<'a>(&'a self, hash: &'a str) -> BoxFuture<'a, StoreResult<Option<Source>>> {
        ready(Ok(self.lock().sources.get(hash).cloned()))
    }

    fn blob<'a>(&'a self, hash: &'a str) -> BoxFuture<'a, StoreResult<Option<String>>> {
        ready(Ok(self.lock().blobs.get(hash).cloned()))
    }

    fn workflows(&self, filter: WorkflowFilter) -> BoxFuture<'_, StoreResult<Vec<WorkflowRow>>> {
        let state = self.lock();
        let same = |want: &Option<String>, have: &Option<String>| want.is_none() || want == have;
        let mut rows: Vec<WorkflowRow> = state
            .workflows
            .values()
            .filter(|w| filter.statuses.is_empty() || filter.statuses.contains(&w.status))
            .filter(|w| same(&filter.agent_id, &w.agent_id))
            .filter(|w| same(&filter.template_name, &w.template_name))
            .filter(|w| same(&filter.parent_id, &w.parent_id))
            .filter(|w| {
                filter
                    .since
                    .as_ref()
                    .is_none_or(|since| &w.created_at >= since)
            })
            .filter(|w| {
                filter
                    .until
                    .as_ref()
                    .is_none_or(|until| &w.created_at < until)
            })
            .filter(|w| {
                filter
                    .id_contains
                    .as_ref()
                    .is_none_or(|part| w.id.contains(part.as_str()))
            })
            .cloned()
            .collect();
        rows.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
        ready(Ok(page(rows, filter.limit, filter.offset)))
    }

    fn entries<'a>(
        &'a self,
        id: &'a str,
        after_seq: u64,
        inputs_only: bool,
    ) -> BoxFuture<'a, StoreResult<Vec<LogEntry>>> {
        let state = self.lock();
        let rows = state
            .entries
            .get(id)
            .map(|log| {
                log.iter()
                    .filter(|e| e.seq > after_seq)
                    .filter(|e| !inputs_only || e.kind == super::EntryKind::Input)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        ready(Ok(rows))
    }

    fn steps<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Vec<StepRow>>> {
        let state = self.lock();
        let mut rows: Vec<StepRow> = state
            .steps
            .get(id)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default();
        rows.sort_by(|a, b| {
            a.started_at
                .cmp(&b.started_at)
                .then(a.step_id.cmp(&b.step_id))
        });
        ready(Ok(rows))
    }

    fn decisions<'a>(
        &'a self,
        workflow_id: Option<&'a str>,
        status: Option<DecisionStatus>,
    ) -> BoxFuture<'a, StoreResult<Vec<DecisionRow>>> {
        let filter = DecisionFilter {
            workflow_id: workflow_id.map(str::to_owned),
            status,
            ..DecisionFilter::default()
        };
        ready(Ok(self.lock().decision_rows(&filter)))
    }

    fn next_timers(&self, limit: u32) -> BoxFuture<'_, StoreResult<Vec<(String, String)>>> {
        let state = self.lock();
        let mut rows: Vec<(String, String)> = state
            .timers
            .iter()
            .filter_map(|(id, timers)| {
                timers
                    .values()
                    .map(|t| t.due_at.clone())
                    .min()
                    .map(|due| (id.clone(), due))
            })
            .collect();
        rows.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)));
        rows.truncate(limit as usize);
        ready(Ok(rows))
    }

    fn send<'a>(
        &'a self,
        workflow_id: &'a str,
        event: String,
        at: String,
    ) -> BoxFuture<'a, StoreResult<i64>> {
        let mut state = self.lock();
        state.next_message += 1;
        let id = state.next_message;
        state.inbox.insert(
            id,
            InboxMessage {
                id,
                workflow_id: workflow_id.to_owned(),
                event,
                created_at: at,
            },
        );
        ready(Ok(id))
    }

    fn inbox<'a>(
        &'a self,
        workflow_id: Option<&'a str>,
    ) -> BoxFuture<'a, StoreResult<Vec<InboxMessage>>> {
        let state = self.lock();
        let rows = state
            .inbox
            .values()
            .filter(|m| workflow_id.is_none_or(|w| m.workflow_id == w))
            .cloned()
            .collect();
        ready(Ok(rows))
    }

    fn claim<'a>(
        &'a self,
        id: &'a str,
        owner: &'a str,
        take_from: Option<&'a str>,
        ttl: std::time::Duration,
    ) -> BoxFuture<'a, StoreResult<Claim>> {
        if let Err(refused) = self.refused() {
            return ready(Err(refused));
        }
        let now = crate::time::rfc3339(crate::time::now_ms());
        let mut state = self.lock();
        let claim = match state.leases.get(id) {
            Some((held_by, expires))
                if held_by != owner && *expires >= now && Some(held_by.as_str()) != take_from =>
            {
                Claim::Held {
                    owner: held_by.clone(),
                    expires_at: expires.clone(),
                }
            }
            // A lease is kept on the workflow's row: only one that exists.
            _ if !state.workflows.contains_key(id) => Claim::Granted { epoch: 0 },
            _ => Claim::Granted {
                epoch: state.grant(id, owner, ttl),
            },
        };
        ready(Ok(claim))
    }

    fn renew<'a>(
        &'a self,
        owner: &'a str,
        ttl: std::time::Duration,
    ) -> BoxFuture<'a, StoreResult<()>> {
        if let Err(refused) = self.refused() {
            return ready(Err(refused));
        }
        let until = crate::time::from_now(ttl);
        let state = &mut *self.lock();
        for (id, (held_by, expires)) in &mut state.leases {
            let ended = state.workflows.get(id).is_none_or(|w| w.status.is_ended());
            if held_by == owner && !ended {
                until.clone_into(expires);
            }
        }
        ready(Ok(()))
    }

    fn orphans(&self, limit: u32) -> BoxFuture<'_, StoreResult<Vec<String>>> {
        let now = crate::time::rfc3339(crate::time::now_ms());
        let state = self.lock();
        let mut found: Vec<&WorkflowRow> = state
            .workflows
            .values()
            .filter(|w| matches!(w.status, WorkflowStatus::Pending | WorkflowStatus::Active))
            .filter(|w| {
                state
                    .leases
                    .get(&w.id)
                    .is_none_or(|(_, until)| *until < now)
            })
            .collect();
        found.sort_by(|a, b| (&a.created_at, &a.id).cmp(&(&b.created_at, &b.id)));
        let mut turns: HashMap<Option<&str>, usize> = HashMap::new();
        let mut ranked: Vec<(usize, &WorkflowRow)> = found
            .into_iter()
            .map(|w| {
                let turn = turns.entry(w.agent_id.as_deref()).or_default();
                *turn += 1;
                (*turn, w)
            })
            .collect();
        ranked.sort_by(|(ta, a), (tb, b)| (ta, &a.created_at).cmp(&(tb, &b.created_at)));
        let ids = ranked
            .into_iter()
            .take(limit as usize)
            .map(|(_, w)| w.id.clone())
            .collect();
        ready(Ok(ids))
    }

    fn backlog(&self) -> BoxFuture<'_, StoreResult<Backlog>> {
        let now_ms = crate::time::now_ms();
        let now = crate::time::rfc3339(now_ms);
        let state = self.lock();
        let mut backlog = Backlog::default();
        let mut oldest = now_ms;
        let mut leases: BTreeMap<String, u64> = BTreeMap::new();
        for w in state.workflows.values() {
            let lease = state.leases.get(&w.id).filter(|(_, until)| *until >= now);
            if let Some((owner, _)) = lease {
                *leases.entry(owner.clone()).or_default() += 1;
            } else if matches!(w.status, WorkflowStatus::Pending | WorkflowStatus::Active) {
                backlog.runnable += 1;
                let lapsed = state
                    .leases
                    .get(&w.id)
                    .map_or(&w.updated_at, |(_, until)| until);
                oldest = oldest.min(crate::time::parse_ms(lapsed).unwrap_or(now_ms));
            }
        }
        for timer in state.timers.values().flat_map(BTreeMap::values) {
            if timer.due_at <= now {
                backlog.timers_due += 1;
                oldest = oldest.min(crate::time::parse_ms(&timer.due_at).unwrap_or(now_ms));
            }
        }
        backlog.oldest_seconds = (now_ms - oldest) as f64 / 1000.0;
        backlog.leases = leases.into_iter().collect();
        ready(Ok(backlog))
    }

    fn release<'a>(&'a self, id: &'a str, owner: &'a str) -> BoxFuture<'a, StoreResult<()>> {
        let mut state = self.lock();
        if state
            .leases
            .get(id)
            .is_some_and(|(held_by, _)| held_by == owner)
        {
            state.leases.remove(id);
        }
        ready(Ok(()))
    }
}

impl Catalog for MemoryStore {
    fn define_template(&self, draft: TemplateDraft) -> BoxFuture<'_, StoreResult<TemplateRow>> {
        let mut state = self.lock();
        let version = state
            .templates
            .range((draft.name.clone(), i64::MIN)..=(draft.name.clone(), i64::MAX))
            .next_back()
            .map_or(1, |((_, v), _)| v + 1);
        let row = TemplateRow {
            name: draft.name,
            version,
            description: draft.description,
            definition: draft.definition,
            input_schema: draft.input_schema,
            output_schema: draft.output_schema,
            triggers: draft.triggers,
            agent_id: draft.agent_id,
            created_at: draft.at,
        };
        state
            .templates
            .insert((row.name.clone(), version), row.clone());
        ready(Ok(row))
    }

    fn template<'a>(
        &'a self,
        name: &'a str,
        version: Option<i64>,
    ) -> BoxFuture<'a, StoreResult<Option<TemplateRow>>> {
        let state = self.lock();
        let range = (name.to_owned(), i64::MIN)..=(name.to_owned(), i64::MAX);
        let found = match version {
            Some(v) => state.templates.get(&(name.to_owned(), v)),
            None => state.templates.range(range).next_back().map(|(_, t)| t),
        };
        ready(Ok(found.cloned()))
    }

    fn templates(&self, filter: TemplateFilter) -> BoxFuture<'_, StoreResult<Vec<TemplateRow>>> {
        let state = self.lock();
        let mut rows: Vec<TemplateRow> = Vec::new();
        // Keys sort by name, then version ascending: walk backwards per name.
        for ((name, _), row) in state.templates.iter().rev() {
            if filter.name.as_ref().is_some_and(|n| n != name)
                || filter.agent_id.is_some() && filter.agent_id != row.agent_id
                || filter.latest_only && rows.last().is_some_and(|r| &r.name == name)
            {
                continue;
            }
            rows.push(row.clone());
        }
        rows.sort_by(|a, b| a.name.cmp(&b.name).then(b.version.cmp(&a.version)));
        ready(Ok(page(rows, filter.limit, filter.offset)))
    }

    fn count(&self, listing: Listing) -> BoxFuture<'_, StoreResult<u64>> {
        Box::pin(async move {
            // The whole listing, unpaged: memory holds it anyway.
            Ok(match listing {
                Listing::Workflows(filter) => {
                    let all = WorkflowFilter {
                        limit: None,
                        offset: 0,
                        ..filter
                    };
                    self.workflows(all).await?.len()
                }
                Listing::Templates(filter) => {
                    let all = TemplateFilter {
                        limit: None,
                        offset: 0,
                        ..filter
                    };
                    self.templates(all).await?.len()
                }
                Listing::Entries(filter) => {
                    let all = EventFilter {
                        limit: None,
                        offset: 0,
                        ..filter
                    };
                    self.find_entries(all).await?.len()
                }
                Listing::Pruned(filter) => self.lock().pruned_rows(&filter).len(),
                Listing::Decisions(filter) => self.lock().decision_rows(&filter).len(),
            } as u64)
        })
    }

    fn find_entries(&self, filter: EventFilter) -> BoxFuture<'_, StoreResult<Vec<FoundEntry>>> {
        let state = self.lock();
        let mut rows: Vec<FoundEntry> = state
            .entries
            .iter()
            .filter(|(id, _)| filter.workflow_id.as_ref().is_none_or(|w| w == *id))
            .flat_map(|(id, log)| {
                log.iter().map(move |e| FoundEntry {
                    workflow_id: id.clone(),
                    entry: e.clone(),
                })
            })
            .filter(|f| {
                filter
                    .event_type
                    .as_ref()
                    .is_none_or(|t| *t == f.entry.event_type)
            })
            .filter(|f| filter.step_id.is_none() || filter.step_id == f.entry.step_id)
            .filter(|f| filter.since.as_ref().is_none_or(|s| f.entry.at >= *s))
            .collect();
        if filter.workflow_id.is_some() {
            rows.sort_by_key(|f| f.entry.seq);
        } else {
            rows.sort_by(|a, b| {
                (b.entry.at.as_str(), &b.workflow_id, b.entry.seq).cmp(&(
                    a.entry.at.as_str(),
                    &a.workflow_id,
                    a.entry.seq,
                ))
            });
        }
        ready(Ok(page(rows, filter.limit, filter.offset)))
    }

    fn touch_agent<'a>(&'a self, id: &'a str, at: &'a str) -> BoxFuture<'a, StoreResult<()>> {
        self.lock().see_agent(id, at);
        ready(Ok(()))
    }

    fn agents(&self) -> BoxFuture<'_, StoreResult<Vec<AgentRow>>> {
        let mut rows: Vec<AgentRow> = self.lock().agents.values().cloned().collect();
        rows.sort_by(|a, b| b.last_seen_at.cmp(&a.last_seen_at).then(a.id.cmp(&b.id)));
        ready(Ok(rows))
    }

    fn workflow_counts(&self) -> BoxFuture<'_, StoreResult<Vec<(WorkflowStatus, u64)>>> {
        let mut counts = BTreeMap::<&'static str, (WorkflowStatus, u64)>::new();
        for w in self.lock().workflows.values() {
            counts.entry(w.status.as_str()).or_insert((w.status, 0)).1 += 1;
        }
        ready(Ok(counts.into_values().collect()))
    }

    fn save_schedule(&self, job: ScheduleRow) -> BoxFuture<'_, StoreResult<()>> {
        self.lock().schedules.insert(job.id.clone(), job);
        ready(Ok(()))
    }

    fn schedules(&self) -> BoxFuture<'_, StoreResult<Vec<ScheduleRow>>> {
        let mut rows: Vec<ScheduleRow> = self.lock().schedules.values().cloned().collect();
        rows.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        ready(Ok(rows))
    }

    fn delete_schedule<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        ready(Ok(self.lock().schedules.remove(id).is_some()))
    }

    fn vault_header(&self) -> BoxFuture<'_, StoreResult<Option<VaultHeader>>> {
        ready(Ok(self.lock().vault.clone()))
    }

    fn create_vault(&self, header: VaultHeader) -> BoxFuture<'_, StoreResult<VaultHeader>> {
        ready(Ok(self.lock().vault.get_or_insert(header).clone()))
    }

    fn put_secret(&self, mut secret: SecretRow) -> BoxFuture<'_, StoreResult<()>> {
        let mut state = self.lock();
        if let Some(old) = state.secrets.get(&secret.name) {
            secret.created_at.clone_from(&old.created_at);
        }
        state.secrets.insert(secret.name.clone(), secret);
        ready(Ok(()))
    }

    fn secrets(&self) -> BoxFuture<'_, StoreResult<Vec<SecretRow>>> {
        ready(Ok(self.lock().secrets.values().cloned().collect()))
    }

    fn delete_secret<'a>(&'a self, name: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        ready(Ok(self.lock().secrets.remove(name).is_some()))
    }

    fn expired(&self, expiry: Expiry) -> BoxFuture<'_, StoreResult<Vec<String>>> {
        ready(Ok(self.lock().expired(&expiry)))
    }

    fn prune(&self, runs: Vec<Prune>, at: String) -> BoxFuture<'_, StoreResult<Vec<String>>> {
        let refused = self.refused();
        ready(refused.map(|()| self.lock().prune(runs, &at)))
    }

    fn decision_page(
        &self,
        filter: DecisionFilter,
    ) -> BoxFuture<'_, StoreResult<Vec<DecisionRow>>> {
        let rows = self.lock().decision_rows(&filter);
        ready(Ok(page(rows, filter.limit, filter.offset)))
    }

    fn forget_pruned(&self, before: String) -> BoxFuture<'_, StoreResult<u64>> {
        let mut state = self.lock();
        let had = state.pruned.len();
        state.pruned.retain(|_, row| row.pruned_at >= before);
        ready(Ok((had - state.pruned.len()) as u64))
    }

    fn pruned(&self, filter: PrunedFilter) -> BoxFuture<'_, StoreResult<Vec<PrunedRow>>> {
        let rows = self.lock().pruned_rows(&filter);
        ready(Ok(page(rows, filter.limit, filter.offset)))
    }

    fn health(&self) -> BoxFuture<'_, StoreResult<StoreHealth>> {
        let newest_run_at = self
            .lock()
            .workflows
            .values()
            .map(|w| w.created_at.clone())
            .max();
        ready(Ok(StoreHealth {
            schema_version: 0,
            journal_mode: None,
            synchronous: None,
            newest_run_at,
            clock: crate::time::rfc3339(crate::time::now_ms()),
        }))
    }

    fn advance_schedule(&self, advance: ScheduleAdvance) -> BoxFuture<'_, StoreResult<bool>> {
        let mut state = self.lock();
        let Some(job) = state
            .schedules
            .get_mut(&advance.id)
            .filter(|job| job.next_run_at == advance.expected_next)
        else {
            return ready(Ok(false));
        };
        job.next_run_at = advance.next_run_at;
        if advance.last_run_at.is_some() {
            job.last_run_at = advance.last_run_at;
        }
        if advance.last_workflow_id.is_some() {
            job.last_workflow_id = advance.last_workflow_id;
        }
        if advance.last_run_status.is_some() {
            job.last_run_status = advance.last_run_status;
        }
        ready(Ok(true))
    }

    fn set_schedule_status<'a>(
        &'a self,
        id: &'a str,
        workflow_id: &'a str,
        status: &'a str,
    ) -> BoxFuture<'a, StoreResult<()>> {
        if let Some(job) = self
            .lock()
            .schedules
            .get_mut(id)
            .filter(|job| job.last_workflow_id.as_deref() == Some(workflow_id))
        {
            job.last_run_status = Some(status.to_owned());
        }
        ready(Ok(()))
    }
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
