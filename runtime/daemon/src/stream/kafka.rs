//! Kafka as a [`Source`] (librdkafka, through `rdkafka`): the topic is a
//! Kafka topic, the group a Kafka consumer group every daemon joins. The
//! group's coordinator shares the partitions out, and gives a dead
//! member's to the others once its session times out (`claim_after`, at
//! least the 6 s brokers accept). An acknowledgement lets the partition's
//! committed offset move up to the oldest message still held
//! ([`held::Held`]), so nothing is committed before its run is in the
//! store. The lag is the group's: high watermark minus committed offset,
//! over every partition of the topic.

mod dead;
mod held;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use futures::future::BoxFuture;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::{BorrowedMessage, Header, Headers as _, Message as _, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use self::dead::DeadLetters;
use self::held::Held;
use super::source::{Message, Source, dead_letter_topic, lock};

/// How long a call to the broker may take.
const WAIT: Duration = Duration::from_secs(10);
/// Messages held unacknowledged past which no more is read (only claims).
const MAX_HELD: usize = 1_000;

/// One topic of a Kafka cluster, read as one member of a group.
pub struct KafkaSource {
    consumer: Arc<StreamConsumer<Membership>>,
    /// For the group's lag: connections of its own, as a request on the
    /// consumer's waits behind its long-polling fetch.
    gauge: Arc<BaseConsumer>,
    producer: FutureProducer,
    held: Arc<Mutex<Held>>,
    /// Whether reading is paused (back-pressure): partitions assigned
    /// meanwhile are paused too.
    paused: Arc<AtomicBool>,
    /// Messages the consumer gave while reading was paused, for the next
    /// read.
    spilled: Mutex<VecDeque<Message>>,
    dead: DeadLetters,
    servers: String,
    topic: String,
}

/// The settings every client of `servers` gets.
pub fn config(servers: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", servers)
        .set("socket.timeout.ms", "10000");
    config
}

impl KafkaSource {
    /// A member named `member` of `group` reading `topic` at `servers`; a
    /// member silent for `claim_after` leaves the group, its partitions
    /// going to the others.
    pub fn connect(
        servers: &str,
        topic: &str,
        group: &str,
        member: &str,
        claim_after: Duration,
    ) -> Result<KafkaSource, String> {
        let session = claim_after.as_millis().clamp(6_000, 300_000);
        let held = Arc::new(Mutex::new(Held::default()));
        let paused = Arc::new(AtomicBool::new(false));
        let membership = Membership {
            topic: topic.to_owned(),
            held: Arc::clone(&held),
            paused: Arc::clone(&paused),
        };
        let consumer: StreamConsumer<Membership> = config(servers)
            .set("group.id", group)
            .set("client.id", member)
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("session.timeout.ms", session.to_string())
            .set("heartbeat.interval.ms", (session / 3).to_string())
            .create_with_context(membership)
            .map_err(said)?;
        // In the group's name to read its offsets; it never joins.
        let gauge: BaseConsumer = config(servers)
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .map_err(said)?;
        let producer: FutureProducer = config(servers)
            .set("client.id", member)
            .set("message.timeout.ms", "30000")
            .create()
            .map_err(said)?;
        Ok(KafkaSource {
            consumer: Arc::new(consumer),
            gauge: Arc::new(gauge),
            producer,
            held,
            paused,
            spilled: Mutex::new(VecDeque::new()),
            dead: DeadLetters::new(servers, &dead_letter_topic(topic)),
            servers: servers.to_owned(),
            topic: topic.to_owned(),
        })
    }

    /// Commits, without waiting, what acknowledgements let be committed.
    fn commit(&self) {
        let commits = lock(&self.held).take_commits(None);
        if commits.is_empty() {
            return;
        }
        let committed = list_of(&self.topic, &commits)
            .and_then(|list| self.consumer.commit(&list, CommitMode::Async));
        if let Err(e) = committed {
            tracing::warn!(topic = %self.topic, error = %e, "kafka: a commit failed; it is asked again");
            let mut held = lock(&self.held);
            for (partition, _) in commits {
                held.retry(partition);
            }
        }
    }

