//! `triggers.webhook.debounce` (spec/flow-control.md, "Debounce"): a burst
//! of deliveries of one key starts one run, after a quiet period, with the
//! first or the last delivery's params, as the trigger says.

use opcode_compiler::syntax::template::{Piece, Segment, parse_template};
use opcode_vm::admission::{KeyPart, PathStep, key_text};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Why a debounce is refused: its pointer under the arguments and the
/// message (what `triggers.webhook` answers as its own refusal).
type Refused = (String, String);

/// How a webhook's deliveries are gathered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Debounce {
    /// The key's text and the params it reads (none: one key for the
    /// template).
    pub key: Vec<KeyPart>,
    /// The quiet time after the last delivery before the run starts.
    pub period_ms: u64,
    /// The longest a run waits after the first delivery of its burst.
    pub max_wait_ms: u64,
    /// The run gets the last delivery's params (`keep: last`), or the first's.
    pub keep_last: bool,
}

/// What `debounce` may hold.
const KEYS: [&str; 4] = ["key", "period", "max_wait", "keep"];

impl Debounce {
    /// The `debounce` of a webhook trigger (`at` makes a key's pointer).
    pub fn of(value: &Value, at: impl Fn(&str) -> String) -> Result<Debounce, Refused> {
        let Value::Object(block) = value else {
            return Err((at(""), "`debounce` must be an object".into()));
        };
        if let Some(key) = block.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err((
                at(key),
                format!("`debounce` has no `{key}` ({})", KEYS.join(", ")),
            ));
        }
        let duration = |name: &str| -> Result<Option<u64>, Refused> {
            let Some(value) = block.get(name) else {
                return Ok(None);
            };
            let ms = value
                .as_str()
                .and_then(|text| opcode_stdlib::exec::parse_duration(text).ok())
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
                .filter(|ms| *ms >= 1000);
            ms.map(Some).ok_or_else(|| {
                (
                    at(name),
                    format!("`debounce.{name}` is a duration of a second or more, such as \"1m\""),
                )
            })
        };
        let period_ms = duration("period")?.ok_or_else(|| {
            (
                at("period"),
                "`debounce` needs a `period`, such as \"1m\"".to_owned(),
            )
        })?;
        let max_wait_ms = duration("max_wait")?.unwrap_or(period_ms.saturating_mul(10));
        if max_wait_ms < period_ms {
            return Err((
                at("max_wait"),
                "`debounce.max_wait` is at least its `period`".into(),
            ));
        }
        let keep_last = match block.get("keep").and_then(Value::as_str) {
            Some("last") => true,
            Some("first") => false,
            _ => {
                return Err((
                    at("keep"),
                    "`debounce.keep` says which delivery's params the run gets: `first` or `last`"
                        .into(),
                ));
            }
        };
        let key = match block.get("key") {
            None => Vec::new(),
            Some(Value::String(key)) => key_parts(key).map_err(|message| (at("key"), message))?,
            Some(_) => return Err((at("key"), "`debounce.key` must be a string".into())),
        };
        Ok(Debounce {
            key,
            period_ms,
            max_wait_ms,
            keep_last,
        })
    }

    /// The key of a delivery whose run would get `params`, read as the
    /// VM reads a concurrency key ([`key_text`]).
    pub fn key_of(&self, params: &Map<String, Value>) -> String {
        let mut roots = Map::new();
        roots.insert("inputs".into(), Value::Object(params.clone()));
        key_text(&self.key, &Value::Object(roots))
    }
}

/// A key's pieces: its text and the params it reads. Only `${{inputs.…}}`
/// is read: the delivery's params are all a key knows.
fn key_parts(key: &str) -> Result<Vec<KeyPart>, String> {
    let pieces = parse_template(key).map_err(|e| format!("`debounce.key`: {}", e.message))?;
    pieces
        .into_iter()
        .map(|piece| match piece {
            Piece::Text(text) => Ok(KeyPart::Text(text)),
            Piece::Ref(reference, _)
                if reference.namespace == "inputs" && !reference.segments.is_empty() =>
            {
                let mut path = vec![PathStep::Key("inputs".into())];
                path.extend(reference.segments.into_iter().map(|(s, _)| match s {
                    Segment::Key(name) => PathStep::Key(name),
                    Segment::Index(i) => PathStep::Index(i),
                }));
                Ok(KeyPart::Read(path))
            }
            Piece::Ref(reference, _) => Err(format!(
                "`debounce.key` reads the delivery's params, `${{{{inputs.NAME}}}}`; not `{}`",
                reference.namespace
            )),
        })
        .collect()
}

/// The run a pending start of `template`'s key `key`, opened at
/// `first_ms`, starts: the same however often the start is tried.
pub fn run_id(template: &str, key: &str, first_ms: u64) -> String {
    let digest = Sha256::digest(format!("{template}\0{key}\0{first_ms}").as_bytes());
    format!("debounce-{}", hex::encode(&digest[..12]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn of(value: &Value) -> Result<Debounce, Refused> {
        Debounce::of(value, |k| format!("/triggers/webhook/debounce/{k}"))
    }

    #[test]
    fn a_debounce_block_is_checked_and_its_key_read_from_the_params() {
        let ok =
            of(&json!({"key": "push-${{inputs.ref}}", "period": "1m", "keep": "last"})).unwrap();
        assert_eq!(
            (ok.period_ms, ok.max_wait_ms, ok.keep_last),
            (60_000, 600_000, true)
        );
        let params = json!({"ref": "main"});
        assert_eq!(ok.key_of(params.as_object().unwrap()), "push-main");
        assert!(
            of(&json!({"period": "1m"}))
                .unwrap_err()
                .1
                .contains("first` or `last")
        );
        assert!(
            of(&json!({"period": "10ms", "keep": "last"}))
                .unwrap_err()
                .1
                .contains("second")
        );
        assert!(of(&json!({"period": "1m", "max_wait": "10s", "keep": "first"})).is_err());
        let refused = of(&json!({"key": "${{steps.a.output}}", "period": "1m", "keep": "first"}));
        assert_eq!(refused.unwrap_err().0, "/triggers/webhook/debounce/key");
        assert!(of(&json!({"period": "1m", "keep": "first", "wait": 1})).is_err());
        assert_ne!(run_id("t", "k", 1), run_id("t", "k", 2));
    }
}
