//! What the executor tells whoever watches it (the daemon's metrics): each
//! action call's end and each batch of entries appended. The engine counts
//! nothing itself and knows no telemetry library.

use crate::store::EntryKind;

/// Watches an executor; every method must return quickly and never fail.
pub trait Observer: Send + Sync {
    /// An action call ended after `seconds`, successfully or not.
    fn action_ended(&self, action: &str, ok: bool, seconds: f64);
    /// Entries of these kinds and event types were appended to a run's log.
    fn appended(&self, entries: &[(EntryKind, &str)]);
}

/// The observer of an executor nobody watches.
pub(crate) struct Unobserved;

impl Observer for Unobserved {
    fn action_ended(&self, _: &str, _: bool, _: f64) {}
    fn appended(&self, _: &[(EntryKind, &str)]) {}
}