    /// `message` as a [`Message`], held until acknowledged.
    fn take(&self, message: &BorrowedMessage<'_>) -> Message {
        let taken = Message {
            position: held::position(message.partition(), message.offset()),
            fields: fields_of(message),
        };
        lock(&self.held).read(
            message.partition(),
            message.offset(),
            taken.clone(),
            Instant::now(),
        );
        taken
    }

    /// Stops pausing: the assigned partitions are fetched again.
    fn resume(&self) -> Result<(), String> {
        if self.paused.swap(false, Ordering::SeqCst) {
            let assigned = self.consumer.assignment().map_err(said)?;
            self.consumer.resume(&assigned).map_err(said)?;
        }
        Ok(())
    }
}

/// The consumer's part in the group: a partition taken away commits what
/// may be committed of it and is forgotten; one given while reading is
/// paused is paused too.
struct Membership {
    topic: String,
    held: Arc<Mutex<Held>>,
    paused: Arc<AtomicBool>,
}

impl ClientContext for Membership {}

impl ConsumerContext for Membership {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(list) = rebalance else {
            return;
        };
        let partitions: Vec<i32> = list
            .elements_for_topic(&self.topic)
            .iter()
            .map(rdkafka::topic_partition_list::TopicPartitionListElem::partition)
            .collect();
        let mut held = lock(&self.held);
        let commits = held.take_commits(Some(&partitions));
        for partition in partitions {
            held.forget(partition);
        }
        drop(held);
        if !commits.is_empty()
            && let Ok(list) = list_of(&self.topic, &commits)
            && let Err(e) = consumer.commit(&list, CommitMode::Sync)
        {
            tracing::warn!(topic = %self.topic, error = %e, "kafka: commit before a rebalance failed");
        }
    }

