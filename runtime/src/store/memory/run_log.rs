//! The in-memory store's runs: commits, reads, leases, timers and mail.

use std::collections::{BTreeMap, HashMap};
use std::sync::PoisonError;

use super::{MemoryStore, page, ready};
use crate::store::{
    Backlog, BoxFuture, Claim, Commit, DecisionFilter, DecisionRow, DecisionStatus, InboxMessage,
    LogEntry, RunLog, Source, StepRow, StoreError, StoreResult, WorkflowFilter, WorkflowRow,
    WorkflowStatus,
};

impl RunLog for MemoryStore {
    /// Written when called (not when first polled), so that commits land
    /// in the order they were sent; while commits are held, queued in that
    /// order.
    fn commit(&self, commit: Commit) -> BoxFuture<'_, StoreResult<()>> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(queue) = held.as_mut() else {
            return ready(self.write(&commit));
        };
        let (answer, answered) = tokio::sync::oneshot::channel();
        queue.push((commit, answer));
        Box::pin(async move { answered.await.unwrap_or(Err(StoreError::Closed)) })
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
                    .filter(|e| !inputs_only || e.kind == crate::store::EntryKind::Input)
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
