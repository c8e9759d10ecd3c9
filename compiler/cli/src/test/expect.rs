//! Matching what a run did against what a case expects: objects match
//! partially (the keys the case gives), arrays item by item and whole,
//! numbers by value (`1` is `1.0`), everything else exactly. Each
//! mismatch is one line naming where it is.

use serde_json::Value;

/// The mismatches of `actual` against `expected`, at JSON pointer `at`.
pub fn mismatches(at: &str, expected: &Value, actual: Option<&Value>, out: &mut Vec<String>) {
    let Some(actual) = actual else {
        out.push(format!(
            "at {at}: expected {}, got nothing",
            short(expected)
        ));
        return;
    };
    match (expected, actual) {
        (Value::Object(want), Value::Object(have)) => {
            for (key, value) in want {
                let at = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
                mismatches(&at, value, have.get(key), out);
            }
        }
        (Value::Array(want), Value::Array(have)) if want.len() == have.len() => {
            for (i, (w, h)) in want.iter().zip(have).enumerate() {
                mismatches(&format!("{at}/{i}"), w, Some(h), out);
            }
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
        _ if expected == actual => {}
        _ => out.push(format!(
            "at {at}: expected {}, got {}",
            short(expected),
            short(actual)
        )),
    }
}

/// A value as one line, cut at 200 characters.
pub fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 200 {
        return text;
    }
    let cut: String = text.chars().take(200).collect();
    format!("{cut}… ({} bytes)", text.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn diff(expected: &Value, actual: &Value) -> Vec<String> {
        let mut out = Vec::new();
        mismatches("", expected, Some(actual), &mut out);
        out
    }

    #[test]
    fn objects_match_on_the_keys_given() {
        assert!(diff(&json!({"a": 1}), &json!({"a": 1.0, "b": 2})).is_empty());
        assert_eq!(
            diff(&json!({"a": {"b": [1, 2]}}), &json!({"a": {"b": [1, 3]}})),
            vec!["at /a/b/1: expected 2, got 3"]
        );
        assert_eq!(
            diff(&json!({"x/y": 1}), &json!({})),
            vec!["at /x~1y: expected 1, got nothing"]
        );
        assert_eq!(
            diff(&json!([1]), &json!([1, 2])),
            vec!["at : expected [1], got [1,2]"]
        );
    }
}