    fn commit_callback(&self, result: KafkaResult<()>, offsets: &TopicPartitionList) {
        if let Err(e) = result {
            tracing::warn!(topic = %self.topic, error = %e, "kafka: a commit failed; it is asked again");
            let mut held = lock(&self.held);
            for element in offsets.elements_for_topic(&self.topic) {
                held.retry(element.partition());
            }
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(list) = rebalance
            && self.paused.load(Ordering::SeqCst)
            && let Err(e) = consumer.pause(list)
        {
            tracing::warn!(topic = %self.topic, error = %e, "kafka: pausing a partition failed");
        }
    }
}

impl Source for KafkaSource {
    fn prepare(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            let admin: AdminClient<DefaultClientContext> =
                config(&self.servers).create().map_err(said)?;
            for topic in [self.topic.clone(), dead_letter_topic(&self.topic)] {
                if exists(&self.gauge, &topic).await? {
                    continue;
                }
                // The broker's own defaults (num.partitions, its replication).
                let new = NewTopic::new(&topic, -1, TopicReplication::Fixed(-1));
                let options = AdminOptions::new().operation_timeout(Some(WAIT));
                let made = admin.create_topics([&new], &options).await.map_err(said)?;
                for result in made {
                    match result {
                        Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                        Err((name, code)) => {
                            return Err(format!(
                                "kafka: topic {name} could not be made ({code}); make it, with \
                                 as many partitions as daemons may share it"
                            ));
                        }
                    }
                }
            }
            self.consumer.subscribe(&[&self.topic]).map_err(said)
        })
    }

    fn read<'a>(
        &'a self,
        _member: &'a str,
        count: usize,
        wait: Duration,
    ) -> BoxFuture<'a, Result<Vec<Message>, String>> {
        Box::pin(async move {
            self.commit();
            self.resume()?;
            let mut out: Vec<Message> = {
                let mut spilled = lock(&self.spilled);
                let n = count.min(spilled.len());
                spilled.drain(..n).collect()
            };
            if !out.is_empty() {
                return Ok(out);
            }
            if lock(&self.held).count() >= MAX_HELD {
                tokio::time::sleep(wait).await;
                return Ok(out);
            }
            let first = match tokio::time::timeout(wait, self.consumer.recv()).await {
                Err(_) => return Ok(out),
                Ok(first) => first.map_err(said)?,
            };
            out.push(self.take(&first));
            drop(first);
            while out.len() < count {
                match self.consumer.recv().now_or_never() {
                    Some(Ok(next)) => out.push(self.take(&next)),
                    Some(Err(e)) => {
                        // Said by the next read, after these are delivered.
                        tracing::warn!(topic = %self.topic, error = %e, "kafka: read");
                        break;
                    }
                    None => break,
                }
            }
            Ok(out)
        })
    }

    fn hold(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            self.commit();
            if !self.paused.swap(true, Ordering::SeqCst) {
                let assigned = self.consumer.assignment().map_err(said)?;
                self.consumer.pause(&assigned).map_err(said)?;
            }
            // Polled, the group sees this member alive through rebalances.
            while let Some(next) = self.consumer.recv().now_or_never() {
                let message = next.map_err(said)?;
                let taken = self.take(&message);
                lock(&self.spilled).push_back(taken);
            }
            Ok(())
        })
    }

    fn claim<'a>(
        &'a self,
        _member: &'a str,
        idle: Duration,
        count: usize,
    ) -> BoxFuture<'a, Result<Vec<Message>, String>> {
        // A dead member's partitions come through the group; what is left
        // here is this member's own, held past `idle`.
        let due = lock(&self.held).due(idle, count, Instant::now());
        Box::pin(std::future::ready(Ok(due)))
    }

    fn ack<'a>(&'a self, position: &'a str) -> BoxFuture<'a, Result<(), String>> {
        if let Some((partition, offset)) = held::parse(position) {
            lock(&self.held).ack(partition, offset);
        }
        Box::pin(std::future::ready(Ok(())))
    }

    fn dead_letter<'a>(
        &'a self,
        message: &'a Message,
        extra: Vec<(String, String)>,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let mut headers = OwnedHeaders::new();
            let fields = message.fields.iter().filter(|(k, _)| k.as_str() != "body");
            for (key, value) in fields.chain(extra.iter().map(|(k, v)| (k, v))) {
                headers = headers.insert(Header {
                    key,
                    value: Some(value),
                });
            }
            headers = headers.insert(Header {
                key: "source_id",
                value: Some(&message.position),
            });
            let topic = dead_letter_topic(&self.topic);
            let mut record: FutureRecord<'_, String, String> =
                FutureRecord::to(&topic).headers(headers);
            if let Some(body) = message.fields.get("body") {
                record = record.payload(body);
            }
            if let Some(key) = message.fields.get("key") {
                record = record.key(key);
            }
            self.producer
                .send(record, WAIT)
                .await
                .map_err(|(e, _)| said(e))?;
            self.ack(&message.position).await
        })
    }

    fn dead_letters(&self, count: usize) -> BoxFuture<'_, Result<Vec<Message>, String>> {
        Box::pin(self.dead.newest(count))
    }

    fn backlog(&self) -> BoxFuture<'_, Result<(Option<u64>, u64), String>> {
        Box::pin(async move {
            self.commit();
            let gauge = Arc::clone(&self.gauge);
            let topic = self.topic.clone();
            let lag = tokio::task::spawn_blocking(move || group_lag(&gauge, &topic))
                .await
                .map_err(said)??;
            Ok((Some(lag), lock(&self.held).count() as u64))
        })
    }
}

