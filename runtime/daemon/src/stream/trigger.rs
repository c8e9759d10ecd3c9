//! A template's `triggers.stream` and the settings' `brokers`
//! (spec/triggers-stream.md): checked, with the pointer of what is wrong.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// What `triggers.stream` may hold.
const KEYS: [&str; 9] = [
    "broker",
    "topic",
    "group",
    "body_as",
    "headers_as",
    "params",
    "id",
    "max_backlog",
    "claim_after",
];

/// A template's `triggers.stream`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamTrigger {
    /// The settings' broker it reads.
    pub broker: String,
    /// The stream (topic).
    pub topic: String,
    /// The consumer group.
    pub group: String,
    /// The input that gets the body (`None`: the body is the params).
    pub body_as: Option<String>,
    /// The input that gets the other fields.
    pub headers_as: Option<String>,
    /// Fixed params, under the message's.
    pub params: Map<String, Value>,
    /// A JSON Pointer into the body naming the message's id.
    pub id: Option<String>,
    /// Runs not ended past which no more is read.
    pub max_backlog: u64,
    /// How long a message may stay unacknowledged by another member
    /// before it is taken over, in milliseconds.
    pub claim_after_ms: u64,
}

/// Why a trigger is refused: the pointer of the key, and why.
pub type Refusal = (String, String);

impl StreamTrigger {
    /// The `stream` of `triggers` of template `template`, if it has one.
    pub fn of(
        template: &str,
        triggers: &Map<String, Value>,
    ) -> Result<Option<StreamTrigger>, Refusal> {
        let Some(block) = triggers.get("stream") else {
            return Ok(None);
        };
        let at = |key: &str| format!("/triggers/stream/{key}");
        let Some(block) = block.as_object() else {
            return Err((
                "/triggers/stream".into(),
                "`triggers.stream` is an object".into(),
            ));
        };
        if let Some(key) = block.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err((
                at(key),
                format!(
                    "`{key}` is not a key of triggers.stream; known: {}",
                    KEYS.join(", ")
                ),
            ));
        }
        let text = |key: &str, required: bool| -> Result<Option<String>, Refusal> {
            match block.get(key) {
                None if required => Err((at(key), format!("triggers.stream needs `{key}`"))),
                None => Ok(None),
                Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
                Some(_) => Err((at(key), format!("`{key}` is a non-empty string"))),
            }
        };
        let id = text("id", false)?;
        if let Some(pointer) = &id
            && !pointer.starts_with('/')
        {
            return Err((
                at("id"),
                format!("`id` is a JSON Pointer into the body, as \"/{pointer}\""),
            ));
        }
        let params = match block.get("params") {
            None => Map::new(),
            Some(Value::Object(params)) => params.clone(),
            Some(_) => return Err((at("params"), "`params` is an object".into())),
        };
        let max_backlog = match block.get("max_backlog") {
            None => 100,
            Some(n) => n
                .as_u64()
                .filter(|n| (1..=100_000).contains(n))
                .ok_or_else(|| {
                    (
                        at("max_backlog"),
                        "`max_backlog` is a whole number from 1 to 100000".to_owned(),
                    )
                })?,
        };
        let claim_after_ms = match text("claim_after", false)? {
            None => 30_000,
            Some(text) => opcode_compiler::duration::parse_millis(&text)
                .ok()
                .filter(|ms| *ms >= 1_000)
                .ok_or_else(|| {
                    (
                        at("claim_after"),
                        format!("`claim_after` is a duration of at least 1s, not {text:?}"),
                    )
                })?,
        };
        Ok(Some(StreamTrigger {
            broker: text("broker", true)?.unwrap_or_default(),
            topic: text("topic", true)?.unwrap_or_default(),
            group: text("group", false)?.unwrap_or_else(|| format!("opcode-{template}")),
            body_as: text("body_as", false)?,
            headers_as: text("headers_as", false)?,
            params,
            id,
            max_backlog,
            claim_after_ms,
        }))
    }
}

/// The settings' `brokers`: each name's kind and address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Brokers(pub BTreeMap<String, Broker>);

/// One broker of the settings: where it is, and which of its topics
/// templates may read (none: any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broker {
    /// Its kind and address.
    pub kind: BrokerKind,
    /// Topic names, or prefixes ending in `*`, templates may read.
    pub topics: Option<Vec<String>>,
}

