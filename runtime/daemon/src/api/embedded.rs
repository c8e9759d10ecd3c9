//! A definition sent to `opcode.define` as JSON text (spec/mcp.md,
//! `opcode.define`): compiled inside the template wrapper with the
//! caller's text embedded byte for byte, so that every position the
//! compiler finds in it is a position in what the caller sent. Its
//! diagnostics are then said in that text: offsets and lines relative to
//! it (file `definition.json`), fixes' edits applying to it, and patches
//! applying to the definition document it holds (pointers without the
//! `/definition` prefix). What lies outside the text (a wrapper field sent
//! as JSON) keeps its pointer and loses its position.

use opcode_compiler::source::LineIndex;
use serde_json::{Map, Value};

/// The file the diagnostics of a JSON-text definition name.
pub const FILE: &str = "definition.json";

/// A definition's text inside the wrapper text compiled.
pub struct Embedded<'a> {
    /// The caller's text.
    text: &'a str,
    /// Where it starts in the wrapper.
    offset: usize,
    index: LineIndex,
}

impl<'a> Embedded<'a> {
    /// The wrapper text for `wrapper` (the other arguments, an object) with
    /// `definition`, the caller's JSON text, as its last member.
    pub fn wrap(wrapper: &Map<String, Value>, definition: &'a str) -> (String, Embedded<'a>) {
        let head = serde_json::to_string_pretty(wrapper).unwrap_or_else(|_| "{}".into());
        let open = head.trim_end().strip_suffix('}').unwrap_or("{").trim_end();
        let separator = if open.ends_with('{') { "" } else { "," };
        let prefix = format!("{open}{separator}\n  \"definition\": ");
        let text = format!("{prefix}{definition}\n}}");
        let embedded = Embedded {
            text: definition,
            offset: prefix.len(),
            index: LineIndex::new(definition),
        };
        (text, embedded)
    }

    /// Rendered diagnostics (an array) said in the caller's text.
    pub fn relocate(&self, rendered: Value) -> Value {
        match rendered {
            Value::Array(list) => {
                Value::Array(list.into_iter().map(|d| self.diagnostic(d)).collect())
            }
            other => other,
        }
    }

    fn diagnostic(&self, mut diagnostic: Value) -> Value {
        let Some(members) = diagnostic.as_object_mut() else {
            return diagnostic;
        };
        members.insert("file".into(), FILE.into());
        self.position(members);
        if let Some(Value::Array(labels)) = members.get_mut("labels") {
            labels.retain_mut(|label| {
                label
                    .as_object_mut()
                    .is_some_and(|label| self.position(label))
            });
        }
        let fix = members.remove("fix").and_then(|fix| self.fix(fix));
        if let Some(fix) = fix {
            members.insert("fix".into(), fix);
        }
        diagnostic
    }

    /// Moves `start`/`end` and their lines and columns into the caller's
    /// text; false (and the position removed) when they lie outside it.
    fn position(&self, at: &mut Map<String, Value>) -> bool {
        let offset = |key: &str| at.get(key).and_then(Value::as_u64).map(|n| n as usize);
        let (Some(start), Some(end)) = (offset("start"), offset("end")) else {
            return false;
        };
        let inside = start >= self.offset && end <= self.offset + self.text.len();
        if !inside {
            for key in ["start", "end", "line", "column", "end_line", "end_column"] {
                at.remove(key);
            }
            return false;
        }
        let (start, end) = (start - self.offset, end - self.offset);
        let (from, to) = (
            self.index.line_col(self.text, start),
            self.index.line_col(self.text, end),
        );
        at.insert("start".into(), start.into());
        at.insert("end".into(), end.into());
        at.insert("line".into(), from.line.into());
        at.insert("column".into(), from.column.into());
        at.insert("end_line".into(), to.line.into());
        at.insert("end_column".into(), to.column.into());
        true
    }

