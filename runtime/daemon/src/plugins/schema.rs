//! A plugin tool's JSON Schema as an action signature the compiler checks.

use opcode_vm::catalog::{ActionSpec, ParamSpec, Placement, Ty};
use serde_json::{Map, Value};

/// The signature of `<plugin>.<tool>` from the tool's description and
/// input schema. Parameters are the schema's `properties` (required ones
/// from `required`); other parameters are accepted only when the schema
/// has no properties or allows additional ones.
pub fn action_spec(name: String, doc: &str, input: &Map<String, Value>) -> ActionSpec {
    let required: Vec<&str> = input
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let properties = input.get("properties").and_then(Value::as_object);
    let params = properties
        .into_iter()
        .flatten()
        .map(|(key, schema)| ParamSpec {
            name: key.clone(),
            ty: ty_of(schema),
            required: required.contains(&key.as_str()),
            doc: schema
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        })
        .collect();
    let open = properties.is_none_or(Map::is_empty)
        || !matches!(
            input.get("additionalProperties"),
            Some(Value::Bool(false)) | None
        );
    ActionSpec {
        name,
        doc: doc.to_owned(),
        params,
        open_params: open,
        output: Ty::object([
            ("text", Ty::String),
            ("content", Ty::array(Ty::Any)),
            ("structured", Ty::Any),
        ]),
        placement: Placement::Dispatched,
        reads_only: false,
    }
}

/// The type a JSON Schema accepts, as far as the compiler can check it.
pub fn ty_of(schema: &Value) -> Ty {
    let Some(schema) = schema.as_object() else {
        return Ty::Any;
    };
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let strings: Option<Vec<String>> = values
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect();
        return strings.map_or(Ty::Any, |values| Ty::Enum { values });
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            return Ty::OneOf {
                types: options.iter().map(ty_of).collect(),
            };
        }
    }
    match schema.get("type") {
        Some(Value::String(t)) => named(t, schema),
        Some(Value::Array(types)) => Ty::OneOf {
            types: types
                .iter()
                .filter_map(Value::as_str)
                .map(|t| named(t, schema))
                .collect(),
        },
        _ => Ty::Any,
    }
}

fn named(name: &str, schema: &Map<String, Value>) -> Ty {
    match name {
        "string" => Ty::String,
        "integer" => Ty::Int,
        "number" => Ty::Number,
        "boolean" => Ty::Bool,
        "null" => Ty::Null,
        "array" => Ty::array(schema.get("items").map_or(Ty::Any, ty_of)),
        // Nested objects: keys are the tool's to check (optional fields and
        // extra keys are common); only a uniform value type is checked here.
        "object" => Ty::map(
            schema
                .get("additionalProperties")
                .filter(|v| v.is_object())
                .map_or(Ty::Any, ty_of),
        ),
        _ => Ty::Any,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn properties_become_checked_parameters() {
        let schema = json!({"type": "object", "properties": {
            "message": {"type": "string", "description": "what to echo"},
            "times": {"type": "integer"},
            "mode": {"type": "string", "enum": ["loud", "quiet"]},
            "tags": {"type": "array", "items": {"type": "string"}}},
            "required": ["message"], "additionalProperties": false});
        let spec = action_spec("p.echo".into(), "Echoes", schema.as_object().unwrap());
        assert!(!spec.open_params);
        let message = spec.param("message").unwrap();
        assert!(message.required && message.ty == Ty::String && message.doc == "what to echo");
        assert_eq!(spec.param("times").unwrap().ty, Ty::Int);
        assert_eq!(spec.param("tags").unwrap().ty, Ty::array(Ty::String));
        assert!(matches!(spec.param("mode").unwrap().ty, Ty::Enum { .. }));
        let open = action_spec(
            "p.any".into(),
            "",
            json!({"type": "object"}).as_object().unwrap(),
        );
        assert!(open.open_params && open.params.is_empty());
    }
}
