//! Log entries: what a commit appends and what reading a log gives back
//! (`spec/events.md`).

/// What a log entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// Something the VM consumed (an [`opcode_vm::Event`]): replay reads these.
    Input,
    /// Something the VM reported (an [`opcode_vm::Record`]): opcode's event names.
    Record,
    /// Something the runtime did around the VM (recovery, a re-dispatch).
    Note,
}

impl EntryKind {
    /// The name stored in the `kind` column.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Input => "input",
            EntryKind::Record => "record",
            EntryKind::Note => "note",
        }
    }

    /// The kind stored as `name`.
    pub fn parse(name: &str) -> Option<EntryKind> {
        match name {
            "input" => Some(EntryKind::Input),
            "record" => Some(EntryKind::Record),
            "note" => Some(EntryKind::Note),
            _ => None,
        }
    }
}

/// An entry to append (its sequence number comes from its place in the commit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEntry {
    /// When (RFC 3339, UTC, milliseconds).
    pub at: String,
    /// What kind.
    pub kind: EntryKind,
    /// The event name (`action_completed`, `step_started`…).
    pub event_type: &'static str,
    /// The step instance it concerns.
    pub step_id: Option<String>,
    /// The payload's schema version.
    pub version: u16,
    /// The payload (JSON text).
    pub payload: String,
}

impl NewEntry {
    /// The entry as stored at sequence number `seq`.
    pub fn stored(&self, seq: u64) -> LogEntry {
        LogEntry {
            seq,
            at: self.at.clone(),
            kind: self.kind,
            event_type: self.event_type.to_owned(),
            step_id: self.step_id.clone(),
            version: self.version,
            payload: self.payload.clone(),
        }
    }
}

/// A stored log entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    /// Position in the workflow's log, from 1, contiguous.
    pub seq: u64,
    /// When (RFC 3339, UTC, milliseconds).
    pub at: String,
    /// What kind.
    pub kind: EntryKind,
    /// The event name.
    pub event_type: String,
    /// The step instance it concerns.
    pub step_id: Option<String>,
    /// The payload's schema version.
    pub version: u16,
    /// The payload (JSON text).
    pub payload: String,
}

