//! What delegated agents' calls leave, on the libSQL connection: sessions'
//! turns (a turn and the trim of the session's oldest are one transaction,
//! which the single writer orders), transcripts, and worktrees' writer
//! leases, judged by this process's clock (one host shares the file).

use libsql::Value;

use super::{Db, backend, get};
use std::time::Duration;

use crate::store::delegated::{KEEP_TRANSCRIPT, RECORD, TRANSCRIPT, TRIM, TURNS, WORKTREE};
use crate::store::{SessionTurn, StoreResult, Transcript, WorktreeLease};
use crate::time::{from_now, now_ms, rfc3339};

impl Db {
    /// [`Sessions::session_turns`](crate::store::Sessions::session_turns).
    pub fn session_turns(&self, session: &str) -> StoreResult<Vec<String>> {
        self.block(self.query_all(TURNS, vec![session.into()], |row| get(row, 0)))
    }

    /// [`Sessions::record_turn`](crate::store::Sessions::record_turn).
    pub fn record_turn(&self, turn: &SessionTurn, keep: u32) -> StoreResult<()> {
        self.block(self.in_transaction(async {
            let recorded: Vec<Value> = vec![
                turn.session.as_str().into(),
                turn.workflow_id.as_str().into(),
                turn.step.as_str().into(),
                turn.turn.as_str().into(),
            ];
            self.conn.execute(RECORD, recorded).await.map_err(backend)?;
            let trimmed: Vec<Value> = vec![turn.session.as_str().into(), i64::from(keep).into()];
            self.conn.execute(TRIM, trimmed).await.map_err(backend)?;
            Ok(())
        }))
    }

    /// [`Transcripts::keep_transcript`](crate::store::Transcripts::keep_transcript).
    pub fn keep_transcript(&self, transcript: &Transcript) -> StoreResult<()> {
        let params: Vec<Value> = vec![
            transcript.workflow_id.as_str().into(),
            transcript.step.as_str().into(),
            i64::from(transcript.attempt).into(),
            transcript.text.as_str().into(),
        ];
        self.execute(KEEP_TRANSCRIPT, params).map(drop)
    }

    /// [`Transcripts::transcript`](crate::store::Transcripts::transcript).
    pub fn transcript(&self, id: &str, step: &str, attempt: u32) -> StoreResult<Option<String>> {
        let params: Vec<Value> = vec![id.into(), step.into(), i64::from(attempt).into()];
        self.block(self.query_one(TRANSCRIPT, params, |row| get(row, 0)))
    }

    /// [`Worktrees::take_worktree`](crate::store::Worktrees::take_worktree).
    pub fn take_worktree(
        &self,
        lease: &WorktreeLease,
        ttl: Duration,
        over: Option<&str>,
    ) -> StoreResult<WorktreeLease> {
        self.block(self.in_transaction(async {
            let taken: Vec<Value> = vec![
                lease.worktree.as_str().into(),
                lease.owner.as_str().into(),
                lease.holder.as_str().into(),
                from_now(ttl).into(),
                rfc3339(now_ms()).into(),
                over.into(),
            ];
            self.conn.execute(TAKE, taken).await.map_err(backend)?;
            let held = self
                .query_one(WORKTREE, vec![lease.worktree.as_str().into()], |row| {
                    Ok(WorktreeLease {
                        worktree: get(row, 0)?,
                        owner: get(row, 1)?,
                        holder: get(row, 2)?,
                    })
                })
                .await?;
            Ok(held.unwrap_or_else(|| lease.clone()))
        }))
    }

    /// [`Worktrees::keep_worktrees`](crate::store::Worktrees::keep_worktrees).
    pub fn keep_worktrees(&self, owner: &str, held: &[String], ttl: Duration) -> StoreResult<()> {
        let held = serde_json::to_string(held)
            .map_err(|e| crate::store::StoreError::Backend(e.to_string()))?;
        self.block(self.in_transaction(async {
            let gone: Vec<Value> = vec![owner.into(), held.into()];
            self.conn.execute(LET_GO, gone).await.map_err(backend)?;
            let kept: Vec<Value> = vec![owner.into(), from_now(ttl).into()];
            self.conn.execute(KEEP, kept).await.map_err(backend)?;
            Ok(())
        }))
    }
}

/// Takes worktree `?1` for owner `?2`, holder `?3` until `?4`, unless
/// another owner's lease outlives now (`?5`) and that owner is not `?6`.
const TAKE: &str = "INSERT INTO worktree_leases (worktree, owner, holder, expires_at) \
     VALUES (?1, ?2, ?3, ?4) ON CONFLICT (worktree) DO UPDATE SET owner = excluded.owner, \
     holder = excluded.holder, expires_at = excluded.expires_at \
     WHERE worktree_leases.owner = excluded.owner OR worktree_leases.expires_at < ?5 \
     OR worktree_leases.owner = ?6";

/// Lets go of the leases of owner `?1` on worktrees not in the JSON list `?2`.
const LET_GO: &str = "DELETE FROM worktree_leases WHERE owner = ?1 \
     AND worktree NOT IN (SELECT value FROM json_each(?2))";

/// Keeps the leases of owner `?1` until `?2`.
const KEEP: &str = "UPDATE worktree_leases SET expires_at = ?2 WHERE owner = ?1";
