//! A broker message of a template's `triggers.stream` made into a run
//! (spec/triggers-stream.md, "Delivery"): its params mapped from the
//! message, started once per message id.

use std::collections::BTreeMap;

use opcode_runtime::executor::ExecError;
use opcode_runtime::store::StoreError;
use opcode_vm::codes;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::stream::trigger::StreamTrigger;

use super::Api;
use crate::serve::depth::MAX_BODY;

/// What one message came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Its run started now.
    Started(String),
    /// Its run was started before (the message came again).
    Duplicate(String),
    /// It maps to no valid params: its code and why.
    DeadLetter(String, String),
    /// The run could not start now (the message is delivered again).
    Failed(String),
}

impl Api {
    /// Starts the run of the message with `fields` at `position` of
    /// `template`'s `trigger`, unless it started before.
    pub async fn deliver_message(
        &self,
        template: &str,
        trigger: &StreamTrigger,
        fields: &BTreeMap<String, String>,
        position: &str,
    ) -> Outcome {
        let row = match super::run::kept_template(self, template, None).await {
            Ok(row) => row,
            Err(e) => return Outcome::Failed(e.message),
        };
        let (params, id) = match mapped(trigger, fields, position) {
            Ok(mapped) => mapped,
            Err(why) => return Outcome::DeadLetter(codes::R0137.id.to_owned(), why),
        };
        let run_id = run_id(template, &trigger.topic, &id);
        let request = match super::run::template_request(
            &self.exec,
            &row,
            &params,
            None,
            Some(run_id.clone()),
        ) {
            Ok(request) => request,
            // Params against the input_schema, or a template that no longer
            // compiles: delivering it again would fail the same way.
            Err(e) if e.code == codes::R0108 || e.code == codes::R0109 => {
                return Outcome::DeadLetter(e.code.id.to_owned(), e.message);
            }
            Err(e) => return Outcome::Failed(e.message),
        };
        match self.exec.start(request).await {
            Ok(started) => Outcome::Started(started),
            Err(ExecError::Store(StoreError::Exists(_))) => Outcome::Duplicate(run_id),
            Err(e) => Outcome::Failed(e.to_string()),
        }
    }
}

/// The run's params and the message's id.
fn mapped(
    trigger: &StreamTrigger,
    fields: &BTreeMap<String, String>,
    position: &str,
) -> Result<(Value, String), String> {
    let text = fields
        .get("body")
        .ok_or("the message has no `body` field (the JSON of its params)")?;
    if text.len() > MAX_BODY {
        return Err(format!(
            "the body is {} bytes; a message's may be at most {MAX_BODY}, as a request's",
            text.len()
        ));
    }
    let body: Value =
        serde_json::from_str(text).map_err(|e| format!("the body is not JSON: {e}"))?;
    let id = match &trigger.id {
        Some(pointer) => match body.pointer(pointer) {
            Some(Value::String(id)) => id.clone(),
            Some(Value::Number(id)) => id.to_string(),
            _ => {
                return Err(format!(
                    "the body has no string or number at {pointer}, the trigger's `id`"
                ));
            }
        },
        None => fields
            .get("id")
            .cloned()
            .unwrap_or_else(|| position.to_owned()),
    };
    let mut params = match (&trigger.body_as, body) {
        (Some(input), body) => Map::from_iter([(input.clone(), body)]),
        (None, Value::Object(params)) => params,
        (None, _) => {
            return Err(
                "the body is not a JSON object: it is the run's params (or name the input it goes \
                 to with `body_as`)"
                    .into(),
            );
        }
    };
    if let Some(input) = &trigger.headers_as {
        let headers: Map<String, Value> = fields
            .iter()
            .filter(|(k, _)| k.as_str() != "body")
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        params.insert(input.clone(), Value::Object(headers));
    }
    for (key, value) in &trigger.params {
        params.entry(key.clone()).or_insert_with(|| value.clone());
    }
    Ok((Value::Object(params), id))
}

