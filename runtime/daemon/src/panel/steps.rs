//! A workflow page's Steps table: every step of its program in dependency
//! order (as `opcode.status` lists them), each instance that ran with its
//! action, attempts, duration and values, the steps that never ran, and
//! those a re-run carried over from the run it re-runs.

use std::collections::HashMap;

use maud::{Markup, html};
use opcode_runtime::store::{StepRow, StepStatus};
use opcode_vm::Program;
use serde_json::Value;

use super::clock::duration;
use super::layout::{empty, json_text, json_value, status, workflow_link};

/// What the table is drawn from.
pub struct Steps<'a> {
    /// The run's step instances.
    pub rows: &'a [StepRow],
    /// The run's program (`None` if it cannot be read: rows keep their
    /// stored order, and steps that never ran are not known).
    pub program: Option<&'a Program>,
    /// Each instance's last `step_started` payload (`action`, `input`).
    pub started: &'a HashMap<&'a str, Value>,
    /// The run this one re-runs from its failed step, if it is one.
    pub rerun_of: Option<&'a str>,
    /// The run has ended: a step without an instance will not run.
    pub ended: bool,
}

/// A row of the table.
enum Line<'a> {
    /// An instance that started (or was carried over).
    Ran(&'a StepRow),
    /// A step with no instance.
    NotRun(String),
}

impl Steps<'_> {
    /// The table, or a line saying no step has started.
    pub fn table(&self) -> Markup {
        let lines = self.lines();
        if lines.is_empty() {
            return empty("No step has started yet.");
        }
        html! {
            table {
                thead { tr { th { "Step" } th { "Action" } th { "Status" } th { "Attempts" } th { "Duration" } th { "Input, output, error" } } }
                tbody { @for line in &lines { (self.row(line)) } }
            }
        }
    }

    /// The instances in the program's step order, each step without one
    /// in its place.
    fn lines(&self) -> Vec<Line<'_>> {
        let order: Vec<String> = self.program.map_or_else(Vec::new, |p| {
            p.step_order().into_iter().map(str::to_owned).collect()
        });
        let sorted = opcode_runtime::summary::ordered(self.rows, &order);
        let mut lines = Vec::with_capacity(order.len().max(sorted.len()));
        let mut next = sorted.iter().peekable();
        for id in order {
            let mut ran = false;
            while let Some(row) = next.next_if(|row| step_of(&row.step_id) == id) {
                lines.push(Line::Ran(row));
                ran = true;
            }
            if !ran {
                lines.push(Line::NotRun(id));
            }
        }
        // Instances of steps the program does not list come last.
        lines.extend(next.map(|row| Line::Ran(row)));
        lines
    }

    fn row(&self, line: &Line<'_>) -> Markup {
        let action = |id: &str| self.program.and_then(|p| p.action_of(step_of(id)));
        match line {
            Line::NotRun(id) => html! {
                tr.disabled {
                    td { code { (id) } }
                    td { @if let Some(action) = action(id) { code { (action) } } }
                    td { span.badge.skipped { @if self.ended { "not run" } @else { "not started" } } }
                    td {} td {} td {}
                }
            },
            Line::Ran(s) => {
                let started = self.started.get(s.step_id.as_str());
                let named = started.and_then(|c| c["action"].as_str());
                let carried = started.is_none()
                    && s.attempt == 0
                    && s.status == StepStatus::Completed
                    && self.rerun_of.is_some();
                html! {
                    tr {
                        td { code { (s.step_id) } }
                        td { @if let Some(action) = named.or_else(|| action(&s.step_id)) { code { (action) } } }
                        td { (status(s.status.as_str())) }
                        td {
                            @if carried {
                                span.muted title="kept from the run this one re-runs; it did not run again" {
                                    "carried over from " @if let Some(of) = self.rerun_of { (workflow_link(of)) }
                                }
                            } @else { (s.attempt) }
                        }
                        td { @if let Some(ms) = s.duration_ms { (duration(u64::try_from(ms).unwrap_or(0))) } }
                        td {
                            @if let Some(started) = started { details { summary { "input" } (json_value(&started["input"])) } }
                            @if let Some(output) = &s.output { details { summary { "output" } (json_text(output)) } }
                            @if let Some(error) = &s.error { details open { summary { "error" } (json_text(error)) } }
                        }
                    }
                }
            }
        }
    }
}

/// The step id of an instance name (`fetch[1,2]` → `fetch`).
fn step_of(instance: &str) -> &str {
    instance.split_once('[').map_or(instance, |(id, _)| id)
}
