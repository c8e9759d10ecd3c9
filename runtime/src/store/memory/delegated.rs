//! What delegated agents' calls leave, in memory: sessions' turns and
//! transcripts.

use super::MemoryStore;
use crate::store::{BoxFuture, SessionTurn, Sessions, StoreResult, Transcript, Transcripts};

impl Sessions for MemoryStore {
    fn session_turns<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<Vec<String>>> {
        let turns = self
            .lock()
            .sessions
            .get(session)
            .map_or_else(Vec::new, |turns| {
                turns.iter().map(|(_, _, turn)| turn.clone()).collect()
            });
        Box::pin(std::future::ready(Ok(turns)))
    }

    fn record_turn(&self, turn: SessionTurn, keep: u32) -> BoxFuture<'_, StoreResult<()>> {
        let mut state = self.lock();
        let turns = state.sessions.entry(turn.session).or_default();
        turns.retain(|(run, step, _)| !(*run == turn.workflow_id && *step == turn.step));
        turns.push((turn.workflow_id, turn.step, turn.turn));
        let past = turns.len().saturating_sub(keep as usize);
        turns.drain(..past);
        Box::pin(std::future::ready(Ok(())))
    }
}

impl Transcripts for MemoryStore {
    fn keep_transcript(&self, transcript: Transcript) -> BoxFuture<'_, StoreResult<()>> {
        let key = (transcript.workflow_id, transcript.step, transcript.attempt);
        self.lock().transcripts.insert(key, transcript.text);
        Box::pin(std::future::ready(Ok(())))
    }

    fn transcript<'a>(
        &'a self,
        workflow_id: &'a str,
        step: &'a str,
        attempt: u32,
    ) -> BoxFuture<'a, StoreResult<Option<String>>> {
        let key = (workflow_id.to_owned(), step.to_owned(), attempt);
        let text = self.lock().transcripts.get(&key).cloned();
        Box::pin(std::future::ready(Ok(text)))
    }
}
