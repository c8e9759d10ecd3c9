//! Large values stored once (spec/events.md, "Large values"). A value of
//! [`MIN_BYTES`] of JSON or more is kept in the `blobs` table by the
//! SHA-256 of its text, and where it appears — an action's result, the
//! step's output, the run's output, the next step's input — the stored
//! JSON holds a reference instead: `{"$opcode_blob": "sha256:…", "bytes":
//! n}`. The same value written five times is stored once. A store that
//! keeps blobs outlines each commit ([`outlined`]) and puts the values
//! back when entries and rows are read ([`resolve_text`]), so nothing
//! above the store sees a reference; SQL over the tables (`opcode.query`)
//! does.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::{Blob, Commit, StoreError};

/// Values whose JSON is at least this long are stored once, by hash.
pub const MIN_BYTES: usize = 64 * 1024;

/// The key of a reference.
pub const KEY: &str = "$opcode_blob";

/// Adds to `hashes` (once each) the large values JSON `text` refers to,
/// in the order it does.
pub fn add_references(text: &str, hashes: &mut Vec<String>) {
    let quoted_key = format!("\"{KEY}\"");
    let mut rest = text;
    while let Some(at) = rest.find(&quoted_key) {
        rest = &rest[at + quoted_key.len()..];
        let value = rest.trim_start().strip_prefix(':').map(str::trim_start);
        let Some(hash) = value
            .and_then(|v| v.strip_prefix('"'))
            .and_then(|v| v.split('"').next())
        else {
            continue;
        };
        if !hashes.iter().any(|h| h == hash) {
            hashes.push(hash.to_owned());
        }
    }
}

/// JSON text with its large parts replaced by references, the blobs they
/// refer to added to `blobs` (once each); text shorter than [`MIN_BYTES`]
/// is returned as it is, without parsing.
pub fn text_of_json(json: String, blobs: &mut Vec<Blob>) -> String {
    if json.len() < MIN_BYTES {
        return json;
    }
    match serde_json::from_str::<Value>(&json) {
        Ok(value) => outline(&value, json, blobs).to_string(),
        Err(_) => json,
    }
}

