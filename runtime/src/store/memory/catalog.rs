//! The in-memory store's catalog: templates, agents, schedules, the vault,
//! listings and counts.

use std::collections::BTreeMap;

use super::{MemoryStore, page, ready};
use crate::store::{
    AgentRow, BoxFuture, Catalog, DecisionFilter, DecisionRow, EventFilter, Expiry, FoundEntry,
    Listing, Prune, PrunedFilter, PrunedRow, RunLog, ScheduleAdvance, ScheduleRow, SecretRow,
    StoreHealth, StoreResult, TemplateDraft, TemplateFilter, TemplateRow, VaultHeader,
    WorkflowFilter, WorkflowStatus,
};

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
