//! RFC 6902 patches derived from a fix's text edits, so that a client
//! editing the JSON tree (an agent over MCP, which never saw our text)
//! can apply every fix: the edits are applied to the source, both texts
//! read as JSON, and the difference written as `add`, `remove` and
//! `replace` operations on the document. A fix whose text does not read
//! as JSON before or after (a syntax error's) keeps its edits alone.

use serde_json::Value;

use super::{Diagnostic, PatchOp, TextEdit};
use crate::syntax::node::child_pointer;

/// Gives each fix of `diagnostics` on the JSON text `src` that has text
/// edits and no patch the patch its edits make.
pub fn derive<'d>(diagnostics: impl IntoIterator<Item = &'d mut Diagnostic>, src: &str) {
    let mut before: Option<Option<Value>> = None;
    for diagnostic in diagnostics {
        let Some(fix) = diagnostic.fix.as_mut() else {
            continue;
        };
        if !fix.patch.is_empty() || fix.edits.is_empty() {
            continue;
        }
        let Some(original) = before
            .get_or_insert_with(|| serde_json::from_str(src).ok())
            .as_ref()
        else {
            return;
        };
        let Some(after) = applied(src, &fix.edits).and_then(|t| serde_json::from_str(&t).ok())
        else {
            continue;
        };
        diff(original, &after, "", &mut fix.patch);
    }
}

/// `src` with `edits` applied (none overlapping), if they fit it.
fn applied(src: &str, edits: &[TextEdit]) -> Option<String> {
    let mut sorted: Vec<&TextEdit> = edits.iter().collect();
    sorted.sort_by_key(|e| std::cmp::Reverse(e.span.start));
    let mut text = src.to_owned();
    let mut limit = text.len();
    for edit in sorted {
        let (start, end) = (edit.span.start as usize, edit.span.end as usize);
        if start > end
            || end > limit
            || !text.is_char_boundary(start)
            || !text.is_char_boundary(end)
        {
            return None;
        }
        text.replace_range(start..end, &edit.replacement);
        limit = start;
    }
    Some(text)
}

/// The operations that turn `before` into `after` at `path`.
fn diff(before: &Value, after: &Value, path: &str, out: &mut Vec<PatchOp>) {
    if before == after {
        return;
    }
    match (before, after) {
        (Value::Object(old), Value::Object(new)) => {
            for key in old.keys().filter(|k| !new.contains_key(*k)) {
                out.push(PatchOp::Remove {
                    path: child_pointer(path, key),
                });
            }
            for (key, value) in new {
                let at = child_pointer(path, key);
                match old.get(key) {
                    Some(was) => diff(was, value, &at, out),
                    None => out.push(PatchOp::Add {
                        path: at,
                        value: value.clone(),
                    }),
                }
            }
        }
        (Value::Array(old), Value::Array(new)) if old.len() == new.len() => {
            for (i, (was, value)) in old.iter().zip(new).enumerate() {
                diff(was, value, &format!("{path}/{i}"), out);
            }
        }
        _ => out.push(PatchOp::Replace {
            path: path.to_owned(),
            value: after.clone(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Span;
    use serde_json::json;

    fn patch_of(src: &str, at: usize, end: usize, replacement: &str) -> Vec<PatchOp> {
        let mut out = Vec::new();
        let edits = [TextEdit {
            span: Span::new(at, end),
            replacement: replacement.to_owned(),
        }];
        let after: Value = serde_json::from_str(&applied(src, &edits).unwrap()).unwrap();
        diff(&serde_json::from_str(src).unwrap(), &after, "", &mut out);
        out
    }

    #[test]
    fn edits_become_the_operations_they_make() {
        let src = r#"{"steps": [{"id": "a", "action": "crypto.hsh"}]}"#;
        let at = src.find("hsh").unwrap();
        assert_eq!(
            patch_of(src, at, at + 3, "hash"),
            [PatchOp::Replace {
                path: "/steps/0/action".into(),
                value: json!("crypto.hash")
            }]
        );
        let at = src.find("\"action\"").unwrap();
        assert_eq!(
            patch_of(src, at, at, "\"depends_on\": [\"x\"], "),
            [PatchOp::Add {
                path: "/steps/0/depends_on".into(),
                value: json!(["x"])
            }]
        );
    }
}
