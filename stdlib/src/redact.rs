//! Masking secret values: whatever an action returns, logs or publishes
//! has every secret value it was given replaced by [`MASK`].

use serde_json::Value;

/// What a secret value is replaced with.
pub const MASK: &str = "[REDACTED]";

/// The secret values revealed to one call. Its `Debug` shows only how many.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Revealed(Vec<String>);

impl std::fmt::Debug for Revealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Revealed({} values)", self.0.len())
    }
}

impl Revealed {
    /// Adds a value, and the spellings raw JSON text (a shell's standard
    /// output, an HTTP body) would show it in: JSON-escaped, and
    /// ASCII-escaped (`\u00f6`, in lower and upper case hex, as Python's
    /// and other encoders write non-ASCII text).
    pub fn add(&mut self, value: &str) {
        if value.is_empty() {
            return;
        }
        let escaped = serde_json::to_string(value).unwrap_or_default();
        let escaped = escaped[1..escaped.len().saturating_sub(1).max(1)].to_owned();
        let ascii = ascii_escaped(&escaped);
        for form in [value.to_owned(), escaped, upper_hex(&ascii), ascii] {
            if !form.is_empty() && !self.0.contains(&form) {
                self.0.push(form);
            }
        }
        // Longest first, so a value containing another is masked whole.
        self.0.sort_by_key(|v| std::cmp::Reverse(v.len()));
    }

    /// Adds every value `other` holds.
    pub fn extend(&mut self, other: &Revealed) {
        for form in &other.0 {
            if !self.0.contains(form) {
                self.0.push(form.clone());
            }
        }
        self.0.sort_by_key(|v| std::cmp::Reverse(v.len()));
    }

    /// No values?
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `text` with every value masked.
    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for value in &self.0 {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), MASK);
            }
        }
        out
    }

    /// `value` with every value masked in its strings and keys.
    pub fn value(&self, value: &Value) -> Value {
        if self.is_empty() {
            return value.clone();
        }
        match value {
            Value::String(s) => Value::String(self.text(s)),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.value(v)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (self.text(k), self.value(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// JSON-escaped text with every non-ASCII character as `\uXXXX` (two
/// escapes, a surrogate pair, beyond the first plane); lower-case hex.
fn ascii_escaped(escaped: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(escaped.len());
    for c in escaped.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        }
    }
    out
}

/// `text` with the hex digits of its `\u` escapes in upper case.
fn upper_hex(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("\\u") {
        out.push_str(&rest[..at + 2]);
        let digits = rest.get(at + 2..at + 6).unwrap_or_default();
        out.push_str(&digits.to_ascii_uppercase());
        rest = rest.get(at + 6..).unwrap_or_default();
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn masks_values_keys_and_escaped_forms() {
        let mut revealed = Revealed::default();
        revealed.add("s3cr\"et");
        revealed.add("tok");
        let out = revealed.value(&json!({
            "body": "auth=s3cr\"et&x=tok",
            "raw": "{\"k\":\"s3cr\\\"et\"}",
            "tok": [1, "tok"],
        }));
        assert_eq!(
            out,
            json!({
                "body": "auth=[REDACTED]&x=[REDACTED]",
                "raw": "{\"k\":\"[REDACTED]\"}",
                "[REDACTED]": [1, "[REDACTED]"],
            })
        );
        assert_eq!(format!("{revealed:?}"), "Revealed(3 values)");
    }

    #[test]
    fn ascii_escaped_spellings_are_masked() {
        let mut revealed = Revealed::default();
        revealed.add("w\u{f6}rd \u{1F511}");
        let python = r#"{"t": "w\u00f6rd \ud83d\udd11"}"#;
        assert_eq!(revealed.text(python), r#"{"t": "[REDACTED]"}"#);
        assert_eq!(
            revealed.text(r"W\u00F6RD w\u00F6rd \uD83D\uDD11"),
            "W\\u00F6RD [REDACTED]"
        );
        assert_eq!(revealed.text("w\u{f6}rd \u{1F511}"), "[REDACTED]");
    }

    #[test]
    fn a_longer_secret_containing_a_shorter_one_is_masked_whole() {
        let mut revealed = Revealed::default();
        revealed.add("ab");
        revealed.add("xxabyy");
        assert_eq!(revealed.text("1 xxabyy 2 ab"), "1 [REDACTED] 2 [REDACTED]");
    }
}
