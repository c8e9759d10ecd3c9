//! NATS JetStream as a [`Source`]: the topic is a subject, kept by the
//! stream that captures it (made when none does, capturing the subject and
//! its `.dead-letter`); the group is a durable pull consumer every daemon
//! fetches from; a message not acknowledged within `claim_after` is given
//! again by the server (so `claim` has nothing to do); the lag is the
//! consumer's `num_pending`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::consumer::pull::Config;
use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, PullConsumer};
use async_nats::jetstream::{self, Context};
use futures::StreamExt as _;
use futures::future::BoxFuture;

use super::source::{Message, Source, dead_letter_topic, lock};

/// One subject of a NATS server, read by one durable consumer.
pub struct NatsSource {
    context: Context,
    consumer: Mutex<Option<PullConsumer>>,
    stream: Mutex<String>,
    topic: String,
    group: String,
    ack_wait: Duration,
    /// Messages read and not acknowledged yet, by position.
    unacked: Mutex<HashMap<String, jetstream::Message>>,
    /// A consumer of the dead-letter subject, and the newest dead letters
    /// it gave, newest first.
    dead: Mutex<Option<PullConsumer>>,
    dead_seen: Mutex<VecDeque<Message>>,
}

impl NatsSource {
    /// Connects to `url` for `topic`, read by `group`; a message not
    /// acknowledged within `ack_wait` is given again.
    pub async fn connect(
        url: &str,
        topic: &str,
        group: &str,
        ack_wait: Duration,
    ) -> Result<NatsSource, String> {
        let client = async_nats::ConnectOptions::new()
            .connection_timeout(Duration::from_secs(5))
            .connect(url)
            .await
            .map_err(said)?;
        Ok(NatsSource {
            context: jetstream::new(client),
            consumer: Mutex::new(None),
            stream: Mutex::new(String::new()),
            topic: topic.to_owned(),
            group: group.to_owned(),
            ack_wait,
            unacked: Mutex::new(HashMap::new()),
            dead: Mutex::new(None),
            dead_seen: Mutex::new(VecDeque::new()),
        })
    }

    fn consumer(&self) -> Result<PullConsumer, String> {
        lock(&self.consumer)
            .clone()
            .ok_or_else(|| "nats: the consumer is not made yet".to_owned())
    }

    fn dead_subject(&self) -> String {
        dead_letter_topic(&self.topic)
    }
}

