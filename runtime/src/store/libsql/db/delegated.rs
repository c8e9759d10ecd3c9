//! What delegated agents' calls leave, on the libSQL connection: sessions'
//! turns (a turn and the trim of the session's oldest are one transaction,
//! which the single writer orders) and transcripts.

use libsql::Value;

use super::{Db, backend, get};
use crate::store::delegated::{KEEP_TRANSCRIPT, RECORD, TRANSCRIPT, TRIM, TURNS};
use crate::store::{SessionTurn, StoreResult, Transcript};

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
}
