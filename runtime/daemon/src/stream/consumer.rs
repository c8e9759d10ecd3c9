//! One template's `triggers.stream` read by this daemon, as one member of
//! the trigger's consumer group, until told to stop: new messages and
//! those a dead member left are made into runs, each acknowledged once its
//! run is in the store; reading pauses while the template has
//! `max_backlog` runs not ended (spec/triggers-stream.md).

use std::time::{Duration, Instant};

use opcode_runtime::store::{WorkflowFilter, WorkflowStatus};
use tokio_util::sync::CancellationToken;

use super::kafka::KafkaSource;
use super::nats::NatsSource;
use super::redis::RedisSource;
use super::source::{Message, Source};
use super::stats::{DeadLetter, KEPT};
use super::trigger::{Broker, BrokerKind, StreamTrigger};
use crate::api::{Api, Outcome};

/// Messages read at once, at most.
const BATCH: u64 = 32;
/// How long one read waits for a message.
const WAIT: Duration = Duration::from_secs(1);
/// How often the topic's backlog is read.
const BACKLOG_EVERY: Duration = Duration::from_secs(2);
/// How soon it is read again after messages were taken (reading it costs
/// a Kafka cluster several requests: not after every batch).
const BACKLOG_AFTER_READ: Duration = Duration::from_millis(250);

/// What one consumer reads, and as whom.
pub struct Consumer {
    /// The daemon's API: where runs start.
    pub api: Api,
    /// The template.
    pub template: String,
    /// Its trigger.
    pub trigger: StreamTrigger,
    /// The broker the trigger names.
    pub broker: Broker,
    /// This daemon's name in the group.
    pub member: String,
}