impl Source for NatsSource {
    fn prepare(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            let name = if let Ok(name) = self.context.stream_by_subject(self.topic.clone()).await {
                name
            } else {
                let name = format!("OPCODE_{}", plain(&self.topic));
                let config = jetstream::stream::Config {
                    name: name.clone(),
                    subjects: vec![self.topic.clone(), self.dead_subject()],
                    ..Default::default()
                };
                self.context
                    .get_or_create_stream(config)
                    .await
                    .map_err(said)?;
                name
            };
            let stream = self.context.get_stream(&name).await.map_err(said)?;
            let durable = plain(&self.group);
            let consumer: PullConsumer = stream
                .get_or_create_consumer(
                    &durable,
                    Config {
                        durable_name: Some(durable.clone()),
                        filter_subject: self.topic.clone(),
                        ack_policy: AckPolicy::Explicit,
                        deliver_policy: DeliverPolicy::All,
                        ack_wait: self.ack_wait,
                        ..Default::default()
                    },
                )
                .await
                .map_err(said)?;
            *lock(&self.consumer) = Some(consumer);
            *lock(&self.stream) = name;
            Ok(())
        })
    }

    fn read<'a>(
        &'a self,
        _member: &'a str,
        count: usize,
        wait: Duration,
    ) -> BoxFuture<'a, Result<Vec<Message>, String>> {
        Box::pin(async move {
            let consumer = self.consumer()?;
            let mut batch = consumer
                .fetch()
                .max_messages(count)
                .expires(wait)
                .messages()
                .await
                .map_err(said)?;
            let mut out = Vec::new();
            while let Some(next) = batch.next().await {
                let message = next.map_err(said)?;
                let position = message.info().map_err(said)?.stream_sequence.to_string();
                out.push(Message {
                    position: position.clone(),
                    fields: fields_of(message.message.headers.as_ref(), &message.message.payload),
                });
                lock(&self.unacked).insert(position, message);
            }
            Ok(out)
        })
    }

    fn claim<'a>(
        &'a self,
        _member: &'a str,
        _idle: Duration,
        _count: usize,
    ) -> BoxFuture<'a, Result<Vec<Message>, String>> {
        // The server gives an unacknowledged message again after ack_wait.
        Box::pin(std::future::ready(Ok(Vec::new())))
    }

    fn ack<'a>(&'a self, position: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let Some(message) = lock(&self.unacked).remove(position) else {
                return Ok(());
            };
            message.double_ack().await.map_err(said)
        })
    }

    fn dead_letter<'a>(
        &'a self,
        message: &'a Message,
        extra: Vec<(String, String)>,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let mut headers = HeaderMap::new();
            for (key, value) in message.fields.iter().filter(|(k, _)| k.as_str() != "body") {
                headers.insert(key.as_str(), value.as_str());
            }
            for (key, value) in &extra {
                headers.insert(key.as_str(), value.as_str());
            }
            headers.insert("source_id", message.position.as_str());
            let body = message.fields.get("body").cloned().unwrap_or_default();
            self.context
                .publish_with_headers(self.dead_subject(), headers, body.into())
                .await
                .map_err(said)?
                .await
                .map_err(said)?;
            self.ack(&message.position).await
        })
    }

    fn dead_letters(&self, count: usize) -> BoxFuture<'_, Result<Vec<Message>, String>> {
        Box::pin(async move {
            let existing = lock(&self.dead).clone();
            let consumer = if let Some(consumer) = existing {
                consumer
            } else {
                let name = lock(&self.stream).clone();
                let stream = self.context.get_stream(&name).await.map_err(said)?;
                let consumer: PullConsumer = stream
                    .create_consumer(Config {
                        filter_subject: self.dead_subject(),
                        deliver_policy: DeliverPolicy::All,
                        ack_policy: AckPolicy::Explicit,
                        inactive_threshold: Duration::from_mins(5),
                        ..Default::default()
                    })
                    .await
                    .map_err(said)?;
                *lock(&self.dead) = Some(consumer.clone());
                consumer
            };
            // What came since the last look, kept newest first.
            let fetched = consumer.fetch().max_messages(1_000).messages().await;
            let mut batch = match fetched {
                Ok(batch) => batch,
                Err(e) => {
                    *lock(&self.dead) = None;
                    return Err(said(e));
                }
            };
            while let Some(next) = batch.next().await {
                let message = next.map_err(said)?;
                let position = message.info().map_err(said)?.stream_sequence.to_string();
                let fields = fields_of(message.message.headers.as_ref(), &message.message.payload);
                message.double_ack().await.map_err(said)?;
                let mut seen = lock(&self.dead_seen);
                seen.push_front(Message { position, fields });
                seen.truncate(count);
            }
            Ok(lock(&self.dead_seen).iter().cloned().collect())
        })
    }

    fn backlog(&self) -> BoxFuture<'_, Result<(Option<u64>, u64), String>> {
        Box::pin(async move {
            let mut consumer = self.consumer()?;
            let info = consumer.info().await.map_err(said)?;
            Ok((Some(info.num_pending), info.num_ack_pending as u64))
        })
    }
}

/// A message's fields: its headers (the first value of each), and its
/// payload as `body`.
fn fields_of(headers: Option<&HeaderMap>, payload: &[u8]) -> BTreeMap<String, String> {
    let mut fields: BTreeMap<String, String> = headers
        .into_iter()
        .flat_map(HeaderMap::iter)
        .filter_map(|(k, v)| Some((k.to_string(), v.first()?.to_string())))
        .collect();
    fields.insert("body".into(), String::from_utf8_lossy(payload).into_owned());
    fields
}

/// `text` as a stream or consumer name: letters, digits, `-` and `_`.
fn plain(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[allow(clippy::needless_pass_by_value)] // used as `map_err(said)`
fn said<E: std::fmt::Display>(e: E) -> String {
    format!("nats: {e}")
}
