//! What delegated agents' calls leave in the store (spec/agents.md): their
//! sessions' turns ("Sessions") and their transcripts, so that every
//! daemon sharing the store gives an agent the same memory and serves any
//! call's transcript, whichever ran it. The SQL is written once for both
//! SQL backends (`?N`; PostgreSQL's `$N` by [`super::slots::numbered`]).

use std::time::Duration;

use super::{BoxFuture, StoreResult};

/// One turn to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionTurn {
    /// The session's name.
    pub session: String,
    /// The run whose step took the turn.
    pub workflow_id: String,
    /// The step instance.
    pub step: String,
    /// The turn, as JSON text.
    pub turn: String,
}

/// The turns of agent sessions.
pub trait Sessions: Send + Sync {
    /// The turns of `session`, oldest first.
    fn session_turns<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<Vec<String>>>;

    /// Adds `turn` as the session's newest, replacing the turn its run and
    /// step recorded before (a re-run of the step), and keeps the newest
    /// `keep` turns of the session.
    fn record_turn(&self, turn: SessionTurn, keep: u32) -> BoxFuture<'_, StoreResult<()>>;
}

/// A call's whole transcript, kept once the call ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transcript {
    /// The run.
    pub workflow_id: String,
    /// The step instance.
    pub step: String,
    /// The step's attempt.
    pub attempt: u32,
    /// Its lines (`{"at_ms", "stream", "line"}` each), as the call wrote them.
    pub text: String,
}

/// The transcripts of delegated agents' calls, deleted with their run.
pub trait Transcripts: Send + Sync {
    /// Keeps `transcript`, replacing one kept for the same attempt (a
    /// call made again after a crash).
    fn keep_transcript(&self, transcript: Transcript) -> BoxFuture<'_, StoreResult<()>>;

    /// The transcript of `attempt` of `step` of run `workflow_id`, if kept.
    fn transcript<'a>(
        &'a self,
        workflow_id: &'a str,
        step: &'a str,
        attempt: u32,
    ) -> BoxFuture<'a, StoreResult<Option<String>>>;
}

/// A worktree's writer, as its lease in the store names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorktreeLease {
    /// The worktree (its canonical path).
    pub worktree: String,
    /// The process holding it (`host:pid:start`).
    pub owner: String,
    /// The run and step writing it.
    pub holder: String,
}

/// One writer per worktree across the daemons sharing the store
/// (spec/agents.md, "Roles"): a lease each, renewed by its owner.
pub trait Worktrees: Send + Sync {
    /// Takes `lease` for `ttl` unless another owner's lease on its
    /// worktree is live and that owner is not `over` (an owner found
    /// dead); answers the lease that holds the worktree afterwards (the
    /// caller's when taken).
    fn take_worktree(
        &self,
        lease: WorktreeLease,
        ttl: Duration,
        over: Option<String>,
    ) -> BoxFuture<'_, StoreResult<WorktreeLease>>;

    /// Keeps the leases of `owner` on the worktrees in `held` for `ttl`
    /// more, and lets go of its others.
    fn keep_worktrees<'a>(
        &'a self,
        owner: &'a str,
        held: Vec<String>,
        ttl: Duration,
    ) -> BoxFuture<'a, StoreResult<()>>;
}

/// The lease on worktree `?1`.
#[cfg(any(feature = "libsql", feature = "postgres"))]
pub const WORKTREE: &str =
    "SELECT worktree, owner, holder FROM worktree_leases WHERE worktree = ?1";

/// Keeps transcript `?4` of run `?1`, step `?2`, attempt `?3`.
#[cfg(any(feature = "libsql", feature = "postgres"))]
pub const KEEP_TRANSCRIPT: &str = "INSERT INTO transcripts (workflow_id, step, attempt, text) \
     VALUES (?1, ?2, ?3, ?4) ON CONFLICT (workflow_id, step, attempt) DO UPDATE SET text = excluded.text";

/// The transcript of run `?1`, step `?2`, attempt `?3`.
#[cfg(any(feature = "libsql", feature = "postgres"))]
pub const TRANSCRIPT: &str =
    "SELECT text FROM transcripts WHERE workflow_id = ?1 AND step = ?2 AND attempt = ?3";

/// The turns of session `?1`, oldest first.
#[cfg(any(feature = "libsql", feature = "postgres"))]
pub const TURNS: &str = "SELECT turn FROM session_turns WHERE session = ?1 \
     ORDER BY n, workflow_id, step";

/// Turn `?4` of session `?1`, run `?2`, step `?3`, after the session's others.
#[cfg(any(feature = "libsql", feature = "postgres"))]
pub const RECORD: &str = "INSERT INTO session_turns (session, workflow_id, step, n, turn) \
     VALUES (?1, ?2, ?3, (SELECT COALESCE(MAX(n), 0) + 1 FROM session_turns WHERE session = ?1), ?4) \
     ON CONFLICT (session, workflow_id, step) DO UPDATE SET n = excluded.n, turn = excluded.turn";

/// Forgets the turns of session `?1` older than its newest `?2`.
#[cfg(any(feature = "libsql", feature = "postgres"))]
pub const TRIM: &str = "DELETE FROM session_turns WHERE session = ?1 AND n <= \
     (SELECT n FROM session_turns WHERE session = ?1 ORDER BY n DESC LIMIT 1 OFFSET ?2)";
