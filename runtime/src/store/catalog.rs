//! What the daemon keeps beside the log: templates, agents, and the filters
//! of `opcode.query`.

use super::LogEntry;

/// A template to register; the store gives it the next version.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TemplateDraft {
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The workflow source (wrapper JSON text, as compiled).
    pub definition: String,
    /// `input_schema`, as JSON text.
    pub input_schema: Option<String>,
    /// `output_schema`, as JSON text.
    pub output_schema: Option<String>,
    /// `triggers`, as JSON text.
    pub triggers: String,
    /// The agent that defined it.
    pub agent_id: Option<String>,
    /// When (RFC 3339).
    pub at: String,
}

/// A stored template version.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TemplateRow {
    /// Its name.
    pub name: String,
    /// Its version: 1, 2, 3… per name.
    pub version: i64,
    /// What it does.
    pub description: String,
    /// The workflow source.
    pub definition: String,
    /// `input_schema`, as JSON text.
    pub input_schema: Option<String>,
    /// `output_schema`, as JSON text.
    pub output_schema: Option<String>,
    /// `triggers`, as JSON text.
    pub triggers: String,
    /// The agent that defined it.
    pub agent_id: Option<String>,
    /// When it was defined.
    pub created_at: String,
}

/// Which templates to list: by name, then newest version first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TemplateFilter {
    /// Only this name.
    pub name: Option<String>,
    /// Only those defined by this agent.
    pub agent_id: Option<String>,
    /// Only the newest version of each name.
    pub latest_only: bool,
    /// At most this many.
    pub limit: Option<u32>,
    /// After skipping this many.
    pub offset: u32,
}

/// Which log entries to find, across workflows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventFilter {
    /// Only this workflow's (then in log order; else newest first).
    pub workflow_id: Option<String>,
    /// Only this `event_type`.
    pub event_type: Option<String>,
    /// Only this step instance's.
    pub step_id: Option<String>,
    /// Only entries at or after this time (RFC 3339).
    pub since: Option<String>,
    /// At most this many.
    pub limit: Option<u32>,
    /// After skipping this many.
    pub offset: u32,
}

/// A log entry with its workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundEntry {
    /// The workflow.
    pub workflow_id: String,
    /// The entry.
    pub entry: LogEntry,
}
