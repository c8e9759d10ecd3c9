//! What delegated agents' calls leave, on PostgreSQL: sessions' turns (a
//! turn and the trim of the session's oldest are one transaction) and
//! transcripts and worktrees' writer leases, judged by the database's
//! clock.

use super::{PostgresStore, backend};
use std::time::Duration;

use crate::store::delegated::{KEEP_TRANSCRIPT, RECORD, TRANSCRIPT, TRIM, TURNS, WORKTREE};
use crate::store::slots::numbered;
use crate::store::{
    BoxFuture, SessionTurn, Sessions, StoreResult, Transcript, Transcripts, WorktreeLease,
    Worktrees,
};

impl Sessions for PostgresStore {
    fn session_turns<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<Vec<String>>> {
        Box::pin(async move {
            self.query(&numbered(TURNS), &[&session], |row| {
                row.try_get(0).map_err(backend)
            })
            .await
        })
    }

    fn record_turn(&self, turn: SessionTurn, keep: u32) -> BoxFuture<'_, StoreResult<()>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(backend)?;
            tx.execute(
                numbered(RECORD).as_str(),
                &[&turn.session, &turn.workflow_id, &turn.step, &turn.turn],
            )
            .await
            .map_err(backend)?;
            tx.execute(numbered(TRIM).as_str(), &[&turn.session, &i64::from(keep)])
                .await
                .map_err(backend)?;
            tx.commit().await.map_err(backend)
        })
    }
}

impl Transcripts for PostgresStore {
    fn keep_transcript(&self, transcript: Transcript) -> BoxFuture<'_, StoreResult<()>> {
        Box::pin(async move {
            let attempt = i64::from(transcript.attempt);
            self.execute(
                &numbered(KEEP_TRANSCRIPT),
                &[
                    &transcript.workflow_id,
                    &transcript.step,
                    &attempt,
                    &transcript.text,
                ],
            )
            .await
            .map(drop)
        })
    }

    fn transcript<'a>(
        &'a self,
        workflow_id: &'a str,
        step: &'a str,
        attempt: u32,
    ) -> BoxFuture<'a, StoreResult<Option<String>>> {
        Box::pin(async move {
            let attempt = i64::from(attempt);
            let mut texts = self
                .query(
                    &numbered(TRANSCRIPT),
                    &[&workflow_id, &step, &attempt],
                    |row| row.try_get(0).map_err(backend),
                )
                .await?;
            Ok(texts.pop())
        })
    }
}

impl Worktrees for PostgresStore {
    fn take_worktree(
        &self,
        lease: WorktreeLease,
        ttl: Duration,
        over: Option<String>,
    ) -> BoxFuture<'_, StoreResult<WorktreeLease>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(backend)?;
            let ttl = ttl.as_secs_f64();
            tx.execute(
                TAKE,
                &[&lease.worktree, &lease.owner, &lease.holder, &ttl, &over],
            )
            .await
            .map_err(backend)?;
            let held = tx
                .query_opt(numbered(WORKTREE).as_str(), &[&lease.worktree])
                .await
                .map_err(backend)?;
            tx.commit().await.map_err(backend)?;
            Ok(match held {
                Some(row) => WorktreeLease {
                    worktree: row.try_get(0).map_err(backend)?,
                    owner: row.try_get(1).map_err(backend)?,
                    holder: row.try_get(2).map_err(backend)?,
                },
                None => lease,
            })
        })
    }

    fn keep_worktrees<'a>(
        &'a self,
        owner: &'a str,
        held: Vec<String>,
        ttl: Duration,
    ) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(backend)?;
            tx.execute(LET_GO, &[&owner, &held])
                .await
                .map_err(backend)?;
            tx.execute(KEEP, &[&owner, &ttl.as_secs_f64()])
                .await
                .map_err(backend)?;
            tx.commit().await.map_err(backend)
        })
    }
}

/// Takes worktree `$1` for owner `$2`, holder `$3` for `$4` seconds, unless
/// another owner's lease outlives now and that owner is not `$5`.
const TAKE: &str = "INSERT INTO worktree_leases (worktree, owner, holder, expires_at) \
     VALUES ($1, $2, $3, now() + make_interval(secs => $4)) ON CONFLICT (worktree) DO UPDATE \
     SET owner = excluded.owner, holder = excluded.holder, expires_at = excluded.expires_at \
     WHERE worktree_leases.owner = excluded.owner OR worktree_leases.expires_at < now() \
     OR worktree_leases.owner = $5";

/// Lets go of the leases of owner `$1` on worktrees not in `$2`.
const LET_GO: &str = "DELETE FROM worktree_leases WHERE owner = $1 AND worktree <> ALL($2)";

/// Keeps the leases of owner `$1` for `$2` seconds more.
const KEEP: &str = "UPDATE worktree_leases SET expires_at = now() + make_interval(secs => $2) \
     WHERE owner = $1";
