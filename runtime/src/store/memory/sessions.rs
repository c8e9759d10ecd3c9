//! Agent sessions' turns in memory.

use super::MemoryStore;
use crate::store::{BoxFuture, SessionTurn, Sessions, StoreResult};

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
