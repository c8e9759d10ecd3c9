//! Slots of concurrency keys in memory (spec/flow-control.md,
//! "Admission"): the store's mutex is every key's lock.

use super::{MemoryStore, State};
use crate::store::{Admission, Admitted, BoxFuture, Slots, StoreResult};

/// A run of a concurrency key.
#[derive(Debug, Clone)]
pub(super) struct SlotRow {
    key: String,
    limit: u32,
    priority: u8,
    held: bool,
    at: String,
}

impl SlotRow {
    /// The order runs waiting for a slot are admitted in.
    fn turn<'a>(&'a self, id: &'a str) -> (u8, &'a str, &'a str) {
        (self.priority, self.at.as_str(), id)
    }
}

impl State {
    /// Is run `id` stored and not ended?
    fn live(&self, id: &str) -> bool {
        self.workflows.get(id).is_some_and(|w| !w.status.is_ended())
    }

    /// The live runs of `key`, holding a slot (`held`) or waiting, in turn.
    fn of_key(&self, key: &str, held: bool) -> Vec<(&String, &SlotRow)> {
        let mut rows: Vec<_> = self
            .slots
            .iter()
            .filter(|(id, row)| row.key == key && row.held == held && self.live(id))
            .collect();
        if held {
            rows.sort_by(|(a, x), (b, y)| (&x.at, a).cmp(&(&y.at, b)));
        } else {
            rows.sort_by(|(a, x), (b, y)| x.turn(a).cmp(&y.turn(b)));
        }
        rows
    }
}

impl Slots for MemoryStore {
    fn admit(&self, ask: Admission) -> BoxFuture<'_, StoreResult<Admitted>> {
        let mut state = self.lock();
        let holders: Vec<String> = state
            .of_key(&ask.key, true)
            .into_iter()
            .map(|(id, _)| id.clone())
            .collect();
        let full = holders.len() >= ask.limit as usize;
        let held = match state.slots.get(&ask.workflow_id) {
            Some(row) => row.held,
            None if full && !ask.wait => {
                return Box::pin(std::future::ready(Ok(Admitted::Refused { holders })));
            }
            None => {
                let row = SlotRow {
                    key: ask.key.clone(),
                    limit: ask.limit,
                    priority: ask.priority,
                    held: !full,
                    at: ask.at.clone(),
                };
                state.slots.insert(ask.workflow_id.clone(), row);
                !full
            }
        };
        let answer = if held {
            Admitted::Holds
        } else {
            let mine = state.slots[&ask.workflow_id].turn(&ask.workflow_id);
            let waiting = state.of_key(&ask.key, false);
            let position = waiting.iter().filter(|(id, r)| r.turn(id) < mine).count();
            Admitted::Waits {
                position: position as u64,
                holders,
            }
        };
        Box::pin(std::future::ready(Ok(answer)))
    }

    fn promote<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Vec<String>>> {
        let mut state = self.lock();
        let gone: Vec<String> = state
            .slots
            .iter()
            .filter(|(id, row)| row.key == key && !state.live(id))
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            state.slots.remove(&id);
        }
        let limit = state
            .slots
            .values()
            .filter(|row| row.key == key)
            .max_by(|a, b| a.at.cmp(&b.at))
            .map_or(0, |row| row.limit as usize);
        let free = limit.saturating_sub(state.of_key(key, true).len());
        let next: Vec<String> = state
            .of_key(key, false)
            .into_iter()
            .take(free)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &next {
            if let Some(row) = state.slots.get_mut(id) {
                row.held = true;
            }
        }
        Box::pin(std::future::ready(Ok(next)))
    }

    fn waiting_keys(&self) -> BoxFuture<'_, StoreResult<Vec<String>>> {
        let state = self.lock();
        let mut keys: Vec<String> = state
            .slots
            .iter()
            .filter(|(id, row)| !row.held && state.live(id))
            .map(|(_, row)| row.key.clone())
            .collect();
        keys.sort();
        keys.dedup();
        Box::pin(std::future::ready(Ok(keys)))
    }
}
