//! Questions actions in flight ask (spec/agents.md, "Permission
//! requests"): the calls waiting for their answers, by run, dispatch and
//! question key. A question goes into its run as
//! [`Event::ActionAsked`](opcode_vm::Event::ActionAsked); the VM's
//! [`Effect::AnswerAction`](opcode_vm::Effect::AnswerAction) comes back
//! here and wakes every call waiting on that question.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use opcode_vm::event::EffectId;
use tokio::sync::oneshot;

/// Who waits for which question: (run, dispatch, key).
type Question = (String, EffectId, String);

/// The calls waiting for answers.
#[derive(Default)]
pub struct Asks(Mutex<HashMap<Question, Vec<oneshot::Sender<String>>>>);

impl Asks {
    /// Waits for the answer to question `key` of dispatch `effect` of `run`.
    pub fn wait(&self, run: &str, effect: EffectId, key: &str) -> oneshot::Receiver<String> {
        let (tx, rx) = oneshot::channel();
        self.lock()
            .entry((run.to_owned(), effect, key.to_owned()))
            .or_default()
            .push(tx);
        rx
    }

    /// Gives every call waiting for question `key` of `effect` its answer.
    pub fn answer(&self, run: &str, effect: EffectId, key: &str, choice: &str) {
        let waiting = self
            .lock()
            .remove(&(run.to_owned(), effect, key.to_owned()));
        for tx in waiting.into_iter().flatten() {
            let _ = tx.send(choice.to_owned());
        }
    }

    /// Forgets the questions of dispatch `effect` of `run` (it ended, or
    /// was stopped): their waiters get no answer.
    pub fn forget(&self, run: &str, effect: EffectId) {
        self.lock()
            .retain(|(r, e, _), _| !(r == run && *e == effect));
    }

    /// Forgets every question of `run`.
    pub fn forget_run(&self, run: &str) {
        self.lock().retain(|(r, _, _), _| r != run);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Question, Vec<oneshot::Sender<String>>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_waiter_of_a_question_gets_its_answer_and_others_none() {
        let asks = Asks::default();
        let first = asks.wait("run", 3, "k");
        let second = asks.wait("run", 3, "k");
        let other = asks.wait("run", 4, "k");
        asks.answer("run", 3, "k", "allow");
        assert_eq!(first.await.as_deref(), Ok("allow"));
        assert_eq!(second.await.as_deref(), Ok("allow"));
        asks.forget("run", 4);
        assert!(other.await.is_err(), "a forgotten question has no answer");
    }
}
