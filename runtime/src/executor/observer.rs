//! What the executor tells whoever watches it (the daemon's metrics,
//! `opcodec run`'s stderr): each action call's end, each batch of entries
//! appended, each `workflow.log` line. The engine counts
//! nothing itself and knows no telemetry library.

use crate::store::{EntryKind, EventName};

/// Watches an executor; every method must return quickly and never fail.
pub trait Observer: Send + Sync {
    /// An action call ended after `seconds`, successfully or not.
    fn action_ended(&self, action: &str, ok: bool, seconds: f64);
    /// Entries of these kinds and event types were appended to a run's log.
    fn appended(&self, entries: &[(EntryKind, Option<EventName>)]);
    /// A step called `workflow.log` (the executor also logs it through
    /// `tracing`, target `workflow`).
    fn logged(&self, line: &LogLine<'_>) {
        let _ = line;
    }
    /// A call was not made: the window of its rate limit `key` was full
    /// (it waits for the next one).
    fn throttled(&self, key: &str) {
        let _ = key;
    }
    /// A run got a slot of concurrency key `key` after waiting `seconds`
    /// since it started.
    fn admitted(&self, key: &str, seconds: f64) {
        let _ = (key, seconds);
    }
}

/// One `workflow.log` call.
#[derive(Debug, Clone, Copy)]
pub struct LogLine<'a> {
    /// The run.
    pub run_id: &'a str,
    /// The step instance.
    pub step: &'a str,
    /// `debug`, `info`, `warn` or `error`.
    pub level: &'a str,
    /// The message.
    pub message: &'a str,
    /// Its data (an empty object when none).
    pub data: &'a serde_json::Value,
}

/// The observer of an executor nobody watches.
pub(crate) struct Unobserved;

impl Observer for Unobserved {
    fn action_ended(&self, _: &str, _: bool, _: f64) {}
    fn appended(&self, _: &[(EntryKind, Option<EventName>)]) {}
}