/// Messages of every partition of `topic` past the group's committed
/// offset (from the start where it committed none).
fn group_lag(consumer: &BaseConsumer, topic: &str) -> Result<u64, String> {
    let partitions = partitions_of(consumer, topic)?;
    let mut list = TopicPartitionList::new();
    for partition in &partitions {
        list.add_partition(topic, *partition);
    }
    let committed = consumer.committed_offsets(list, WAIT).map_err(said)?;
    let mut lag = 0u64;
    for element in committed.elements_for_topic(topic) {
        let (low, high) = consumer
            .fetch_watermarks(topic, element.partition(), WAIT)
            .map_err(said)?;
        let from = match element.offset() {
            Offset::Offset(offset) => offset.max(low),
            _ => low,
        };
        lag += u64::try_from(high - from).unwrap_or(0);
    }
    Ok(lag)
}

/// The partitions of `topic`, as the cluster's metadata says.
fn partitions_of<C: ConsumerContext, K: Consumer<C>>(
    consumer: &K,
    topic: &str,
) -> Result<Vec<i32>, String> {
    let metadata = consumer.fetch_metadata(Some(topic), WAIT).map_err(said)?;
    let found = metadata.topics().iter().find(|t| t.name() == topic);
    match found {
        Some(t) if t.error().is_none() => Ok(t
            .partitions()
            .iter()
            .map(rdkafka::metadata::MetadataPartition::id)
            .collect()),
        _ => Err(format!("kafka: no topic {topic}")),
    }
}

/// Whether the cluster has `topic`.
async fn exists(consumer: &Arc<BaseConsumer>, topic: &str) -> Result<bool, String> {
    let consumer = Arc::clone(consumer);
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        let metadata = consumer.fetch_metadata(Some(&topic), WAIT).map_err(said)?;
        Ok(metadata
            .topics()
            .iter()
            .any(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty()))
    })
    .await
    .map_err(said)?
}

/// A message's fields: its headers (the first value of each), its key as
/// `key`, its payload as `body` (none for a tombstone).
fn fields_of(message: &BorrowedMessage<'_>) -> BTreeMap<String, String> {
    let headers = message
        .headers()
        .into_iter()
        .flat_map(|h| h.iter())
        .filter_map(|h| Some((h.key, h.value?)));
    fields(headers, message.key(), message.payload())
}

/// The fields of a message of `headers`, `key` and `payload`: a header
/// named `body` is left out (the body is the payload alone), the key is
/// `key` over a header of that name.
fn fields<'a>(
    headers: impl Iterator<Item = (&'a str, &'a [u8])>,
    key: Option<&[u8]>,
    payload: Option<&[u8]>,
) -> BTreeMap<String, String> {
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let mut fields = BTreeMap::new();
    for (name, value) in headers.filter(|(name, _)| *name != "body") {
        fields.entry(name.to_owned()).or_insert_with(|| text(value));
    }
    if let Some(key) = key {
        fields.insert("key".into(), text(key));
    }
    if let Some(payload) = payload {
        fields.insert("body".into(), text(payload));
    }
    fields
}

/// `commits` of `topic` as the list Kafka commits.
fn list_of(topic: &str, commits: &[(i32, i64)]) -> Result<TopicPartitionList, KafkaError> {
    let mut list = TopicPartitionList::new();
    for (partition, offset) in commits {
        list.add_partition_offset(topic, *partition, Offset::Offset(*offset))?;
    }
    Ok(list)
}

#[allow(clippy::needless_pass_by_value)] // used as `map_err(said)`
fn said<E: std::fmt::Display>(e: E) -> String {
    format!("kafka: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_its_headers_its_key_and_its_value_as_the_body() {
        let headers = [
            ("source", &b"factory"[..]),
            ("source", b"again"),
            ("key", b"from a header"),
            ("body", b"{\"n\": 666}"),
        ];
        let got = fields(headers.into_iter(), Some(b"k1"), Some(b"{\"n\": 1}"));
        let want: BTreeMap<String, String> =
            [("body", "{\"n\": 1}"), ("key", "k1"), ("source", "factory")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
        assert_eq!(got, want);
        let tombstone = fields([("body", &b"{}"[..])].into_iter(), None, None);
        assert!(tombstone.is_empty(), "no body from a header: {tombstone:?}");
    }
}
