//! Retention in the in-memory store: the same selection the SQL backends
//! make with a window function, and pruning with its tombstones.

use std::collections::HashMap;

use super::State;
use crate::store::{Expiry, Prune, PrunedFilter, PrunedRow, WorkflowRow};

/// When a finished run ended, as the SQL backends read it.
fn ended_at(row: &WorkflowRow) -> &str {
    row.completed_at.as_deref().unwrap_or(&row.updated_at)
}

impl State {
    /// The finished runs `expiry` lets go, oldest first.
    pub(super) fn expired(&self, expiry: &Expiry) -> Vec<String> {
        let mut by_template: HashMap<&str, Vec<&WorkflowRow>> = HashMap::new();
        for row in self.workflows.values().filter(|w| w.status.is_ended()) {
            let group = row.template_name.as_deref().unwrap_or(&row.name);
            by_template.entry(group).or_default().push(row);
        }
        let mut expired: Vec<&WorkflowRow> = Vec::new();
        for mut rows in by_template.into_values() {
            rows.sort_by(|a, b| ended_at(b).cmp(ended_at(a)).then(b.id.cmp(&a.id)));
            for (rank, row) in rows.into_iter().enumerate() {
                let too_old = expiry
                    .ended_before
                    .as_deref()
                    .is_some_and(|before| ended_at(row) < before);
                let too_many = expiry.keep_last.is_some_and(|keep| rank >= keep as usize);
                if too_old || too_many {
                    expired.push(row);
                }
            }
        }
        expired.sort_by(|a, b| ended_at(a).cmp(ended_at(b)).then(a.id.cmp(&b.id)));
        expired
            .into_iter()
            .take(expiry.limit as usize)
            .map(|row| row.id.clone())
            .collect()
    }

    /// Deletes the runs of `runs` that have ended, leaving tombstones.
    pub(super) fn prune(&mut self, runs: Vec<Prune>, at: &str) -> Vec<String> {
        let mut deleted = Vec::new();
        for run in runs {
            let Some(row) = self.workflows.get(&run.id) else {
                continue;
            };
            if !row.status.is_ended() {
                continue;
            }
            let tombstone = PrunedRow {
                id: row.id.clone(),
                name: row.name.clone(),
                template_name: row.template_name.clone(),
                template_version: row.template_version,
                status: row.status,
                agent_id: row.agent_id.clone(),
                parent_workflow_id: row.parent_id.clone(),
                created_at: row.created_at.clone(),
                completed_at: row.completed_at.clone(),
                pruned_at: at.to_owned(),
                export: run.export,
            };
            let id = run.id;
            self.workflows.remove(&id);
            self.entries.remove(&id);
            self.transcripts
                .retain(|(workflow, _, _), _| workflow != &id);
            self.steps.remove(&id);
            self.timers.remove(&id);
            self.leases.remove(&id);
            self.epochs.remove(&id);
            self.decisions.retain(|(workflow, _), _| workflow != &id);
            self.inbox.retain(|_, message| message.workflow_id != id);
            self.pruned.insert(id.clone(), tombstone);
            deleted.push(id);
        }
        deleted
    }

    /// The tombstones `filter` names, most recently pruned first.
    pub(super) fn pruned_rows(&self, filter: &PrunedFilter) -> Vec<PrunedRow> {
        let mut rows: Vec<PrunedRow> = self
            .pruned
            .values()
            .filter(|p| filter.id.as_ref().is_none_or(|id| &p.id == id))
            .filter(|p| {
                filter
                    .template_name
                    .as_ref()
                    .is_none_or(|name| p.template_name.as_ref() == Some(name))
            })
            .cloned()
            .collect();
        rows.sort_by(|a, b| b.pruned_at.cmp(&a.pruned_at).then(a.id.cmp(&b.id)));
        rows
    }
}