/// What a broker is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BrokerKind {
    /// Redis Streams at this URL.
    Redis(String),
    /// NATS JetStream at this URL.
    Nats(String),
    /// A Kafka cluster at these bootstrap servers (`host:port`, by commas).
    Kafka(String),
}

/// Whether `servers` is a list of `host:port`, by commas.
fn bootstrap_servers(servers: &str) -> bool {
    servers.split(',').all(|server| {
        server.rsplit_once(':').is_some_and(|(host, port)| {
            !host.trim().is_empty() && !host.contains('/') && port.parse::<u16>().is_ok()
        })
    })
}

impl Broker {
    /// Whether templates may read `topic` of this broker.
    pub fn allows(&self, topic: &str) -> bool {
        self.topics.as_ref().is_none_or(|topics| {
            topics.iter().any(|t| match t.strip_suffix('*') {
                Some(prefix) => topic.starts_with(prefix),
                None => t == topic,
            })
        })
    }
}

impl Brokers {
    /// The settings' `brokers` object, checked.
    pub fn parse(value: Option<&Value>) -> Result<Brokers, String> {
        let Some(value) = value else {
            return Ok(Brokers::default());
        };
        let Some(entries) = value.as_object() else {
            return Err("`brokers` in the settings is an object of brokers by name".into());
        };
        let mut brokers = BTreeMap::new();
        for (name, entry) in entries {
            let shape = || {
                format!(
                    "`brokers.{name}` in the settings is {{\"redis\": \"redis://host:port/db\"}}, \
                     {{\"nats\": \"nats://host:port\"}} or {{\"kafka\": \"host:9092,host2:9092\"}}, \
                     with `topics` optionally ([\"missions\", \"jobs-*\"]): spec/triggers-stream.md"
                )
            };
            let Some(fields) = entry.as_object() else {
                return Err(shape());
            };
            let kinds = ["redis", "nats", "kafka"];
            if fields
                .keys()
                .any(|k| !kinds.contains(&k.as_str()) && k != "topics")
                || kinds.iter().filter(|k| fields.contains_key(**k)).count() != 1
            {
                return Err(shape());
            }
            let url = |key: &str, schemes: &[&str]| {
                fields
                    .get(key)
                    .and_then(Value::as_str)
                    .filter(|url| schemes.iter().any(|s| url.starts_with(s)))
                    .map(str::to_owned)
            };
            let kind = if let Some(url) = url("redis", &["redis://", "rediss://"]) {
                BrokerKind::Redis(url)
            } else if let Some(url) = url("nats", &["nats://", "tls://"]) {
                BrokerKind::Nats(url)
            } else if let Some(servers) = fields
                .get("kafka")
                .and_then(Value::as_str)
                .filter(|s| bootstrap_servers(s))
            {
                BrokerKind::Kafka(servers.to_owned())
            } else {
                return Err(shape());
            };
            let topics = match fields.get("topics") {
                None => None,
                Some(Value::Array(items)) => Some(
                    items
                        .iter()
                        .map(|t| t.as_str().filter(|t| !t.is_empty()).map(str::to_owned))
                        .collect::<Option<Vec<String>>>()
                        .ok_or_else(shape)?,
                ),
                Some(_) => return Err(shape()),
            };
            brokers.insert(name.clone(), Broker { kind, topics });
        }
        Ok(Brokers(brokers))
    }

