//! The SQL of [`Slots`](super::Slots), written once for libSQL and
//! PostgreSQL (`?N` parameters; PostgreSQL's take `$N`: [`numbered`]).
//! A row of `run_slots` is a run of a concurrency key: holding a slot
//! (`held = 1`) or waiting for one. Only rows of runs that have not ended
//! count, so a slot comes free when its run ends, whatever crashed when.

/// The runs of key `?1` holding a slot, oldest first.
pub const HOLDERS: &str = "SELECT s.workflow_id FROM run_slots s \
     JOIN workflows w ON w.id = s.workflow_id \
     WHERE s.key = ?1 AND s.held = 1 AND w.status NOT IN ('completed', 'failed', 'cancelled') \
     ORDER BY s.created_at, s.workflow_id";

/// Run `?1`'s row: whether it holds a slot, its turn, since when, its key
/// and limit.
pub const MINE: &str =
    "SELECT held, turn, created_at, key, lim FROM run_slots WHERE workflow_id = ?1";

/// How many runs of key `?1` wait before one whose turn is `?2` (run `?3`).
pub const AHEAD: &str = "SELECT COUNT(*) FROM run_slots s JOIN workflows w ON w.id = s.workflow_id \
     WHERE s.key = ?1 AND s.held = 0 AND w.status NOT IN ('completed', 'failed', 'cancelled') \
     AND (s.turn < ?2 OR (s.turn = ?2 AND s.workflow_id < ?3))";

/// A run's row: key, run, limit, turn, held, when.
pub const INSERT: &str = "INSERT INTO run_slots (key, workflow_id, lim, turn, held, created_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

/// The limit key `?1` was last asked with.
pub const LIMIT: &str = "SELECT lim FROM run_slots WHERE key = ?1 \
     ORDER BY created_at DESC, workflow_id DESC LIMIT 1";

/// The first `?2` runs of key `?1` waiting, by turn.
pub const NEXT: &str = "SELECT s.workflow_id FROM run_slots s JOIN workflows w ON w.id = s.workflow_id \
     WHERE s.key = ?1 AND s.held = 0 AND w.status NOT IN ('completed', 'failed', 'cancelled') \
     ORDER BY s.turn, s.workflow_id LIMIT ?2";

/// Run `?1` holds a slot.
pub const HOLD: &str = "UPDATE run_slots SET held = 1 WHERE workflow_id = ?1";

/// Leaves input `?2` in run `?1`'s inbox at `?3`: a promotion tells the
/// runs it gives slots to in its own transaction.
pub const TELL: &str = "INSERT INTO inbox (workflow_id, event, created_at) VALUES (?1, ?2, ?3)";

/// What a promotion leaves in the inbox of each run it gives a slot to:
/// the `run_admitted` input. Written with the slot, it is lost with it or
/// not at all, so a process that dies after promoting leaves no run
/// holding a slot it was never told of; the run's owner takes it at its
/// next look at the inbox (a notice wakes it at once on PostgreSQL), and
/// a run whose owner died takes it when it is taken over.
pub fn admitted_mail() -> String {
    serde_json::to_string(&opcode_vm::event::Event::Admitted { refused: None }).unwrap_or_default()
}

/// Forgets the rows of key `?1` whose runs ended or are gone.
pub const SWEEP: &str = "DELETE FROM run_slots WHERE key = ?1 AND NOT EXISTS (SELECT 1 FROM workflows w \
     WHERE w.id = run_slots.workflow_id AND w.status NOT IN ('completed', 'failed', 'cancelled'))";

/// The keys runs wait on, and how many wait on each.
pub const WAITING: &str = "SELECT s.key, COUNT(*) FROM run_slots s \
     JOIN workflows w ON w.id = s.workflow_id \
     WHERE s.held = 0 AND w.status NOT IN ('completed', 'failed', 'cancelled') \
     GROUP BY s.key ORDER BY s.key";

/// The calls counted in window `?2` of rate key `?1`.
pub const CALLS: &str = "SELECT calls FROM rate_windows WHERE key = ?1 AND start_ms = ?2";

/// One more call in window `?2` of rate key `?1`.
pub const CALL: &str = "INSERT INTO rate_windows (key, start_ms, calls) VALUES (?1, ?2, 1) \
     ON CONFLICT (key, start_ms) DO UPDATE SET calls = rate_windows.calls + 1";

/// Forgets the windows of rate key `?1` before `?2`.
pub const PAST_WINDOWS: &str = "DELETE FROM rate_windows WHERE key = ?1 AND start_ms < ?2";

/// The pending start of template `?1`'s debounce key `?2`.
pub const PENDING: &str = "SELECT template, key, inputs, first_ms, due_ms, deliveries \
     FROM pending_starts WHERE template = ?1 AND key = ?2";

/// A pending start, new or changed.
pub const PUT_PENDING: &str = "INSERT INTO pending_starts \
     (template, key, inputs, first_ms, due_ms, deliveries) VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
     ON CONFLICT (template, key) DO UPDATE SET inputs = excluded.inputs, \
     due_ms = excluded.due_ms, deliveries = excluded.deliveries";

/// The pending starts due at `?1`, earliest first, at most `?2`.
pub const DUE: &str = "SELECT template, key, inputs, first_ms, due_ms, deliveries \
     FROM pending_starts WHERE due_ms <= ?1 ORDER BY due_ms LIMIT ?2";

/// Forgets the pending start of template `?1`, key `?2`, opened at `?3`.
pub const FORGET: &str =
    "DELETE FROM pending_starts WHERE template = ?1 AND key = ?2 AND first_ms = ?3";

/// `sql` with PostgreSQL's parameters (`$N` for `?N`).
#[cfg(feature = "postgres")]
pub fn numbered(sql: &str) -> String {
    sql.replace('?', "$")
}