/// Declares [`EventName`] from one table of variants and stored names.
macro_rules! event_names {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)*) => {
        /// A log entry's name (its `event_type`), typed: what readers match
        /// on instead of the text. `spec/events.md` lists each.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum EventName {
            $($(#[$doc])* $variant,)*
        }

        impl EventName {
            /// Every name, in the order of `spec/events.md`.
            pub const ALL: &[EventName] = &[$(EventName::$variant,)*];

            /// The name stored in the `event_type` column.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(EventName::$variant => $name,)*
                }
            }

            /// The name stored as `name`; none for a name this build does
            /// not know (a newer build's).
            pub fn parse(name: &str) -> Option<EventName> {
                match name {
                    $($name => Some(EventName::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

event_names! {
    /// Input: the run started.
    RunStarted = "run_started",
    /// Input: an action answered.
    ActionCompleted = "action_completed",
    /// Input: an action failed.
    ActionFailed = "action_failed",
    /// Input: an action in flight asked a question.
    ActionAsked = "action_asked",
    /// Input: a decision was answered.
    DecisionResolved = "decision_resolved",
    /// Input: a decision was withdrawn.
    DecisionCancelled = "decision_cancelled",
    /// Input: a timer came due.
    TimerFired = "timer_fired",
    /// Input: a signal arrived.
    SignalReceived = "signal_received",
    /// Input: someone asked to cancel.
    CancelRequested = "cancel_requested",
    /// Input: someone asked to resume.
    ResumeRequested = "resume_requested",
    /// Input: the run holds its concurrency slot.
    RunAdmitted = "run_admitted",
    /// Record: the run began.
    WorkflowStarted = "workflow_started",
    /// Record: a step's attempt began.
    StepStarted = "step_started",
    /// Record: a step completed.
    StepCompleted = "step_completed",
    /// Record: a step failed.
    StepFailed = "step_failed",
    /// Record: a step failed and `on_error: ignore` let it through.
    StepIgnored = "step_ignored",
    /// Record: a step will try again.
    StepRetrying = "step_retrying",
    /// Record: a step was skipped or stopped.
    StepSkipped = "step_skipped",
    /// Record: a decision or a wait holds a step.
    StepSuspended = "step_suspended",
    /// Record: a step's fallback started.
    StepFallback = "step_fallback",
    /// Record: a question asked again got its earlier answer.
    DecisionReplayed = "decision_replayed",
    /// Record: a condition chose its branch.
    ConditionEvaluated = "condition_evaluated",
    /// Record: a loop's iteration began.
    LoopIterStarted = "loop_iter_started",
    /// Record: a hook failed.
    HookFailed = "hook_failed",
    /// Record: the run stopped to wait.
    WorkflowSuspended = "workflow_suspended",
    /// Record: the run moved on after a wait.
    WorkflowResumed = "workflow_resumed",
    /// Record: the run's deadline passed.
    WorkflowTimedOut = "workflow_timed_out",
    /// Record: the run completed.
    WorkflowCompleted = "workflow_completed",
    /// Record: the run failed.
    WorkflowFailed = "workflow_failed",
    /// Record: the run was cancelled.
    WorkflowCancelled = "workflow_cancelled",
    /// Note: an action in flight at a crash is performed again.
    ActionRedispatched = "action_redispatched",
    /// Note: the process let the run go (shutdown, or recovery left it).
    WorkflowInterrupted = "workflow_interrupted",
    /// Note: a start recovered the run a dead process left.
    WorkflowRecovered = "workflow_recovered",
    /// Note: the run was recovered too often in a row.
    WorkflowQuarantined = "workflow_quarantined",
    /// Note: an inbox message no longer applied.
    InputRejected = "input_rejected",
    /// Note: a call opened its target's breaker.
    CircuitOpened = "circuit_opened",
    /// Note: an open breaker lets a probe through.
    CircuitHalfOpen = "circuit_half_open",
    /// Note: a breaker closed again.
    CircuitClosed = "circuit_closed",
}

impl EventName {
    /// Whether the record ends a step's attempt (its instance stops
    /// running): completed, failed, ignored, skipped or suspended.
    pub fn ends_step(self) -> bool {
        matches!(
            self,
            EventName::StepCompleted
                | EventName::StepFailed
                | EventName::StepIgnored
                | EventName::StepSkipped
                | EventName::StepSuspended
        )
    }
}

impl LogEntry {
    /// The entry's name, typed; none for a name this build does not know.
    pub fn name(&self) -> Option<EventName> {
        EventName::parse(&self.event_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name the events page documents is one this build knows, and
    /// every name it knows is documented.
    #[test]
    fn the_names_are_the_documented_ones() {
        let spec = concat!(
            include_str!("../../../spec/events.md"),
            include_str!("../../../spec/breakers.md")
        );
        for name in EventName::ALL {
            assert_eq!(EventName::parse(name.as_str()), Some(*name));
            assert!(
                spec.contains(&format!("`{}`", name.as_str())),
                "{} is not documented",
                name.as_str()
            );
        }
        assert_eq!(EventName::parse("entries"), None);
    }

    /// The other way round: every name the tables of inputs, records and
    /// notes list is one this build knows (a name the VM gains is
    /// documented there, and so caught here).
    #[test]
    fn every_documented_name_is_known() {
        let events = include_str!("../../../spec/events.md");
        let from = events.find("### Inputs").unwrap_or(0);
        let to = events.find("### Versions").unwrap_or(events.len());
        let mut seen = 0;
        for line in events[from..to].lines().filter(|l| l.starts_with("| `")) {
            let first = line.split('|').nth(1).unwrap_or_default();
            for name in first.split('`').skip(1).step_by(2) {
                if name != "event_type" {
                    assert!(
                        EventName::parse(name).is_some(),
                        "{name} is not an EventName"
                    );
                    seen += 1;
                }
            }
        }
        assert!(seen >= 35, "only {seen} names read from spec/events.md");
    }
}
