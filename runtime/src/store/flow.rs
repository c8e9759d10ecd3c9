//! The flow-control part of the store's contract: concurrency slots, rate
//! windows and debounced starts (`spec/flow-control.md`).

use super::{BoxFuture, StoreResult};

/// A run's request for a slot of its concurrency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// The key.
    pub key: String,
    /// The run.
    pub workflow_id: String,
    /// Runs of the key holding a slot at once.
    pub limit: u32,
    /// Its place among the runs waiting: when it asked (milliseconds),
    /// plus `priority_aging` for each level of its priority; the lowest
    /// goes first.
    pub turn: u64,
    /// Wait at the limit (`false`: neither hold nor wait).
    pub wait: bool,
    /// When it asked (RFC 3339).
    pub at: String,
}

/// The answer to an [`Admission`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admitted {
    /// The run holds a slot.
    Holds,
    /// The run waits: `position` runs of the key wait before it.
    Waits {
        /// Runs waiting before it.
        position: u64,
        /// The runs holding the key's slots, oldest first.
        holders: Vec<String>,
    },
    /// The key is at its limit and the run asked not to wait.
    Refused {
        /// The runs holding the key's slots, oldest first.
        holders: Vec<String>,
    },
}

/// The slots of concurrency keys (spec/flow-control.md, "Admission").
/// A slot is held by a run until it ends: holders are counted joined with
/// their runs' status, so the slot of a run that ended is free whatever
/// crashed when. Each call is one step under the key's lock, so processes
/// sharing a store never let more than `limit` runs of a key hold one.
pub trait Slots: Send + Sync {
    /// Takes a slot for the run, or queues it (or neither, when it asked
    /// not to wait); asked again, answers where the run stands.
    fn admit(&self, ask: Admission) -> BoxFuture<'_, StoreResult<Admitted>>;

    /// Gives the free slots of `key` to its waiting runs, lowest priority
    /// number then oldest first, and forgets runs that ended; the runs
    /// that now hold one. Each is told in the same transaction: its
    /// `run_admitted` input is left in its inbox, so a process that dies
    /// after promoting cannot leave a slot held by a run never told.
    fn promote<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Vec<String>>>;

    /// The keys runs are waiting on, each with how many wait, by key.
    fn waiting(&self) -> BoxFuture<'_, StoreResult<Vec<(String, u64)>>>;

    /// Where run `id` stands with its concurrency key, if it has one.
    fn standing<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<Standing>>>;

    /// Counts a call in its rate limit's window if fewer than `limit` calls
    /// were counted there, the call to be made at once. The window is read
    /// under the key's lock, from the store's own clock (the database's on
    /// PostgreSQL, so every daemon sharing it agrees); a call counted in a
    /// window's last half counts in the next one too
    /// ([`RateCall::spills`]).
    fn take_call(&self, call: RateCall) -> BoxFuture<'_, StoreResult<Rated>>;

    /// Notes a delivery of a debounced trigger: opens its key's pending
    /// start (due after the period), or pushes the open one's due time by
    /// the period (never past `max_wait_ms` after its first delivery),
    /// keeping the first delivery's inputs or taking this one's.
    fn debounce(&self, delivery: Debounced) -> BoxFuture<'_, StoreResult<PendingStart>>;

    /// The pending starts due at `now_ms`, earliest first, at most `limit`.
    fn due_starts(&self, now_ms: u64, limit: u32) -> BoxFuture<'_, StoreResult<Vec<PendingStart>>>;

    /// Forgets a pending start once its run started (only the one opened at
    /// `first_ms`: a later one of the same key stays).
    fn forget_start<'a>(&'a self, start: &'a PendingStart) -> BoxFuture<'a, StoreResult<()>>;
}

/// A delivery of a debounced trigger (spec/flow-control.md, "Debounce").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Debounced {
    /// The template it starts.
    pub template: String,
    /// The debounce key.
    pub key: String,
    /// The run's inputs this delivery would give (JSON).
    pub inputs: String,
    /// When it came, milliseconds since the epoch.
    pub now_ms: u64,
    /// The quiet time after the last delivery before the run starts.
    pub period_ms: u64,
    /// The longest a start waits after its first delivery.
    pub max_wait_ms: u64,
    /// Take this delivery's inputs (`keep: last`) or keep the first's.
    pub keep_last: bool,
}

/// A run a debounced trigger will start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingStart {
    /// The template.
    pub template: String,
    /// The debounce key.
    pub key: String,
    /// The inputs the run gets (JSON).
    pub inputs: String,
    /// When its first delivery came.
    pub first_ms: u64,
    /// When it starts.
    pub due_ms: u64,
    /// How many deliveries it gathers.
    pub deliveries: u64,
}