    /// The fix with its edits in the caller's text and its patch on the
    /// definition document; `None` when neither can be said there.
    fn fix(&self, mut fix: Value) -> Option<Value> {
        let members = fix.as_object_mut()?;
        let edits = match members.remove("edits") {
            Some(Value::Array(mut edits)) if !edits.is_empty() => edits
                .iter_mut()
                .all(|edit| edit.as_object_mut().is_some_and(|e| self.position(e)))
                .then_some(edits),
            _ => None,
        };
        let patch = match members.remove("patch") {
            Some(Value::Array(ops)) if !ops.is_empty() => ops
                .into_iter()
                .map(on_definition)
                .collect::<Option<Vec<_>>>(),
            _ => None,
        };
        if edits.is_none() && patch.is_none() {
            return None;
        }
        if let Some(edits) = edits {
            members.insert("edits".into(), Value::Array(edits));
        }
        if let Some(patch) = patch {
            members.insert("patch".into(), Value::Array(patch));
        }
        Some(fix)
    }
}

/// One RFC 6902 operation on the arguments made an operation on the
/// definition they hold; `None` when it touches anything else.
fn on_definition(mut op: Value) -> Option<Value> {
    let members = op.as_object_mut()?;
    for key in ["path", "from"] {
        if let Some(pointer) = members.get(key).and_then(Value::as_str) {
            let inner = pointer.strip_prefix("/definition")?;
            if !(inner.is_empty() || inner.starts_with('/')) {
                return None;
            }
            members.insert(key.into(), inner.into());
        }
    }
    Some(op)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_callers_text_sits_whole_in_the_wrapper() {
        let definition = "{\"steps\": [\n  {\"id\": \"a\"}]}";
        let mut wrapper = Map::new();
        wrapper.insert("name".into(), "t".into());
        let (text, embedded) = Embedded::wrap(&wrapper, definition);
        assert_eq!(
            &text[embedded.offset..embedded.offset + definition.len()],
            definition
        );
        let parsed: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed["name"], "t");
        assert_eq!(parsed["definition"]["steps"][0]["id"], "a");
    }

    #[test]
    fn positions_edits_and_patches_are_said_in_the_callers_text() {
        let definition = "{\"steps\": [\n  {\"id\": \"a\", \"action\": \"http.fetch\"}]}";
        let mut wrapper = Map::new();
        wrapper.insert("name".into(), "t".into());
        let (text, embedded) = Embedded::wrap(&wrapper, definition);
        let at = text.find("\"http.fetch\"").unwrap();
        let (start, end) = (at, at + "\"http.fetch\"".len());
        let rendered = json!([{
            "code": "E0040", "file": "opcode.define", "line": 9, "column": 30,
            "start": start, "end": end, "pointer": "/definition/steps/0/action",
            "fix": {"message": "use http.get",
                    "edits": [{"start": start, "end": end, "replacement": "\"http.get\""}],
                    "patch": [{"op": "replace", "path": "/definition/steps/0/action", "value": "http.get"}]},
        }, {
            "code": "E0002", "start": 2, "end": 6, "pointer": "/input_schema",
            "fix": {"message": "x", "patch": [{"op": "remove", "path": "/input_schema"}]},
        }]);
        let said = embedded.relocate(rendered);
        let first = &said[0];
        let local = definition.find("\"http.fetch\"").unwrap();
        assert_eq!(first["file"], FILE);
        assert_eq!(
            (first["start"].as_u64(), first["line"].as_u64()),
            (Some(local as u64), Some(2))
        );
        assert_eq!(first["column"], 25);
        let edit = &first["fix"]["edits"][0];
        let mut fixed = definition.to_owned();
        fixed.replace_range(
            edit["start"].as_u64().unwrap() as usize..edit["end"].as_u64().unwrap() as usize,
            edit["replacement"].as_str().unwrap(),
        );
        assert!(fixed.contains("\"action\": \"http.get\""), "{fixed}");
        assert_eq!(first["fix"]["patch"][0]["path"], "/steps/0/action");
        let second = &said[1];
        assert!(
            second.get("start").is_none() && second.get("fix").is_none(),
            "{second}"
        );
        assert_eq!(second["pointer"], "/input_schema");
    }
}
