//! Statuses as the store keeps them: a workflow's (the VM's run status, or
//! quarantined, `spec/limits.md`) and a decision's.

use opcode_vm::RunStatus;

/// A workflow's status.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum WorkflowStatus {
    /// Created, not started.
    #[default]
    Pending,
    /// Working.
    Active,
    /// Waiting for decisions or signals, or suspended by its deadline.
    Suspended,
    /// Finished successfully.
    Completed,
    /// Finished with an error.
    Failed,
    /// Stopped on request.
    Cancelled,
    /// Each recovery ended the process: loaded only to be resumed or
    /// cancelled by hand.
    Quarantined,
}

impl WorkflowStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [WorkflowStatus; 7] = [
        WorkflowStatus::Pending,
        WorkflowStatus::Active,
        WorkflowStatus::Suspended,
        WorkflowStatus::Completed,
        WorkflowStatus::Failed,
        WorkflowStatus::Cancelled,
        WorkflowStatus::Quarantined,
    ];

    /// The spelling in results and the database.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkflowStatus::Pending => "pending",
            WorkflowStatus::Active => "active",
            WorkflowStatus::Suspended => "suspended",
            WorkflowStatus::Completed => "completed",
            WorkflowStatus::Failed => "failed",
            WorkflowStatus::Cancelled => "cancelled",
            WorkflowStatus::Quarantined => "quarantined",
        }
    }

    /// The status spelled `text`.
    pub fn parse(text: &str) -> Option<WorkflowStatus> {
        WorkflowStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Is it one a run never leaves (completed, failed, cancelled)?
    pub fn is_ended(self) -> bool {
        matches!(
            self,
            WorkflowStatus::Completed | WorkflowStatus::Failed | WorkflowStatus::Cancelled
        )
    }
}

impl From<RunStatus> for WorkflowStatus {
    fn from(status: RunStatus) -> WorkflowStatus {
        match status {
            RunStatus::Pending => WorkflowStatus::Pending,
            RunStatus::Active => WorkflowStatus::Active,
            RunStatus::Suspended => WorkflowStatus::Suspended,
            RunStatus::Completed => WorkflowStatus::Completed,
            RunStatus::Failed => WorkflowStatus::Failed,
            RunStatus::Cancelled => WorkflowStatus::Cancelled,
        }
    }
}

impl std::fmt::Display for WorkflowStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A decision's status.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum DecisionStatus {
    /// Asked, not answered.
    #[default]
    Pending,
    /// Answered.
    Resolved,
    /// Its timeout fired (the fallback, if any, was taken).
    TimedOut,
    /// The run stopped asking (cancelled, or the step was).
    Cancelled,
}

impl DecisionStatus {
    /// Every status.
    pub const ALL: [DecisionStatus; 4] = [
        DecisionStatus::Pending,
        DecisionStatus::Resolved,
        DecisionStatus::TimedOut,
        DecisionStatus::Cancelled,
    ];

    /// The spelling in results and the database.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionStatus::Pending => "pending",
            DecisionStatus::Resolved => "resolved",
            DecisionStatus::TimedOut => "timed_out",
            DecisionStatus::Cancelled => "cancelled",
        }
    }

    /// The status spelled `text`.
    pub fn parse(text: &str) -> Option<DecisionStatus> {
        DecisionStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

impl std::fmt::Display for DecisionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_round_trip_and_match_serde() {
        for status in WorkflowStatus::ALL {
            assert_eq!(WorkflowStatus::parse(status.as_str()), Some(status));
            let json = serde_json::to_value(status).unwrap_or_default();
            assert_eq!(json, status.as_str());
        }
        assert_eq!(WorkflowStatus::parse("done"), None);
        for status in DecisionStatus::ALL {
            assert_eq!(DecisionStatus::parse(status.as_str()), Some(status));
            let json = serde_json::to_value(status).unwrap_or_default();
            assert_eq!(json, status.as_str());
        }
    }
}