impl Debounced {
    /// The pending start this delivery leaves, after `open` (the key's
    /// pending start before it, if any).
    pub fn applied_to(&self, open: Option<&PendingStart>) -> PendingStart {
        match open {
            None => PendingStart {
                template: self.template.clone(),
                key: self.key.clone(),
                inputs: self.inputs.clone(),
                first_ms: self.now_ms,
                due_ms: self.now_ms + self.period_ms,
                deliveries: 1,
            },
            Some(open) => PendingStart {
                inputs: if self.keep_last {
                    self.inputs.clone()
                } else {
                    open.inputs.clone()
                },
                due_ms: (self.now_ms + self.period_ms).min(open.first_ms + self.max_wait_ms),
                deliveries: open.deliveries + 1,
                ..open.clone()
            },
        }
    }
}

/// A call asking for room in its rate limit's window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateCall {
    /// The key.
    pub key: String,
    /// Calls a window.
    pub limit: u32,
    /// The window, milliseconds (windows start at multiples of it).
    pub per_ms: u64,
}

/// The store's answer to a [`RateCall`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rated {
    /// Counted in the window starting at `window_ms`: make the call now.
    Counted {
        /// The window's start, milliseconds since the epoch (store's clock).
        window_ms: u64,
    },
    /// The window starting at `window_ms` is full (or, in its last half,
    /// the next one is); it ends `wait_ms` from
    /// when the store looked (a span, not an instant: the caller's clock
    /// need not agree with the store's).
    Full {
        /// The window's start (store's clock).
        window_ms: u64,
        /// How long until it ends.
        wait_ms: u64,
    },
}

impl RateCall {
    /// The window of the grid `now_ms` falls in (the store's clock, read
    /// under the key's lock, so calls are windowed in the order they are
    /// counted).
    pub fn window_at(&self, now_ms: u64) -> u64 {
        now_ms - now_ms % self.per_ms.max(1)
    }

    /// Does a call counted at `now_ms` count in the window after `window`
    /// too? In a window's last half (at most its last second) it does: a
    /// call is made a moment after it is counted (a process to start, a
    /// request to send), and counted near a window's end it may start in
    /// the next one, whose own `limit` calls it would join.
    pub fn spills(&self, now_ms: u64, window: u64) -> bool {
        let left = (window + self.per_ms).saturating_sub(now_ms);
        left <= (self.per_ms / 2).min(1000)
    }

    /// The answer for a call at `now_ms` in `window`, where `here` calls
    /// were counted and `next` in the window after: counted if there is
    /// room in each window it counts in.
    pub fn rated(&self, now_ms: u64, window: u64, here: u64, next: u64) -> Rated {
        let limit = u64::from(self.limit);
        if here < limit && (next < limit || !self.spills(now_ms, window)) {
            Rated::Counted { window_ms: window }
        } else {
            Rated::Full {
                window_ms: window,
                wait_ms: (window + self.per_ms).saturating_sub(now_ms),
            }
        }
    }
}

/// Where a run stands with its concurrency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    /// The key.
    pub key: String,
    /// Runs of the key holding a slot at once.
    pub limit: u32,
    /// Holding a slot or waiting ([`Admitted::Refused`] never).
    pub admitted: Admitted,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(limit: u32, per_ms: u64) -> RateCall {
        RateCall {
            key: "k".into(),
            limit,
            per_ms,
        }
    }

    #[test]
    fn a_call_in_a_windows_last_half_counts_in_the_next_too() {
        let c = call(2, 1000);
        assert_eq!(c.window_at(12_345), 12_000);
        assert!(!c.spills(12_499, 12_000));
        assert!(c.spills(12_500, 12_000));
        // At most a window's last second.
        let hour = call(2, 3_600_000);
        assert!(!hour.spills(3_598_999, 0));
        assert!(hour.spills(3_599_000, 0));
    }

    #[test]
    fn a_call_is_counted_while_each_window_it_counts_in_has_room() {
        let c = call(2, 1000);
        assert_eq!(
            c.rated(12_100, 12_000, 1, 2),
            Rated::Counted { window_ms: 12_000 }
        );
        let full = Rated::Full {
            window_ms: 12_000,
            wait_ms: 900,
        };
        assert_eq!(c.rated(12_100, 12_000, 2, 0), full);
        // Late in its window, it needs room in the next one too.
        assert_eq!(
            c.rated(12_600, 12_000, 1, 1),
            Rated::Counted { window_ms: 12_000 }
        );
        let late = c.rated(12_600, 12_000, 1, 2);
        assert_eq!(
            late,
            Rated::Full {
                window_ms: 12_000,
                wait_ms: 400
            }
        );
    }
}
