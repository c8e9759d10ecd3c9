//! The worker slots action calls hold while they run, given out by
//! priority (spec/flow-control.md, "Priority and fairness"): when a slot
//! frees, the waiting call of the run with the lowest priority number gets
//! it, the longest waiting first among equals. A waiting call rises one
//! level each `aging` it waits, so one at 9 waits at most nine times
//! `aging` behind any stream of calls at 0: each is queued at the time it
//! came plus `aging` per level, and the earliest goes first. A call that
//! gives up waiting (its step timed out, its run was cancelled) leaves the
//! queue, and a slot handed to it as it left goes to the next.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

/// Every worker slot of an engine.
#[derive(Debug)]
pub struct Slots {
    state: Mutex<State>,
    /// When the slots were made: queue times are counted from it.
    origin: Instant,
    /// How long a waiting call takes to rise one level, in milliseconds.
    aging_ms: u64,
}

#[derive(Debug)]
struct State {
    free: usize,
    /// Waiting calls: earliest queue time (its arrival, plus `aging` per
    /// priority level), then earliest ticket first.
    queue: BinaryHeap<Reverse<(u64, u64)>>,
    /// The channel each waiting ticket is handed its slot on.
    handoff: std::collections::HashMap<u64, oneshot::Sender<()>>,
    next_ticket: u64,
}

/// A slot held; given back when dropped.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<Slots>,
}

impl Slots {
    /// `count` slots (at least one); a waiting call rises one priority
    /// level each `aging` (at least a millisecond).
    pub fn new(count: usize, aging: Duration) -> Arc<Slots> {
        Arc::new(Slots {
            origin: Instant::now(),
            aging_ms: u64::try_from(aging.as_millis()).unwrap_or(u64::MAX).max(1),
            state: Mutex::new(State {
                free: count.max(1),
                queue: BinaryHeap::new(),
                handoff: std::collections::HashMap::new(),
                next_ticket: 0,
            }),
        })
    }

    /// A slot if one is free and no call waits for one.
    pub fn try_take(self: &Arc<Self>) -> Option<Slot> {
        let mut state = self.lock();
        if state.free == 0 || !state.queue.is_empty() {
            return None;
        }
        state.free -= 1;
        Some(Slot {
            slots: self.clone(),
        })
    }

    /// A slot, once the calls queued before this one's arrival plus
    /// `aging` per priority level have had theirs.
    pub async fn take(self: &Arc<Self>, priority: u8) -> Slot {
        let arrived = u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        let queued_at = arrived.saturating_add(self.aging_ms.saturating_mul(u64::from(priority)));
        let (ticket, receiver) = {
            let mut state = self.lock();
            if state.free > 0 && state.queue.is_empty() {
                state.free -= 1;
                return Slot {
                    slots: self.clone(),
                };
            }
            let ticket = state.next_ticket;
            state.next_ticket += 1;
            let (sender, receiver) = oneshot::channel();
            state.queue.push(Reverse((queued_at, ticket)));
            state.handoff.insert(ticket, sender);
            (ticket, receiver)
        };
        let mut waiting = Waiting {
            slots: self.clone(),
            ticket,
            receiver: Some(receiver),
        };
        if let Some(receiver) = waiting.receiver.as_mut() {
            // The sender lives in the queue until it hands a slot over.
            let _ = receiver.await;
        }
        waiting.receiver = None;
        Slot {
            slots: self.clone(),
        }
    }

    /// Calls waiting for a slot.
    pub fn waiting(&self) -> usize {
        self.lock().handoff.len()
    }

    /// Gives a slot back: to the first call still waiting (a ticket
    /// whose call left has no sender any more), or to the free ones.
    fn give_back(&self) {
        let mut state = self.lock();
        while let Some(Reverse((_, ticket))) = state.queue.pop() {
            if let Some(sender) = state.handoff.remove(&ticket)
                && sender.send(()).is_ok()
            {
                return;
            }
        }
        state.free += 1;
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.give_back();
    }
}

