//! The newest messages of a Kafka dead-letter topic, for the panel: a
//! consumer of its own (no group) starts `count` back from the end of each
//! partition, then reads on from where it left at each look.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::Message as _;
use rdkafka::{Offset, TopicPartitionList};

use super::super::source::Message;
use super::{WAIT, config, fields_of, held, lock, partitions_of, said};

/// Messages read at one look, at most.
const LOOK: usize = 10_000;

/// A reader of one dead-letter topic.
pub struct DeadLetters {
    servers: String,
    topic: String,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    reader: Option<BaseConsumer>,
    /// The newest seen, with their timestamps, newest first.
    seen: Vec<(i64, Message)>,
}

impl DeadLetters {
    /// A reader of `topic` at `servers`; it connects at the first look.
    pub fn new(servers: &str, topic: &str) -> DeadLetters {
        DeadLetters {
            servers: servers.to_owned(),
            topic: topic.to_owned(),
            state: Arc::default(),
        }
    }

    /// The newest `count` dead letters, newest first.
    pub async fn newest(&self, count: usize) -> Result<Vec<Message>, String> {
        let (servers, topic, state) = (
            self.servers.clone(),
            self.topic.clone(),
            Arc::clone(&self.state),
        );
        tokio::task::spawn_blocking(move || {
            let mut state = lock(&state);
            let looked = look(&mut state, &servers, &topic, count);
            if looked.is_err() {
                // Connect and start again at the next look.
                state.reader = None;
            }
            looked
        })
        .await
        .map_err(said)?
    }
}

fn look(
    state: &mut State,
    servers: &str,
    topic: &str,
    count: usize,
) -> Result<Vec<Message>, String> {
    if state.reader.is_none() {
        state.reader = Some(reader(servers, topic, count)?);
        state.seen.clear();
    }
    let reader = state.reader.as_ref().ok_or("kafka: no reader")?;
    for _ in 0..LOOK {
        // What has come is taken; what is still on its way, at the next look.
        let Some(next) = reader.poll(Duration::ZERO) else {
            break;
        };
        let message = next.map_err(said)?;
        let at = message.timestamp().to_millis().unwrap_or_default();
        let letter = Message {
            position: held::position(message.partition(), message.offset()),
            fields: fields_of(&message),
        };
        state.seen.push((at, letter));
    }
    state
        .seen
        .sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.position.cmp(&a.1.position)));
    state.seen.truncate(count);
    Ok(state.seen.iter().map(|(_, m)| m.clone()).collect())
}

/// A consumer of every partition of `topic`, `count` back from its end.
fn reader(servers: &str, topic: &str, count: usize) -> Result<BaseConsumer, String> {
    let reader: BaseConsumer = config(servers)
        .set("group.id", "opcode-dead-letters")
        .set("enable.auto.commit", "false")
        .create()
        .map_err(said)?;
    let back = i64::try_from(count).unwrap_or(i64::MAX);
    let mut list = TopicPartitionList::new();
    for partition in partitions_of(&reader, topic)? {
        let (low, high) = reader
            .fetch_watermarks(topic, partition, WAIT)
            .map_err(said)?;
        list.add_partition_offset(topic, partition, Offset::Offset((high - back).max(low)))
            .map_err(said)?;
    }
    reader.assign(&list).map_err(said)?;
    Ok(reader)
}
