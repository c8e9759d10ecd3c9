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
    /// that now hold one.
    fn promote<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Vec<String>>>;

    /// The keys runs are waiting on, each with how many wait, by key.
    fn waiting(&self) -> BoxFuture<'_, StoreResult<Vec<(String, u64)>>>;

    /// Where run `id` stands with its concurrency key, if it has one.
    fn standing<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<Standing>>>;

    /// Counts a call in its rate limit's window (the window of `per_ms` that
    /// `now_ms` falls in) if fewer than `limit` calls were counted there:
    /// `None`; else the window's end, when the call may try again.
    fn take_call(&self, call: RateCall) -> BoxFuture<'_, StoreResult<Option<u64>>>;

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
    /// Now, milliseconds since the epoch.
    pub now_ms: u64,
}

impl RateCall {
    /// The start of the window `now_ms` falls in.
    pub fn window(&self) -> u64 {
        self.now_ms - self.now_ms % self.per_ms.max(1)
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