/// A call waiting for a slot; dropped while waiting (its future was), it
/// leaves the queue, and a slot handed to it meanwhile goes on.
struct Waiting {
    slots: Arc<Slots>,
    ticket: u64,
    receiver: Option<oneshot::Receiver<()>>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let Some(mut receiver) = self.receiver.take() else {
            return;
        };
        // Still queued: its sender goes (its heap entry is skipped later).
        if self.slots.lock().handoff.remove(&self.ticket).is_some() {
            return;
        }
        // Handed a slot (under the lock, before this) it never took.
        if receiver.try_recv().is_ok() {
            self.slots.give_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    /// Starts a task taking a slot at `priority` and noting `name` in
    /// `order` when it has it, then holding it until `release` fires.
    fn waiter(
        slots: &Arc<Slots>,
        priority: u8,
        name: &'static str,
        order: &Arc<Mutex<Vec<&'static str>>>,
    ) -> tokio::task::JoinHandle<()> {
        let (slots, order) = (slots.clone(), order.clone());
        tokio::spawn(async move {
            let _slot = slots.take(priority).await;
            order.lock().unwrap().push(name);
            tokio::time::sleep(Duration::from_millis(1)).await;
        })
    }

    #[test]
    fn a_freed_slot_goes_to_the_lowest_priority_number_then_the_oldest() {
        runtime().block_on(async {
            let slots = Slots::new(1, Duration::from_mins(1));
            let held = slots.try_take().unwrap();
            let order = Arc::new(Mutex::new(Vec::new()));
            let mut tasks = Vec::new();
            for (priority, name) in [(9, "batch-1"), (9, "batch-2"), (0, "urgent"), (5, "normal")] {
                tasks.push(waiter(&slots, priority, name, &order));
                tokio::task::yield_now().await;
            }
            while slots.waiting() < 4 {
                tokio::task::yield_now().await;
            }
            assert!(slots.try_take().is_none(), "nobody jumps the queue");
            drop(held);
            for task in tasks {
                task.await.unwrap();
            }
            assert_eq!(
                *order.lock().unwrap(),
                ["urgent", "normal", "batch-1", "batch-2"]
            );
            assert!(slots.try_take().is_some(), "every slot came back");
        });
    }

    #[test]
    fn a_waiting_call_rises_one_level_each_aging_step() {
        let paused = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        paused.block_on(async {
            let slots = Slots::new(1, Duration::from_mins(1));
            let held = slots.try_take().unwrap();
            let order = Arc::new(Mutex::new(Vec::new()));
            let mut tasks = vec![waiter(&slots, 9, "batch", &order)];
            // A stream of urgent calls, one a minute: those that came within
            // nine minutes of the batch call go first, the later ones after.
            for (minute, name) in [(1, "urgent-1"), (8, "urgent-8"), (10, "urgent-10")] {
                let until = Duration::from_mins(minute).saturating_sub(started(&slots));
                tokio::time::advance(until).await;
                tasks.push(waiter(&slots, 0, name, &order));
                while slots.waiting() < tasks.len() {
                    tokio::task::yield_now().await;
                }
            }
            drop(held);
            for task in tasks {
                task.await.unwrap();
            }
            assert_eq!(
                *order.lock().unwrap(),
                ["urgent-1", "urgent-8", "batch", "urgent-10"]
            );
        });
    }

    /// How long since `slots` were made.
    fn started(slots: &Slots) -> Duration {
        slots.origin.elapsed()
    }

    #[test]
    fn slots_are_never_lost_nor_doubled_however_calls_come_and_go() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        for seed in 1..=20u64 {
            let mut state = seed;
            let mut next = move || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state
            };
            runtime().block_on(async {
                let slots = Slots::new(3, Duration::from_mins(1));
                let (holders, most) =
                    (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
                let mut tasks = Vec::new();
                for _ in 0..40 {
                    let (priority, patience, hold) = (next() % 10, next() % 3, next() % 3);
                    let (slots, holders, most) = (slots.clone(), holders.clone(), most.clone());
                    tasks.push(tokio::spawn(async move {
                        let taking = slots.take(priority as u8);
                        let slot = if patience == 0 {
                            match tokio::time::timeout(Duration::from_millis(hold), taking).await {
                                Ok(slot) => slot,
                                Err(_) => return,
                            }
                        } else {
                            taking.await
                        };
                        let now = holders.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(hold)).await;
                        holders.fetch_sub(1, Ordering::SeqCst);
                        drop(slot);
                    }));
                    if next() % 4 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
                for task in tasks {
                    task.await.unwrap();
                }
                assert!(
                    most.load(Ordering::SeqCst) <= 3,
                    "seed {seed}: more holders than slots"
                );
                assert_eq!(slots.waiting(), 0, "seed {seed}");
                let all: Vec<Slot> = (0..3).filter_map(|_| slots.try_take()).collect();
                assert_eq!(all.len(), 3, "seed {seed}: a slot was lost");
                assert!(
                    slots.try_take().is_none(),
                    "seed {seed}: a slot was doubled"
                );
            });
        }
    }

    #[test]
    fn a_slot_handed_to_a_call_dropped_before_it_took_it_comes_back() {
        runtime().block_on(async {
            let slots = Slots::new(1, Duration::from_mins(1));
            let held = slots.try_take().unwrap();
            let waiter = {
                let slots = slots.clone();
                tokio::spawn(async move {
                    let _slot = slots.take(5).await;
                    std::future::pending::<()>().await;
                })
            };
            while slots.waiting() < 1 {
                tokio::task::yield_now().await;
            }
            // Handed over, then cancelled before the waiter ever ran again.
            drop(held);
            waiter.abort();
            assert!(waiter.await.unwrap_err().is_cancelled());
            assert!(slots.try_take().is_some(), "the slot came back");
        });
    }

    #[test]
    fn a_call_that_stops_waiting_leaves_its_turn_to_the_next() {
        runtime().block_on(async {
            let slots = Slots::new(1, Duration::from_mins(1));
            let held = slots.try_take().unwrap();
            let gives_up = {
                let slots = slots.clone();
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(Duration::from_millis(5), slots.take(0)).await;
                })
            };
            let order = Arc::new(Mutex::new(Vec::new()));
            let patient = waiter(&slots, 9, "patient", &order);
            gives_up.await.unwrap();
            drop(held);
            patient.await.unwrap();
            assert_eq!(*order.lock().unwrap(), ["patient"]);
            assert_eq!(slots.waiting(), 0);
            let one = slots.try_take().expect("the slot came back");
            assert!(slots.try_take().is_none(), "one slot, not two");
            drop(one);
        });
    }
}
