//! What delegated agents' calls leave, in memory: sessions' turns,
//! transcripts and worktrees' writer leases.

use super::MemoryStore;
use std::time::Duration;

use crate::store::{
    BoxFuture, SessionTurn, Sessions, StoreResult, Transcript, Transcripts, WorktreeLease,
    Worktrees,
};
use crate::time::now_ms;

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

impl Worktrees for MemoryStore {
    fn take_worktree(
        &self,
        lease: WorktreeLease,
        ttl: Duration,
        over: Option<String>,
    ) -> BoxFuture<'_, StoreResult<WorktreeLease>> {
        let mut state = self.lock();
        let now = now_ms();
        let free = state
            .worktrees
            .get(&lease.worktree)
            .is_none_or(|(held, until)| {
                held.owner == lease.owner || *until < now || Some(&held.owner) == over.as_ref()
            });
        if free {
            let until = now + ttl.as_millis() as u64;
            state
                .worktrees
                .insert(lease.worktree.clone(), (lease.clone(), until));
        }
        let held = state
            .worktrees
            .get(&lease.worktree)
            .map(|(held, _)| held.clone());
        Box::pin(std::future::ready(Ok(held.unwrap_or(lease))))
    }

    fn keep_worktrees<'a>(
        &'a self,
        owner: &'a str,
        held: Vec<String>,
        ttl: Duration,
    ) -> BoxFuture<'a, StoreResult<()>> {
        let until = now_ms() + ttl.as_millis() as u64;
        let mut state = self.lock();
        state
            .worktrees
            .retain(|tree, (lease, _)| lease.owner != owner || held.contains(tree));
        for (lease, expires) in state.worktrees.values_mut() {
            if lease.owner == owner {
                *expires = until;
            }
        }
        Box::pin(std::future::ready(Ok(())))
    }
}
