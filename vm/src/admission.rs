//! Flow control as compiled (spec/flow-control.md): a template's
//! `concurrency` block ("Admission") and a step's `rate_limit` ("Rate
//! limits"), with the keys a run makes from its inputs and its `workflow`
//! namespace.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::policy::OnLimit;

/// At most `limit` runs of one key hold a slot at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Concurrency {
    /// The key's pieces, joined.
    pub key: Vec<KeyPart>,
    /// Runs of one key holding a slot at once (at least 1).
    pub limit: u32,
    /// What a run does at the limit.
    pub on_limit: OnLimit,
}

/// A piece of a concurrency key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyPart {
    /// Literal text.
    Text(String),
    /// A value read by path from the namespaces known when a run starts
    /// (`inputs`, `workflow`): the namespace, then keys and indexes.
    Read(Vec<PathStep>),
}

/// One step of a [`KeyPart::Read`] path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathStep {
    /// A member of an object.
    Key(String),
    /// An item of an array.
    Index(u64),
}

/// At most `limit` calls of one key's steps start in each window of `per_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimit {
    /// The key's pieces, joined; none: the step's own key. The single text
    /// `host` stands for the call's target (spec/breakers.md, "Targets").
    pub key: Vec<KeyPart>,
    /// Calls a window.
    pub limit: u32,
    /// The window, milliseconds.
    pub per_ms: u64,
}

impl RateLimit {
    /// Does the key stand for the call's target?
    pub fn by_host(&self) -> bool {
        matches!(self.key.as_slice(), [KeyPart::Text(text)] if text == "host")
    }
}

/// `parts` joined, each value read from `roots` as its text (a string as it
/// is, anything else as compact JSON, nothing as `null`); a NUL, which no
/// store keeps in text, stands as U+FFFD.
pub fn key_text(parts: &[KeyPart], roots: &Value) -> String {
    let mut key = String::new();
    for part in parts {
        match part {
            KeyPart::Text(text) => key.push_str(text),
            KeyPart::Read(path) => {
                let value = path.iter().try_fold(roots, |at, step| match step {
                    PathStep::Key(name) => at.get(name),
                    PathStep::Index(i) => usize::try_from(*i).ok().and_then(|i| at.get(i)),
                });
                match value {
                    Some(Value::String(text)) => key.push_str(text),
                    Some(other) => key.push_str(&other.to_string()),
                    None => key.push_str("null"),
                }
            }
        }
    }
    if key.contains('\0') {
        key = key.replace('\0', "\u{fffd}");
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_key_joins_its_text_and_the_values_it_reads() {
        let read = |path: &[&str]| {
            KeyPart::Read(path.iter().map(|s| PathStep::Key((*s).into())).collect())
        };
        let concurrency = Concurrency {
            key: vec![
                KeyPart::Text("deploy:".into()),
                read(&["inputs", "env"]),
                KeyPart::Text("/".into()),
                read(&["inputs", "n"]),
                KeyPart::Text("/".into()),
                read(&["inputs", "missing"]),
                KeyPart::Read(vec![
                    PathStep::Key("inputs".into()),
                    PathStep::Key("list".into()),
                    PathStep::Index(1),
                ]),
            ],
            limit: 1,
            on_limit: OnLimit::Queue,
        };
        let roots = json!({"inputs": {"env": "prod", "n": 3, "list": ["a", "b"]}});
        assert_eq!(key_text(&concurrency.key, &roots), "deploy:prod/3/nullb");
        // A NUL, which no store keeps in text, stands as U+FFFD.
        let nul = json!({"inputs": {"env": "a\0b"}});
        assert_eq!(key_text(&[read(&["inputs", "env"])], &nul), "a\u{fffd}b");
    }
}
