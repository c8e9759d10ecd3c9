//! Operations on JSON values the VM needs: following a reference path,
//! rendering a value into text, turning a condition's value into a branch key.

use std::fmt::Write;

use serde_json::Value;

use crate::program::PathSeg;

/// Follows `path` into `value`. On failure, the index of the segment that
/// could not be followed.
pub fn follow<'v>(value: &'v Value, path: &[PathSeg]) -> Result<&'v Value, usize> {
    let mut current = value;
    for (i, segment) in path.iter().enumerate() {
        current = match (segment, current) {
            (PathSeg::Key(k), Value::Object(map)) => map.get(k).ok_or(i)?,
            (PathSeg::Key(k), Value::Array(items)) => {
                let index: usize = k.parse().map_err(|_| i)?;
                items.get(index).ok_or(i)?
            }
            (PathSeg::Index(n), Value::Array(items)) => {
                items.get(usize::try_from(*n).map_err(|_| i)?).ok_or(i)?
            }
            (PathSeg::Index(n), Value::Object(map)) => map.get(&n.to_string()).ok_or(i)?,
            _ => return Err(i),
        };
    }
    Ok(current)
}

/// [`follow`], for changing the value found.
pub fn follow_mut<'v>(value: &'v mut Value, path: &[PathSeg]) -> Option<&'v mut Value> {
    let mut current = value;
    for segment in path {
        current = match (segment, current) {
            (PathSeg::Key(k), Value::Object(map)) => map.get_mut(k)?,
            (PathSeg::Key(k), Value::Array(items)) => items.get_mut(k.parse::<usize>().ok()?)?,
            (PathSeg::Index(n), Value::Array(items)) => items.get_mut(usize::try_from(*n).ok()?)?,
            (PathSeg::Index(n), Value::Object(map)) => map.get_mut(&n.to_string())?,
            _ => return None,
        };
    }
    Some(current)
}

/// Writes a value as text: strings raw, everything else compact JSON.
pub fn write_text(out: &mut String, value: &Value) {
    match value {
        Value::String(s) => out.push_str(s),
        other => {
            let _ = write!(out, "{other}");
        }
    }
}

/// The branch key of a condition's value: `true`/`false`, strings as they
/// are, integers in decimal, doubles in shortest form (`2.0` → `2`), `null`,
/// other values as compact JSON.
pub fn branch_key(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (None, Some(u), _) => u.to_string(),
            (None, None, Some(f)) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn follows_keys_and_indices() {
        let v = json!({"a": {"b": [10, {"c": "x"}]}});
        let path = [
            PathSeg::Key("a".into()),
            PathSeg::Key("b".into()),
            PathSeg::Index(1),
            PathSeg::Key("c".into()),
        ];
        assert_eq!(follow(&v, &path), Ok(&json!("x")));
        let dotted = [
            PathSeg::Key("a".into()),
            PathSeg::Key("b".into()),
            PathSeg::Key("0".into()),
        ];
        assert_eq!(follow(&v, &dotted), Ok(&json!(10)));
        assert_eq!(follow(&v, &[PathSeg::Key("z".into())]), Err(0));
        assert_eq!(
            follow(&v, &[PathSeg::Key("a".into()), PathSeg::Index(0)]),
            Err(1)
        );
    }

    #[test]
    fn renders_text() {
        let mut s = String::new();
        write_text(&mut s, &json!("raw \"text\""));
        write_text(&mut s, &json!({"a": 1}));
        write_text(&mut s, &json!(null));
        assert_eq!(s, "raw \"text\"{\"a\":1}null");
    }

    #[test]
    fn branch_keys() {
        assert_eq!(branch_key(&json!(true)), "true");
        assert_eq!(branch_key(&json!("prod")), "prod");
        assert_eq!(branch_key(&json!(2)), "2");
        assert_eq!(branch_key(&json!(2.0)), "2");
        assert_eq!(branch_key(&json!(2.5)), "2.5");
        assert_eq!(branch_key(&json!(null)), "null");
    }
}
