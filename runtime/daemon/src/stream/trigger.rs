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

/// One broker of the settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Broker {
    /// Redis Streams at this URL.
    Redis(String),
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
            let url = entry.get("redis").and_then(Value::as_str);
            let known = entry.as_object().is_some_and(|e| e.len() == 1);
            match url {
                Some(url)
                    if known && (url.starts_with("redis://") || url.starts_with("rediss://")) =>
                {
                    brokers.insert(name.clone(), Broker::Redis(url.to_owned()));
                }
                _ => {
                    return Err(format!(
                        "`brokers.{name}` in the settings is {{\"redis\": \"redis://host:port/db\"}} \
                         (Kafka is not built yet: spec/triggers-stream.md)"
                    ));
                }
            }
        }
        Ok(Brokers(brokers))
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
    fn brokers_are_redis_urls_for_now() {
        let brokers = Brokers::parse(Some(
            &json!({"events": {"redis": "redis://127.0.0.1:6379/0"}}),
        ))
        .unwrap();
        assert_eq!(
            brokers.0["events"],
            Broker::Redis("redis://127.0.0.1:6379/0".into())
        );
        assert!(Brokers::parse(Some(&json!({"k": {"kafka": "localhost:9092"}}))).is_err());
        assert!(Brokers::parse(Some(&json!({"k": {"redis": "http://x"}}))).is_err());
    }
}
