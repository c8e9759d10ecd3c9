//! Reading a tool's arguments, with coded errors that name the argument.

use opcode_vm::codes;
use serde_json::{Map, Value};

use super::ToolError;

/// A tool's arguments.
pub struct Args(Map<String, Value>);

fn invalid(message: String) -> ToolError {
    ToolError::new(codes::R0122, message)
}

impl Args {
    /// The arguments, which must be an object (or absent).
    pub fn new(value: Value) -> Result<Args, ToolError> {
        match value {
            Value::Object(map) => Ok(Args(map)),
            Value::Null => Ok(Args(Map::new())),
            other => Err(invalid(format!(
                "arguments must be an object, got {}",
                kind(&other)
            ))),
        }
    }

    /// These arguments with `name` set to `value`.
    pub fn with(&self, name: &str, value: Value) -> Args {
        let mut map = self.0.clone();
        map.insert(name.to_owned(), value);
        Args(map)
    }

    /// The names given.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// A value, if given and not null.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name).filter(|v| !v.is_null())
    }

    /// An optional string.
    pub fn opt_str(&self, name: &str) -> Result<Option<&str>, ToolError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(invalid(format!(
                "`{name}` must be a string, got {}",
                kind(other)
            ))),
        }
    }

    /// A required string.
    pub fn str(&self, name: &str) -> Result<&str, ToolError> {
        self.opt_str(name)?
            .filter(|s| !s.is_empty())
            .ok_or_else(|| invalid(format!("`{name}` is required")))
    }

    /// An optional object.
    pub fn opt_object(&self, name: &str) -> Result<Option<&Map<String, Value>>, ToolError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(map)),
            Some(other) => Err(invalid(format!(
                "`{name}` must be an object, got {}",
                kind(other)
            ))),
        }
    }

    /// An optional boolean; `"true"`/`"false"` strings are accepted, as
    /// opcode's clients send them.
    pub fn opt_bool(&self, name: &str) -> Result<Option<bool>, ToolError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::String(s)) if s == "true" || s == "false" => Ok(Some(s == "true")),
            Some(other) => Err(invalid(format!(
                "`{name}` must be a boolean, got {}",
                kind(other)
            ))),
        }
    }

    /// An optional non-negative count; numeric strings are accepted.
    pub fn opt_count(&self, name: &str) -> Result<Option<u32>, ToolError> {
        let bad = || invalid(format!("`{name}` must be a non-negative integer"));
        match self.get(name) {
            None => Ok(None),
            Some(Value::Number(n)) => n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Some)
                .ok_or_else(bad),
            Some(Value::String(s)) => s.parse().map(Some).map_err(|_| bad()),
            Some(_) => Err(bad()),
        }
    }

    /// An optional template version: `3`, `"3"` or opcode's `"v3"`.
    pub fn opt_version(&self, name: &str) -> Result<Option<i64>, ToolError> {
        let bad = || {
            invalid(format!(
                "`{name}` must be a version number such as 3 or \"v3\""
            ))
        };
        match self.get(name) {
            None => Ok(None),
            Some(Value::Number(n)) => n.as_i64().filter(|v| *v >= 1).map(Some).ok_or_else(bad),
            Some(Value::String(s)) => {
                let digits = s.strip_prefix('v').unwrap_or(s);
                digits
                    .parse()
                    .ok()
                    .filter(|v| *v >= 1)
                    .map(Some)
                    .ok_or_else(bad)
            }
            Some(_) => Err(bad()),
        }
    }
}

/// A JSON value's type, for messages.
pub use opcode_vm::catalog::describe_value as kind;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn versions_accept_opcode_spellings() {
        let args = Args::new(json!({"a": "v12", "b": 3, "c": "7", "d": "x", "e": 0})).unwrap();
        assert_eq!(args.opt_version("a").unwrap(), Some(12));
        assert_eq!(args.opt_version("b").unwrap(), Some(3));
        assert_eq!(args.opt_version("c").unwrap(), Some(7));
        assert!(args.opt_version("d").is_err());
        assert!(args.opt_version("e").is_err());
        assert_eq!(args.opt_version("missing").unwrap(), None);
    }

    #[test]
    fn errors_name_the_argument() {
        let args = Args::new(json!({"n": "x", "s": 1})).unwrap();
        let e = args.str("missing").unwrap_err();
        assert_eq!(e.code.id, "R0122");
        assert!(e.message.contains("`missing`"));
        assert!(args.str("s").unwrap_err().message.contains("a number"));
        assert!(args.opt_count("n").is_err());
        assert!(Args::new(json!([1])).is_err());
    }
}
