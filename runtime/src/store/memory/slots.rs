//! Slots of concurrency keys in memory (spec/flow-control.md,
//! "Admission"): the store's mutex is every key's lock.

use super::{MemoryStore, State};
use crate::store::InboxMessage;
use crate::store::slots::admitted_mail;
use crate::store::{
    Admission, Admitted, BoxFuture, Debounced, PendingStart, RateCall, Rated, Slots, Standing,
    StoreResult,
};

/// A run of a concurrency key.
#[derive(Debug, Clone)]
pub(super) struct SlotRow {
    key: String,
    limit: u32,
    turn: u64,
    held: bool,
    at: String,
}

impl SlotRow {
    /// The order runs waiting for a slot are admitted in.
    fn turn<'a>(&'a self, id: &'a str) -> (u64, &'a str) {
        (self.turn, id)
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

impl State {
    /// Where run `id` stands with its key.
    fn standing(&self, id: &str) -> Option<Standing> {
        let row = self.slots.get(id)?;
        let admitted = if row.held {
            Admitted::Holds
        } else {
            let mine = row.turn(id);
            let waiting = self.of_key(&row.key, false);
            let position = waiting.iter().filter(|(id, r)| r.turn(id) < mine).count();
            Admitted::Waits {
                position: position as u64,
                holders: self.holders(&row.key),
            }
        };
        Some(Standing {
            key: row.key.clone(),
            limit: row.limit,
            admitted,
        })
    }

    fn holders(&self, key: &str) -> Vec<String> {
        self.of_key(key, true)
            .into_iter()
            .map(|(id, _)| id.clone())
            .collect()
    }
}

impl Slots for MemoryStore {
    fn admit(&self, ask: Admission) -> BoxFuture<'_, StoreResult<Admitted>> {
        let mut state = self.lock();
        if state.standing(&ask.workflow_id).is_none() {
            let holders = state.holders(&ask.key);
            let full = holders.len() >= ask.limit as usize;
            if full && !ask.wait {
                return Box::pin(std::future::ready(Ok(Admitted::Refused { holders })));
            }
            let row = SlotRow {
                key: ask.key.clone(),
                limit: ask.limit,
                turn: ask.turn,
                held: !full,
                at: ask.at.clone(),
            };
            state.slots.insert(ask.workflow_id.clone(), row);
        }
        let standing = state.standing(&ask.workflow_id);
        Box::pin(std::future::ready(Ok(
            standing.map_or(Admitted::Holds, |s| s.admitted)
        )))
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
        let free = limit.saturating_sub(state.holders(key).len());
        let next: Vec<String> = state
            .of_key(key, false)
            .into_iter()
            .take(free)
            .map(|(id, _)| id.clone())
            .collect();
        let (mail, at) = (admitted_mail(), crate::time::rfc3339(crate::time::now_ms()));
        for id in &next {
            if let Some(row) = state.slots.get_mut(id) {
                row.held = true;
            }
            state.next_message += 1;
            let message = InboxMessage {
                id: state.next_message,
                workflow_id: id.clone(),
                event: mail.clone(),
                created_at: at.clone(),
            };
            state.inbox.insert(message.id, message);
        }
        Box::pin(std::future::ready(Ok(next)))
    }

    fn waiting(&self) -> BoxFuture<'_, StoreResult<Vec<(String, u64)>>> {
        let state = self.lock();
        let mut keys: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
        for (_, row) in state
            .slots
            .iter()
            .filter(|(id, row)| !row.held && state.live(id))
        {
            *keys.entry(row.key.clone()).or_default() += 1;
        }
        Box::pin(std::future::ready(Ok(keys.into_iter().collect())))
    }

    fn standing<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<Standing>>> {
        Box::pin(std::future::ready(Ok(self.lock().standing(id))))
    }

    fn take_call(&self, call: RateCall) -> BoxFuture<'_, StoreResult<Rated>> {
        let mut state = self.lock();
        // The clock is read under the lock: calls are windowed in the
        // order they are counted.
        let now = crate::time::now_ms();
        let window = call.window_at(now);
        let next = window + call.per_ms;
        state
            .windows
            .retain(|(key, start), _| *key != call.key || *start >= window);
        let count = |start: u64| {
            state
                .windows
                .get(&(call.key.clone(), start))
                .copied()
                .unwrap_or(0)
        };
        let rated = call.rated(now, window, count(window), count(next));
        if matches!(rated, Rated::Counted { .. }) {
            *state.windows.entry((call.key.clone(), window)).or_default() += 1;
            if call.spills(now, window) {
                *state.windows.entry((call.key.clone(), next)).or_default() += 1;
            }
        }
        Box::pin(std::future::ready(Ok(rated)))
    }

    fn debounce(&self, delivery: Debounced) -> BoxFuture<'_, StoreResult<PendingStart>> {
        let mut state = self.lock();
        let at = (delivery.template.clone(), delivery.key.clone());
        let start = delivery.applied_to(state.pending.get(&at));
        state.pending.insert(at, start.clone());
        Box::pin(std::future::ready(Ok(start)))
    }

    fn due_starts(&self, now_ms: u64, limit: u32) -> BoxFuture<'_, StoreResult<Vec<PendingStart>>> {
        let state = self.lock();
        let mut due: Vec<PendingStart> = state
            .pending
            .values()
            .filter(|p| p.due_ms <= now_ms)
            .cloned()
            .collect();
        due.sort_by_key(|p| p.due_ms);
        due.truncate(limit as usize);
        Box::pin(std::future::ready(Ok(due)))
    }

    fn forget_start<'a>(&'a self, start: &'a PendingStart) -> BoxFuture<'a, StoreResult<()>> {
        let mut state = self.lock();
        let at = (start.template.clone(), start.key.clone());
        if state
            .pending
            .get(&at)
            .is_some_and(|p| p.first_ms == start.first_ms)
        {
            state.pending.remove(&at);
        }
        Box::pin(std::future::ready(Ok(())))
    }
}
