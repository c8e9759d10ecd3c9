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
    /// Adds a value (and its JSON-escaped spelling, which raw JSON text
    /// such as a shell's standard output would show).
    pub fn add(&mut self, value: &str) {
        if value.is_empty() {
            return;
        }
        let escaped = serde_json::to_string(value).unwrap_or_default();
        let escaped = &escaped[1..escaped.len().saturating_sub(1).max(1)];
        for form in [value, escaped] {
            if !form.is_empty() && !self.0.iter().any(|v| v == form) {
                self.0.push(form.to_owned());
            }
        }
        // Longest first, so a value containing another is masked whole.
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
    fn a_longer_secret_containing_a_shorter_one_is_masked_whole() {
        let mut revealed = Revealed::default();
        revealed.add("ab");
        revealed.add("xxabyy");
        assert_eq!(revealed.text("1 xxabyy 2 ab"), "1 [REDACTED] 2 [REDACTED]");
    }
}
