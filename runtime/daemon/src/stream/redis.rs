//! Redis Streams as a [`Source`]: `XREADGROUP` for new messages,
//! `XAUTOCLAIM` for those a dead member left, `XACK`, a dead-letter stream
//! `<topic>.dead-letter`, and `XINFO GROUPS` for the lag.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::BoxFuture;
use redis::aio::MultiplexedConnection;
use redis::streams::{
    StreamAutoClaimOptions, StreamAutoClaimReply, StreamId, StreamInfoGroupsReply,
    StreamRangeReply, StreamReadOptions, StreamReadReply,
};
use redis::{AsyncCommands as _, AsyncConnectionConfig, Client, RedisError};

use super::source::{Message, Source, dead_letter_topic};

/// One topic of a Redis server, read by one group.
pub struct RedisSource {
    /// For blocking reads: a connection of their own, as a blocked command
    /// holds its connection.
    reads: MultiplexedConnection,
    /// For everything else.
    writes: MultiplexedConnection,
    topic: String,
    group: String,
}

impl RedisSource {
    /// Connects to `url` for `topic`, read by `group`.
    pub async fn connect(url: &str, topic: &str, group: &str) -> Result<RedisSource, String> {
        let client = Client::open(url).map_err(said)?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(Duration::from_secs(30)));
        let reads = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(said)?;
        let writes = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(said)?;
        Ok(RedisSource {
            reads,
            writes,
            topic: topic.to_owned(),
            group: group.to_owned(),
        })
    }
}

impl Source for RedisSource {
    fn prepare(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            let mut conn = self.writes.clone();
            let made: Result<(), RedisError> = conn
                .xgroup_create_mkstream(&self.topic, &self.group, "0")
                .await;
            match made {
                Err(e) if e.code() == Some("BUSYGROUP") => Ok(()),
                other => other.map_err(said),
            }
        })
    }

    fn read<'a>(
        &'a self,
        member: &'a str,
        count: usize,
        wait: Duration,
    ) -> BoxFuture<'a, Result<Vec<Message>, String>> {
        Box::pin(async move {
            let mut conn = self.reads.clone();
            let options = StreamReadOptions::default()
                .group(&self.group, member)
                .count(count)
                .block(usize::try_from(wait.as_millis()).unwrap_or(1_000));
            let reply: Option<StreamReadReply> = conn
                .xread_options(&[&self.topic], &[">"], &options)
                .await
                .map_err(said)?;
            Ok(reply
                .into_iter()
                .flat_map(|r| r.keys)
                .flat_map(|k| k.ids)
                .map(message)
                .collect())
        })
    }

    fn claim<'a>(
        &'a self,
        member: &'a str,
        idle: Duration,
        count: usize,
    ) -> BoxFuture<'a, Result<Vec<Message>, String>> {
        Box::pin(async move {
            let mut conn = self.writes.clone();
            let idle_ms = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
            let reply: StreamAutoClaimReply = conn
                .xautoclaim_options(
                    &self.topic,
                    &self.group,
                    member,
                    idle_ms,
                    "0-0",
                    StreamAutoClaimOptions::default().count(count),
                )
                .await
                .map_err(said)?;
            Ok(reply.claimed.into_iter().map(message).collect())
        })
    }

    fn ack<'a>(&'a self, position: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let mut conn = self.writes.clone();
            let _: i64 = conn
                .xack(&self.topic, &self.group, &[position])
                .await
                .map_err(said)?;
            Ok(())
        })
    }

    fn dead_letter<'a>(
        &'a self,
        message: &'a Message,
        extra: Vec<(String, String)>,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let mut conn = self.writes.clone();
            let mut fields: Vec<(String, String)> = message
                .fields
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            fields.extend(extra);
            fields.push(("source_id".into(), message.position.clone()));
            let _: String = conn
                .xadd(dead_letter_topic(&self.topic), "*", &fields)
                .await
                .map_err(said)?;
            self.ack(&message.position).await
        })
    }

    fn dead_letters(&self, count: usize) -> BoxFuture<'_, Result<Vec<Message>, String>> {
        Box::pin(async move {
            let mut conn = self.writes.clone();
            let reply: StreamRangeReply = conn
                .xrevrange_count(dead_letter_topic(&self.topic), "+", "-", count)
                .await
                .map_err(said)?;
            Ok(reply.ids.into_iter().map(message).collect())
        })
    }

    fn backlog(&self) -> BoxFuture<'_, Result<(Option<u64>, u64), String>> {
        Box::pin(async move {
            let mut conn = self.writes.clone();
            let reply: StreamInfoGroupsReply =
                conn.xinfo_groups(&self.topic).await.map_err(said)?;
            let group = reply.groups.into_iter().find(|g| g.name == self.group);
            Ok(group.map_or((None, 0), |g| (g.lag.map(|n| n as u64), g.pending as u64)))
        })
    }
}

/// A stream entry as a message: its fields as text (a field whose value
/// is not text is left out).
fn message(entry: StreamId) -> Message {
    let fields: BTreeMap<String, String> = entry
        .map
        .into_iter()
        .filter_map(|(k, v)| redis::from_redis_value::<String>(v).ok().map(|v| (k, v)))
        .collect();
    Message {
        position: entry.id,
        fields,
    }
}

#[allow(clippy::needless_pass_by_value)] // used as `map_err(said)`
fn said(e: RedisError) -> String {
    format!("redis: {e}")
}
