//! What delegated agents' calls leave, on PostgreSQL: sessions' turns (a
//! turn and the trim of the session's oldest are one transaction) and
//! transcripts.

use super::{PostgresStore, backend};
use crate::store::delegated::{KEEP_TRANSCRIPT, RECORD, TRANSCRIPT, TRIM, TURNS};
use crate::store::slots::numbered;
use crate::store::{BoxFuture, SessionTurn, Sessions, StoreResult, Transcript, Transcripts};

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
