//! The step rows a run has not written yet. A running run writes them when
//! it settles, answers a caller, or a set time after the oldest change at
//! most (`Config::step_rows_within`,
//! spec/decisions/0042-a-running-run-writes-its-step-rows-when-it-rests.md).

use std::collections::HashMap;
use std::time::Duration;

use opcode_vm::{InstRef, Record, Vm};
use tokio::time::Instant;

use crate::store::StepRow;

/// The step instances changed since their rows were last written.
pub struct StepRows {
    /// How long a change may stay unwritten while the run runs.
    within: Duration,
    unwritten: HashMap<InstRef, Touch>,
    /// When the oldest unwritten change is due.
    due: Option<Instant>,
}

/// When an unwritten instance first started and last changed (log text).
struct Touch {
    started_at: Option<String>,
    changed_at: String,
}

impl StepRows {
    /// None yet; a change is due `within` after it was noted.
    pub fn new(within: Duration) -> StepRows {
        StepRows {
            within,
            unwritten: HashMap::new(),
            due: None,
        }
    }

    /// Notes the step instance `record` concerns, if any, as changed at
    /// `at` (and started, for a start).
    pub fn note(&mut self, record: &Record, at: &str) {
        let Some(inst) = record.inst() else {
            return;
        };
        let started = matches!(record, Record::StepStarted { .. });
        let within = self.within;
        self.due.get_or_insert_with(|| {
            let now = Instant::now();
            now.checked_add(within).unwrap_or(now)
        });
        // Looked up first: an instance changes again and again, and its key
        // is cloned only once.
        let Some(touch) = self.unwritten.get_mut(inst) else {
            let touch = Touch {
                started_at: started.then(|| at.to_owned()),
                changed_at: at.to_owned(),
            };
            self.unwritten.insert(inst.clone(), touch);
            return;
        };
        if started && touch.started_at.is_none() {
            touch.started_at = Some(at.to_owned());
        }
        at.clone_into(&mut touch.changed_at);
    }

    /// Is every change written?
    pub fn is_empty(&self) -> bool {
        self.unwritten.is_empty()
    }

    /// When the oldest unwritten change is due.
    pub fn due_at(&self) -> Option<Instant> {
        self.due
    }

    /// Is the oldest unwritten change due?
    pub fn is_due(&self) -> bool {
        self.due_at().is_some_and(|due| due <= Instant::now())
    }

    /// Makes the unwritten changes due at once (a replay's, whose rows a
    /// dead writer may have left behind).
    pub fn due_now(&mut self) {
        if !self.is_empty() {
            self.due = Some(Instant::now());
        }
    }

    /// The rows of the unwritten instances as the VM has them now, by name;
    /// afterwards none is unwritten.
    pub fn take(&mut self, vm: &Vm) -> Vec<StepRow> {
        self.due = None;
        let mut rows: Vec<StepRow> = self
            .unwritten
            .drain()
            .filter_map(|(inst, touch)| {
                let view = vm.step(&inst)?;
                let ended = view.status.is_finished();
                Some(StepRow {
                    step_id: view.name,
                    status: view.status,
                    attempt: view.attempt,
                    output: (view.status == opcode_vm::StepStatus::Completed)
                        .then(|| view.output.to_string()),
                    error: view
                        .error
                        .as_ref()
                        .and_then(|e| serde_json::to_string(e).ok()),
                    started_at: touch.started_at,
                    completed_at: ended.then_some(touch.changed_at),
                    duration_ms: None,
                })
            })
            .collect();
        rows.sort_by(|a, b| a.step_id.cmp(&b.step_id));
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started(step: u32, attempt: u32) -> Record {
        let inst = InstRef {
            step,
            iters: Vec::new(),
        };
        Record::StepStarted { inst, attempt }
    }

    #[test]
    fn a_change_is_due_within_its_time_and_a_retry_keeps_the_first_start() {
        let mut rows = StepRows::new(Duration::from_mins(10));
        assert!(rows.is_empty() && rows.due_at().is_none());
        rows.note(&Record::RunStarted, "t0");
        assert!(rows.is_empty(), "a record about no step changes no row");
        rows.note(&started(0, 1), "t1");
        let due = rows.due_at().unwrap();
        rows.note(&started(0, 2), "t2");
        assert_eq!(rows.due_at(), Some(due), "the oldest change sets the time");
        assert!(!rows.is_due());
        let touch = &rows.unwritten[&InstRef {
            step: 0,
            iters: Vec::new(),
        }];
        assert_eq!(
            (touch.started_at.as_deref(), touch.changed_at.as_str()),
            (Some("t1"), "t2")
        );
        rows.due_now();
        assert!(rows.is_due());
    }
}