/// `value` (whose JSON is `json`) with each part of [`MIN_BYTES`] or more
/// replaced, children first, then the whole if it is still that large.
fn outline(value: &Value, json: String, blobs: &mut Vec<Blob>) -> Value {
    if json.len() < MIN_BYTES {
        return value.clone();
    }
    let inner = match value {
        Value::Object(members) => Value::Object(
            members
                .iter()
                .map(|(k, v)| (k.clone(), outline(v, v.to_string(), blobs)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| outline(v, v.to_string(), blobs))
                .collect(),
        ),
        _ => return reference(json, blobs),
    };
    let inner_json = inner.to_string();
    if inner_json.len() < MIN_BYTES {
        inner
    } else {
        reference(inner_json, blobs)
    }
}

/// `sha256:` and the hex SHA-256 of `text`: how the store names what it
/// keeps by content.
pub fn sha256_of(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().fold(String::from("sha256:"), |mut h, b| {
        let _ = write!(h, "{b:02x}");
        h
    })
}

/// A reference to the blob of `json`, which is added to `blobs`.
fn reference(json: String, blobs: &mut Vec<Blob>) -> Value {
    let hash = sha256_of(&json);
    let mut r = Map::new();
    r.insert(KEY.into(), hash.clone().into());
    r.insert("bytes".into(), json.len().into());
    if !blobs.iter().any(|b| b.hash == hash) {
        blobs.push(Blob { hash, text: json });
    }
    Value::Object(r)
}

/// Does JSON text hold references?
pub fn has_references(json: &str) -> bool {
    json.contains(KEY)
}

/// `commit` with the large values of its JSON (entries' payloads, step
/// outputs and errors, the run's output, error and context) kept once, in
/// `commit.blobs`. A store that keeps blobs calls it first thing.
pub fn outlined(mut commit: Commit) -> Commit {
    let mut blobs = std::mem::take(&mut commit.blobs);
    let mut outline = |text: &mut String| {
        if text.len() >= MIN_BYTES {
            *text = text_of_json(std::mem::take(text), &mut blobs);
        }
    };
    for entry in &mut commit.entries {
        outline(&mut entry.payload);
    }
    for step in &mut commit.steps {
        step.output
            .iter_mut()
            .chain(step.error.iter_mut())
            .for_each(&mut outline);
    }
    if let Some(u) = &mut commit.update {
        u.output
            .iter_mut()
            .chain(u.error.iter_mut())
            .chain(u.context.iter_mut())
            .for_each(&mut outline);
    }
    commit.blobs = blobs;
    commit
}

/// `json` with every reference replaced by its value, read with `read`
/// (a blob's JSON by its hash).
pub async fn resolve_text<F, Fut>(json: String, read: F) -> Result<String, StoreError>
where
    F: FnMut(String) -> Fut,
    Fut: Future<Output = Result<Option<String>, StoreError>>,
{
    if !has_references(&json) {
        return Ok(json);
    }
    let Ok(value) = serde_json::from_str::<Value>(&json) else {
        return Ok(json);
    };
    Ok(resolve(value, read).await?.to_string())
}

/// `value` with every reference replaced by its value, read with `read`.
pub async fn resolve<F, Fut>(value: Value, mut read_blob: F) -> Result<Value, StoreError>
where
    F: FnMut(String) -> Fut,
    Fut: Future<Output = Result<Option<String>, StoreError>>,
{
    let mut read: HashMap<String, Value> = HashMap::new();
    let mut value = value;
    // A blob's own text may refer to the blobs inside it: resolve until none is left.
    loop {
        let mut wanted = Vec::new();
        collect(&value, &mut wanted);
        wanted.retain(|h| !read.contains_key(h));
        if wanted.is_empty() {
            break;
        }
        for hash in wanted {
            let text = read_blob(hash.clone()).await?.ok_or_else(|| {
                StoreError::Backend(format!("the stored value {hash} is missing"))
            })?;
            let found: Value = serde_json::from_str(&text).map_err(|e| {
                StoreError::Backend(format!("the stored value {hash} is not JSON: {e}"))
            })?;
            read.insert(hash, found);
        }
        value = replace(value, &read);
    }
    Ok(value)
}

fn hash_of(v: &Value) -> Option<&str> {
    match v {
        Value::Object(m) if m.len() == 2 && m.contains_key("bytes") => m.get(KEY)?.as_str(),
        _ => None,
    }
}

fn collect(v: &Value, out: &mut Vec<String>) {
    if let Some(hash) = hash_of(v) {
        return out.push(hash.to_owned());
    }
    match v {
        Value::Object(m) => m.values().for_each(|v| collect(v, out)),
        Value::Array(a) => a.iter().for_each(|v| collect(v, out)),
        _ => {}
    }
}

fn replace(v: Value, read: &HashMap<String, Value>) -> Value {
    if let Some(found) = hash_of(&v).and_then(|h| read.get(h)) {
        return found.clone();
    }
    match v {
        Value::Object(m) => {
            Value::Object(m.into_iter().map(|(k, v)| (k, replace(v, read))).collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(|v| replace(v, read)).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_large_value_written_in_several_places_is_one_blob() {
        let big = "x".repeat(MIN_BYTES);
        let output = json!({"path": "/a", "content": big});
        let mut blobs = Vec::new();
        let step = text_of_json(output.to_string(), &mut blobs);
        let run = text_of_json(json!({"r": output}).to_string(), &mut blobs);
        assert_eq!(blobs.len(), 1, "{blobs:?}");
        assert!(step.len() < 200 && run.len() < 200, "{step} {run}");
        assert!(has_references(&run));
        let small = text_of_json(json!({"a": 1}).to_string(), &mut blobs);
        assert_eq!(small, r#"{"a":1}"#);
    }

    #[test]
    fn many_medium_parts_make_a_blob_of_their_container() {
        let items: Vec<Value> = (0..2000)
            .map(|i| json!({"i": i, "pad": "p".repeat(40)}))
            .collect();
        let mut blobs = Vec::new();
        let stored = text_of_json(Value::Array(items).to_string(), &mut blobs);
        assert_eq!(blobs.len(), 1);
        assert!(
            stored.starts_with(r#"{"$opcode_blob":"sha256:"#),
            "{stored}"
        );
    }

    #[test]
    fn references_are_found_in_stored_text_once_each() {
        let text = r#"{"a":{"$opcode_blob":"sha256:aa","bytes":9},"b":[{"$opcode_blob" : "sha256:bb","bytes":9}],"c":{"$opcode_blob":"sha256:aa","bytes":9}}"#;
        let mut hashes = vec!["sha256:bb".to_owned()];
        add_references(text, &mut hashes);
        assert_eq!(hashes, ["sha256:bb", "sha256:aa"]);
    }
}