impl Consumer {
    /// Reads until `stop`, connecting again after a failure.
    pub async fn run(self, stop: CancellationToken) {
        let streams = self.api.streams();
        streams.reading(&self.template, &self.trigger.broker, &self.trigger.topic);
        let mut wait = Duration::from_secs(1);
        while !stop.is_cancelled() {
            let failed = match self.connect().await {
                Ok(source) => self.serve(source.as_ref(), &stop).await,
                Err(e) => Some(e),
            };
            let Some(error) = failed else { break };
            tracing::warn!(template = %self.template, topic = %self.trigger.topic, %error, "stream trigger: retrying");
            streams.error(&self.template, Some(error));
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(wait) => {}
            }
            wait = (wait * 2).min(Duration::from_secs(10));
        }
        streams.stopped(&self.template);
    }

    async fn connect(&self) -> Result<Box<dyn Source>, String> {
        let (topic, group) = (&self.trigger.topic, &self.trigger.group);
        let source: Box<dyn Source> = match &self.broker.kind {
            BrokerKind::Redis(url) => Box::new(RedisSource::connect(url, topic, group).await?),
            BrokerKind::Nats(url) => {
                let ack_wait = Duration::from_millis(self.trigger.claim_after_ms);
                Box::new(NatsSource::connect(url, topic, group, ack_wait).await?)
            }
            BrokerKind::Kafka(servers) => {
                let session = Duration::from_millis(self.trigger.claim_after_ms);
                Box::new(KafkaSource::connect(
                    servers,
                    topic,
                    group,
                    &self.member,
                    session,
                )?)
            }
        };
        source.prepare().await?;
        Ok(source)
    }

    /// Serves `source` until `stop` (`None`) or a failure (`Some`).
    async fn serve(&self, source: &dyn Source, stop: &CancellationToken) -> Option<String> {
        let streams = self.api.streams();
        let claim_after = Duration::from_millis(self.trigger.claim_after_ms);
        let mut claimed_at: Option<Instant> = None;
        let mut measured_at: Option<Instant> = None;
        let mut taken_since = false;
        loop {
            let due = if taken_since {
                BACKLOG_AFTER_READ
            } else {
                BACKLOG_EVERY
            };
            if measured_at.is_none_or(|at| at.elapsed() >= due) {
                taken_since = false;
                if let Err(e) = self.measure(source).await {
                    return Some(e);
                }
                measured_at = Some(Instant::now());
            }
            let room = match self.room().await {
                Ok(room) => room,
                Err(e) => return Some(e),
            };
            streams.paused(&self.template, room == 0);
            if room == 0 {
                if let Err(e) = source.hold().await {
                    return Some(e);
                }
                tokio::select! {
                    () = stop.cancelled() => return None,
                    () = tokio::time::sleep(Duration::from_millis(500)) => continue,
                }
            }
            let count = usize::try_from(room.min(BATCH)).unwrap_or(1);
            let mut batch = Vec::new();
            if claimed_at.is_none_or(|at| at.elapsed() >= claim_after / 2) {
                match source.claim(&self.member, claim_after, count).await {
                    Ok(claimed) => batch = claimed,
                    Err(e) => return Some(e),
                }
                claimed_at = Some(Instant::now());
            }
            if batch.is_empty() {
                batch = tokio::select! {
                    () = stop.cancelled() => return None,
                    read = source.read(&self.member, count, WAIT) => match read {
                        Ok(read) => read,
                        Err(e) => return Some(e),
                    },
                };
            }
            streams.error(&self.template, None);
            for message in &batch {
                if let Err(e) = self.deliver(source, message).await {
                    return Some(e);
                }
            }
            // What was just taken changes the backlog: say so soon.
            taken_since |= !batch.is_empty();
        }
    }

    /// Reads the topic's backlog and its last dead letters (whichever
    /// daemon wrote them) into the stats.
    async fn measure(&self, source: &dyn Source) -> Result<(), String> {
        let streams = self.api.streams();
        let (lag, pending) = source.backlog().await?;
        streams.backlog(&self.template, lag, pending);
        let letters = source
            .dead_letters(KEPT)
            .await?
            .into_iter()
            .filter(|m| m.fields.get("template") == Some(&self.template))
            .map(|m| DeadLetter {
                at: m.position,
                position: m.fields.get("source_id").cloned().unwrap_or_default(),
                code: m.fields.get("code").cloned().unwrap_or_default(),
                error: m.fields.get("error").cloned().unwrap_or_default(),
            })
            .collect();
        streams.dead_letters(&self.template, letters);
        Ok(())
    }

    /// How many more runs the template may have before reading pauses.
    async fn room(&self) -> Result<u64, String> {
        let filter = WorkflowFilter {
            template_name: Some(self.template.clone()),
            statuses: WorkflowStatus::ALL
                .into_iter()
                .filter(|s| !s.is_ended())
                .collect(),
            limit: Some(u32::try_from(self.trigger.max_backlog).unwrap_or(u32::MAX)),
            ..WorkflowFilter::default()
        };
        let open = self
            .api
            .executor()
            .store()
            .workflows(filter)
            .await
            .map_err(|e| format!("the store: {e}"))?
            .len() as u64;
        Ok(self.trigger.max_backlog.saturating_sub(open))
    }

    /// Makes `message` a run, then acknowledges it; a message that maps to
    /// nothing goes to the dead-letter topic. A failure to reach the broker
    /// is `Err`; a run that could not start leaves the message to be
    /// delivered again.
    async fn deliver(&self, source: &dyn Source, message: &Message) -> Result<(), String> {
        let streams = self.api.streams();
        let outcome = self
            .api
            .deliver_message(
                &self.template,
                &self.trigger,
                &message.fields,
                &message.position,
            )
            .await;
        match outcome {
            Outcome::Started(_) => {
                source.ack(&message.position).await?;
                streams.message(&self.template, "started");
            }
            Outcome::Duplicate(_) => {
                source.ack(&message.position).await?;
                streams.message(&self.template, "duplicate");
            }
            Outcome::DeadLetter(code, error) => {
                let extra = vec![
                    ("code".to_owned(), code.clone()),
                    ("error".to_owned(), error.clone()),
                    ("template".to_owned(), self.template.clone()),
                ];
                source.dead_letter(message, extra).await?;
                tracing::warn!(template = %self.template, position = %message.position, %code, %error, "stream message dead-lettered");
                streams.dead_letter(&self.template, &code);
            }
            Outcome::Failed(error) => {
                tracing::warn!(template = %self.template, position = %message.position, %error, "stream message not started; it is delivered again later");
                streams.message(&self.template, "failed");
            }
        }
        Ok(())
    }
}