    /// Why `trigger` may not read what it names, if it may not: the
    /// pointer of the key, and why.
    pub fn refusal(&self, trigger: &StreamTrigger) -> Option<Refusal> {
        let Some(broker) = self.0.get(&trigger.broker) else {
            let known: Vec<&str> = self.0.keys().map(String::as_str).collect();
            return Some((
                "/triggers/stream/broker".into(),
                format!(
                    "no broker `{}` in the daemon's settings (`brokers`); known: {}",
                    trigger.broker,
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ),
            ));
        };
        (!broker.allows(&trigger.topic)).then(|| {
            (
                "/triggers/stream/topic".into(),
                format!(
                    "the settings let templates read these topics of `{}` only: {}",
                    trigger.broker,
                    broker.topics.as_deref().unwrap_or_default().join(", ")
                ),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn of(block: &Value) -> Result<Option<StreamTrigger>, Refusal> {
        let triggers = json!({"stream": block});
        StreamTrigger::of("intake", triggers.as_object().unwrap())
    }

    #[test]
    fn a_trigger_takes_its_defaults_and_refuses_what_it_does_not_know() {
        let trigger = of(&json!({"broker": "events", "topic": "missions"}))
            .unwrap()
            .unwrap();
        assert_eq!(trigger.group, "opcode-intake");
        assert_eq!((trigger.max_backlog, trigger.claim_after_ms), (100, 30_000));
        assert_eq!(
            of(&json!({"topic": "t"})).unwrap_err().0,
            "/triggers/stream/broker"
        );
        assert_eq!(
            of(&json!({"broker": "b", "topic": "t", "gruop": "g"}))
                .unwrap_err()
                .0,
            "/triggers/stream/gruop"
        );
        assert_eq!(
            of(&json!({"broker": "b", "topic": "t", "id": "mission_id"}))
                .unwrap_err()
                .0,
            "/triggers/stream/id"
        );
        assert_eq!(
            of(&json!({"broker": "b", "topic": "t", "claim_after": "10ms"}))
                .unwrap_err()
                .0,
            "/triggers/stream/claim_after"
        );
        assert_eq!(
            of(&json!({"broker": "b", "topic": "t", "max_backlog": 0}))
                .unwrap_err()
                .0,
            "/triggers/stream/max_backlog"
        );
        assert_eq!(StreamTrigger::of("x", &Map::new()), Ok(None));
    }

    #[test]
    fn brokers_are_redis_nats_or_kafka_and_may_narrow_their_topics() {
        let brokers = Brokers::parse(Some(&json!({
            "events": {"redis": "redis://127.0.0.1:6379/0"},
            "jobs": {"redis": "redis://127.0.0.1:6379/1", "topics": ["missions", "team-a.*"]},
        })))
        .unwrap();
        assert_eq!(
            brokers.0["events"].kind,
            BrokerKind::Redis("redis://127.0.0.1:6379/0".into())
        );
        let reading = |broker: &str, topic: &str| {
            let block = json!({"broker": broker, "topic": topic});
            let trigger = of(&block).unwrap().unwrap();
            brokers.refusal(&trigger).map(|(pointer, _)| pointer)
        };
        assert_eq!(reading("events", "anything"), None);
        assert_eq!(reading("jobs", "missions"), None);
        assert_eq!(reading("jobs", "team-a.builds"), None);
        let topic = Some("/triggers/stream/topic");
        assert_eq!(reading("jobs", "team-b.builds").as_deref(), topic);
        assert_eq!(reading("jobs", "missions2").as_deref(), topic);
        let broker = Some("/triggers/stream/broker");
        assert_eq!(reading("nope", "missions").as_deref(), broker);
        assert!(
            Brokers::parse(Some(&json!({"k": {"redis": "redis://x", "topics": "all"}}))).is_err()
        );
        let nats = Brokers::parse(Some(&json!({"js": {"nats": "nats://127.0.0.1:4222"}}))).unwrap();
        assert_eq!(
            nats.0["js"].kind,
            BrokerKind::Nats("nats://127.0.0.1:4222".into())
        );
        let both = json!({"k": {"redis": "redis://x", "nats": "nats://y"}});
        assert!(Brokers::parse(Some(&both)).is_err());
        let kafka = Brokers::parse(Some(&json!({"k": {"kafka": "a:9092,b:9093"}}))).unwrap();
        assert_eq!(kafka.0["k"].kind, BrokerKind::Kafka("a:9092,b:9093".into()));
        for servers in ["localhost", "kafka://a:9092", "a:9092,", "a:x", ""] {
            let entry = json!({"k": {"kafka": servers}});
            assert!(Brokers::parse(Some(&entry)).is_err(), "{servers}");
        }
        let two = json!({"k": {"kafka": "a:9092", "redis": "redis://x"}});
        assert!(Brokers::parse(Some(&two)).is_err());
        assert!(Brokers::parse(Some(&json!({"k": {"redis": "http://x"}}))).is_err());
    }
}
