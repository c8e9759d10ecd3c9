//! What a trigger reads from: a topic of a broker, read as one member of a
//! consumer group (spec/triggers-stream.md): Redis Streams, NATS
//! JetStream and Kafka implement it.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::BoxFuture;

/// Where `topic`'s dead letters go, whatever the broker.
pub fn dead_letter_topic(topic: &str) -> String {
    format!("{topic}.dead-letter")
}

/// `mutex`, locked; a holder that panicked left it usable.
pub(super) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One message: where it is in the topic, and its fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Its position in the topic (what is acknowledged).
    pub position: String,
    /// Its fields: `body`, `id` and headers.
    pub fields: BTreeMap<String, String>,
}

/// Where the messages of one trigger come from.
pub trait Source: Send + Sync {
    /// Makes the consumer group (and the topic) if missing.
    fn prepare(&self) -> BoxFuture<'_, Result<(), String>>;
    /// Up to `count` messages no member has read, for `member`; waits up
    /// to `wait` for one.
    fn read<'a>(
        &'a self,
        member: &'a str,
        count: usize,
        wait: Duration,
    ) -> BoxFuture<'a, Result<Vec<Message>, String>>;
    /// Up to `count` messages another member read and left unacknowledged
    /// at least `idle`, now `member`'s.
    fn claim<'a>(
        &'a self,
        member: &'a str,
        idle: Duration,
        count: usize,
    ) -> BoxFuture<'a, Result<Vec<Message>, String>>;
    /// Reading is paused (back-pressure): keeps this member in its group
    /// without taking more work.
    fn hold(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(std::future::ready(Ok(())))
    }
    /// Acknowledges the message at `position`: it is done.
    fn ack<'a>(&'a self, position: &'a str) -> BoxFuture<'a, Result<(), String>>;
    /// Writes `message` to the dead-letter topic with `extra` fields, then
    /// acknowledges it.
    fn dead_letter<'a>(
        &'a self,
        message: &'a Message,
        extra: Vec<(String, String)>,
    ) -> BoxFuture<'a, Result<(), String>>;
    /// The newest `count` messages of the dead-letter topic, newest first.
    fn dead_letters(&self, count: usize) -> BoxFuture<'_, Result<Vec<Message>, String>>;
    /// Messages the group has not been given yet, and given but not
    /// acknowledged: `(lag, pending)`; lag is `None` where the broker does
    /// not say.
    fn backlog(&self) -> BoxFuture<'_, Result<(Option<u64>, u64), String>>;
}
