//! JSON → CEL values, in one pass and without copying strings: a value
//! borrows the JSON it came from for the evaluation's lifetime, and of an
//! object only the members an expression reads ([`Need`]) are converted.

use std::collections::HashMap;

use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt,
};
use cel::common::value::Val;
use serde_json::Value;

use super::reads::Need;

/// `value` as CEL, converted only as far as `need` reads it. Integers stay
/// integers; other numbers become doubles.
pub fn of<'v>(value: &'v Value, need: &Need) -> Box<dyn Val + 'v> {
    match (value, need) {
        (Value::Object(map), Need::Fields(fields)) => {
            let picked = fields.iter().filter_map(|(name, need)| {
                let (key, value) = map.get_key_value(name)?;
                Some((key.as_str(), of(value, need)))
            });
            Box::new(map_of(picked))
        }
        _ => whole(value),
    }
}

/// A CEL map of `entries` (string keys).
pub fn map_of<'v>(entries: impl Iterator<Item = (&'v str, Box<dyn Val + 'v>)>) -> CelMap<'v> {
    let entries: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = entries
        .map(|(k, v)| (CelMapKey::String(CelString::from(k)), v))
        .collect();
    CelMap::from(entries)
}

/// All of `value` as CEL.
pub fn whole(value: &Value) -> Box<dyn Val + '_> {
    match value {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Box::new(CelInt::from(i)),
            (None, Some(u)) => Box::new(CelUInt::from(u)),
            _ => Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN))),
        },
        Value::String(s) => Box::new(CelString::from(s.as_str())),
        Value::Array(items) => Box::new(CelList::from(
            items.iter().map(whole).collect::<Vec<Box<dyn Val + '_>>>(),
        )),
        Value::Object(map) => Box::new(map_of(map.iter().map(|(k, v)| (k.as_str(), whole(v))))),
    }
}
