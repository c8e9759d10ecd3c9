//! What the store knows of retention (spec/store.md, "Retention"): which
//! finished runs a policy lets go, and what is left of a run once pruned.

use super::WorkflowStatus;

/// Which finished runs (completed, failed, cancelled) have expired: those
/// that ended before `ended_before`, and those beyond the `keep_last`
/// newest of their template (of their name, for runs of no template).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Expiry {
    /// Runs that ended before this time (RFC 3339) have expired.
    pub ended_before: Option<String>,
    /// Only this many of each template's finished runs, the newest, stay.
    pub keep_last: Option<u32>,
    /// At most this many, the oldest first.
    pub limit: u32,
}

/// A run to prune, and where its export was written, if it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prune {
    /// The run.
    pub id: String,
    /// Where the run was exported before it goes.
    pub export: Option<String>,
}

/// What is left of a pruned run: its row's headline, and when it went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrunedRow {
    /// The run.
    pub id: String,
    /// Its workflow's name.
    pub name: String,
    /// The template it ran, if any.
    pub template_name: Option<String>,
    /// That template's version.
    pub template_version: Option<i64>,
    /// How it ended.
    pub status: WorkflowStatus,
    /// The agent that started it.
    pub agent_id: Option<String>,
    /// The run that started it, for a child run.
    pub parent_workflow_id: Option<String>,
    /// When it was created.
    pub created_at: String,
    /// When it ended.
    pub completed_at: Option<String>,
    /// When it was pruned.
    pub pruned_at: String,
    /// Where it was exported before it went (`opcode export`'s test file).
    pub export: Option<String>,
}

impl PrunedRow {
    /// What naming the run tells: how it ended, when it was pruned, and
    /// where its export is.
    pub fn describe(&self) -> String {
        let export = self
            .export
            .as_deref()
            .map_or(String::new(), |path| format!("; its export is {path}"));
        format!(
            "workflow `{}` ended {} and was pruned at {} by the retention settings{export}",
            self.id,
            self.status.as_str(),
            self.pruned_at
        )
    }
}

/// Which pruned runs to list, most recently pruned first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PrunedFilter {
    /// Only this run.
    pub id: Option<String>,
    /// Only the runs of this template.
    pub template_name: Option<String>,
    /// At most this many.
    pub limit: Option<u32>,
    /// After skipping this many.
    pub offset: u32,
}