/// The run of message `id` of `topic` for `template`.
pub fn run_id(template: &str, topic: &str, id: &str) -> String {
    let digest = Sha256::digest(format!("{template}\0{topic}\0{id}").as_bytes());
    format!("msg-{}", hex::encode(&digest[..12]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn trigger(extra: &Value) -> StreamTrigger {
        let mut block = json!({"broker": "b", "topic": "missions"});
        block
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let triggers = json!({"stream": block});
        StreamTrigger::of("intake", triggers.as_object().unwrap())
            .unwrap()
            .unwrap()
    }

    fn fields(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_message_maps_to_params_and_an_id() {
        let plain = trigger(&json!({"params": {"source": "factory", "n": 0}}));
        let (params, id) = mapped(&plain, &fields(&[("body", r#"{"n": 1}"#)]), "1-0").unwrap();
        assert_eq!(
            (params, id.as_str()),
            (json!({"n": 1, "source": "factory"}), "1-0")
        );
        let (_, id) = mapped(&plain, &fields(&[("body", "{}"), ("id", "m-7")]), "1-0").unwrap();
        assert_eq!(id, "m-7");
        let wrapped =
            trigger(&json!({"body_as": "mission", "headers_as": "headers", "id": "/mission_id"}));
        let message = fields(&[("body", r#"{"mission_id": 42}"#), ("key", "k1")]);
        let (params, id) = mapped(&wrapped, &message, "1-0").unwrap();
        assert_eq!(
            params,
            json!({"mission": {"mission_id": 42}, "headers": {"key": "k1"}})
        );
        assert_eq!(id, "42");
    }

    #[test]
    fn what_does_not_map_says_why() {
        let plain = trigger(&json!({}));
        assert!(
            mapped(&plain, &fields(&[]), "1-0")
                .unwrap_err()
                .contains("no `body`")
        );
        assert!(
            mapped(&plain, &fields(&[("body", "nope")]), "1-0")
                .unwrap_err()
                .contains("not JSON")
        );
        assert!(
            mapped(&plain, &fields(&[("body", "[1]")]), "1-0")
                .unwrap_err()
                .contains("not a JSON object")
        );
        let by_id = trigger(&json!({"id": "/id"}));
        assert!(
            mapped(&by_id, &fields(&[("body", "{}")]), "1-0")
                .unwrap_err()
                .contains("at /id")
        );
        assert_ne!(run_id("a", "t", "1"), run_id("a", "t", "2"));
        assert_ne!(run_id("a", "t", "1"), run_id("b", "t", "1"));
    }

    /// A stored template that no longer compiles (an action gone, say):
    /// its messages are dead-lettered, not taken again for ever; a good
    /// one starts its run, and the same message again is a duplicate.
    #[tokio::test]
    async fn a_template_that_no_longer_compiles_dead_letters_its_messages() {
        use std::sync::Arc;

        use opcode_runtime::store::TemplateDraft;
        use opcode_runtime::store::memory::MemoryStore;
        use opcode_runtime::{Config, EventStore, Executor};
        use opcode_stdlib::exec::EnvSecrets;

        let store: Arc<dyn EventStore> = Arc::new(MemoryStore::new());
        let draft = |name: &str, action: &str| TemplateDraft {
            name: name.into(),
            description: String::new(),
            definition:
                json!({"steps": [{"id": "a", "action": action, "params": {"message": "x"}}]})
                    .to_string(),
            input_schema: None,
            output_schema: None,
            triggers: "{}".into(),
            agent_id: None,
            at: "2026-12-06T00:00:00.000Z".into(),
        };
        store
            .define_template(draft("gone", "no.such_action"))
            .await
            .unwrap();
        store
            .define_template(draft("fine", "workflow.log"))
            .await
            .unwrap();
        let api = Api::new(Executor::new(
            store,
            Arc::new(EnvSecrets),
            Config::default(),
        ));
        let message = fields(&[("body", "{}"), ("id", "m1")]);
        let outcome = api
            .deliver_message("gone", &trigger(&json!({})), &message, "1-0")
            .await;
        assert!(
            matches!(&outcome, Outcome::DeadLetter(code, _) if code == "R0109"),
            "{outcome:?}"
        );
        let first = api
            .deliver_message("fine", &trigger(&json!({})), &message, "1-0")
            .await;
        assert_eq!(first, Outcome::Started(run_id("fine", "missions", "m1")));
        let again = api
            .deliver_message("fine", &trigger(&json!({})), &message, "2-0")
            .await;
        assert_eq!(again, Outcome::Duplicate(run_id("fine", "missions", "m1")));
    }
}
