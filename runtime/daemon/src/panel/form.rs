//! A template's run form, generated from its `input_schema`: one field per
//! top-level property (typed, required marked, default filled in, enums as
//! selects), read back into params and checked against the schema, each
//! problem shown at its field; a raw-JSON text stands in for the fields.

use std::collections::BTreeMap;

use jsonschema::JsonType;
use jsonschema::error::{TypeKind, ValidationErrorKind};
use maud::{Markup, html};
use serde_json::{Map, Value};

use super::Fields;

/// Problems by field name (`""`: the params as a whole).
pub type Problems = BTreeMap<String, String>;

/// The prefix of a generated field's form name.
const PREFIX: &str = "in.";

/// How a property is typed in.
#[derive(Debug, Clone, PartialEq)]
enum Input {
    Text,
    Integer,
    Number,
    Boolean,
    Choice(Vec<Value>),
    Json,
}

/// One top-level property of the schema.
#[derive(Debug, Clone)]
struct Field {
    name: String,
    input: Input,
    required: bool,
    default: Option<Value>,
    help: Option<String>,
}

/// The schema's top-level properties, in the schema's order (empty when it
/// has none: the raw-JSON text is the form then).
fn fields_of(schema: &Value) -> Vec<Field> {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema["properties"].as_object() else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, property)| {
            let input = match (&property["enum"], property["type"].as_str()) {
                (Value::Array(values), _) => Input::Choice(values.clone()),
                (_, Some("string")) => Input::Text,
                (_, Some("integer")) => Input::Integer,
                (_, Some("number")) => Input::Number,
                (_, Some("boolean")) => Input::Boolean,
                _ => Input::Json,
            };
            let help = property["description"]
                .as_str()
                .or(property["title"].as_str())
                .map(str::to_owned);
            Field {
                name: name.clone(),
                input,
                required: required.contains(&name.as_str()),
                default: property.get("default").cloned(),
                help,
            }
        })
        .collect()
}

/// Does `schema` give the form fields of its own?
pub fn has_fields(schema: Option<&Value>) -> bool {
    schema.is_some_and(|s| !fields_of(s).is_empty())
}

/// A value as a field shows it: strings bare, the rest as JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The fields of `schema`, holding `posted` (else the defaults), each
/// with its problem. Required fields are marked, not enforced by the
/// browser: the raw JSON may stand in for them, and the daemon checks.
pub fn fields(schema: &Value, posted: Option<&Fields>, problems: &Problems) -> Markup {
    html! {
        @for field in fields_of(schema) {
            @let key = format!("{PREFIX}{}", field.name);
            @let value = match posted {
                Some(posted) => posted.get(&key).cloned().unwrap_or_default(),
                None => field.default.as_ref().map(shown).unwrap_or_default(),
            };
            @let problem = problems.get(&field.name);
            @let id = format!("field-{}", field.name);
            div.field.invalid-field[problem.is_some()] {
                label for=(id) {
                    (field.name)
                    @if field.required { " " abbr.required title="required" { "*" } }
                }
                @match &field.input {
                    Input::Choice(values) => {
                        select id=(id) name=(key) aria-required=[field.required.then_some("true")] {
                            @if !field.required || field.default.is_none() { option value="" { "—" } }
                            @for v in values { option value=(shown(v)) selected[shown(v) == value] { (shown(v)) } }
                        }
                    }
                    Input::Boolean => {
                        select id=(id) name=(key) {
                            option value="" { "—" }
                            option value="true" selected[value == "true"] { "true" }
                            option value="false" selected[value == "false"] { "false" }
                        }
                    }
                    Input::Integer => { input id=(id) type="number" step="1" name=(key) value=(value) aria-required=[field.required.then_some("true")]; }
                    Input::Number => { input id=(id) type="number" step="any" name=(key) value=(value) aria-required=[field.required.then_some("true")]; }
                    Input::Text => { input id=(id) type="text" name=(key) value=(value) aria-required=[field.required.then_some("true")]; }
                    Input::Json => { textarea id=(id) name=(key) rows="3" spellcheck="false" placeholder="JSON" { (value) } }
                }
                @if let Some(problem) = problem { span.problem role="alert" { (problem) } }
                @if let Some(help) = &field.help { span.help { (help) } }
            }
        }
    }
}

/// The params the posted form gives: the raw JSON text when one was typed,
/// else the fields of `schema`, typed as it says. Empty fields are left out
/// (the template's defaults apply). Problems come back by field.
pub fn params(schema: Option<&Value>, posted: &Fields) -> Result<Value, Problems> {
    let mut problems = Problems::new();
    let raw = posted.get("params").map_or("", |p| p.trim());
    let from_fields = schema.is_some_and(|s| !fields_of(s).is_empty());
    let params = if !raw.is_empty() || !from_fields {
        let raw = if raw.is_empty() { "{}" } else { raw };
        match serde_json::from_str::<Value>(raw) {
            Ok(value @ Value::Object(_)) => value,
            Ok(_) => return Err(one("", "the params must be a JSON object")),
            Err(e) => return Err(one("", &not_json(&e))),
        }
    } else {
        let mut out = Map::new();
        for field in schema.map(fields_of).unwrap_or_default() {
            let text = posted
                .get(&format!("{PREFIX}{}", field.name))
                .map_or("", |t| t.trim());
            if text.is_empty() {
                continue;
            }
            match typed(&field.input, text) {
                Ok(value) => {
                    out.insert(field.name, value);
                }
                Err(problem) => {
                    problems.insert(field.name, problem);
                }
            }
        }
        Value::Object(out)
    };
    if let Some(schema) = schema {
        check(schema, &params, &mut problems);
    }
    if problems.is_empty() {
        Ok(params)
    } else {
        Err(problems)
    }
}

fn one(field: &str, problem: &str) -> Problems {
    Problems::from([(field.to_owned(), problem.to_owned())])
}

/// A field's text as the value its input stands for.
fn typed(input: &Input, text: &str) -> Result<Value, String> {
    match input {
        Input::Text => Ok(Value::String(text.to_owned())),
        Input::Integer => text
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| "a whole number".to_owned()),
        Input::Number => text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| "a number".to_owned()),
        Input::Boolean => match text {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err("true or false".to_owned()),
        },
        Input::Choice(values) => values
            .iter()
            .find(|v| shown(v) == text)
            .cloned()
            .ok_or_else(|| "one of the listed values".to_owned()),
        Input::Json => serde_json::from_str(text).map_err(|e| not_json(&e)),
    }
}

/// Adds the schema's violations by `params`, each at the field it concerns
/// (a missing required property at its own field).
fn check(schema: &Value, params: &Value, problems: &mut Problems) {
    let Ok(validator) = jsonschema::validator_for(schema) else {
        return;
    };
    for error in validator.iter_errors(params) {
        let path = error.instance_path().to_string();
        let field = match error.kind() {
            ValidationErrorKind::Required { property } => {
                property.as_str().unwrap_or_default().to_owned()
            }
            _ => path
                .trim_start_matches('/')
                .split('/')
                .next()
                .unwrap_or_default()
                .to_owned(),
        };
        let said = in_words(error.kind()).unwrap_or_else(|| error.to_string());
        let message = if field.is_empty() || path.is_empty() || path == format!("/{field}") {
            said
        } else {
            format!("{said} (at {path})")
        };
        problems.entry(field).or_insert(message);
    }
}

/// A JSON syntax error, its position said once.
fn not_json(error: &serde_json::Error) -> String {
    let said = error.to_string();
    let at = format!(" at line {} column {}", error.line(), error.column());
    let what = said.strip_suffix(&at).unwrap_or(&said);
    format!(
        "not JSON: {what}, at line {}, column {}",
        error.line(),
        error.column()
    )
}

/// A schema violation as a person would say it (`None`: keep the
/// validator's own words).
fn in_words(kind: &ValidationErrorKind) -> Option<String> {
    let number = |limit: &Value| limit.to_string();
    Some(match kind {
        ValidationErrorKind::Required { .. } => "required".to_owned(),
        ValidationErrorKind::Type {
            kind: TypeKind::Single(expected),
        } => format!("must be {}", a_type(*expected)),
        ValidationErrorKind::Enum { options } => match options.as_array() {
            Some(values) => format!(
                "must be one of {}",
                values.iter().map(shown).collect::<Vec<_>>().join(", ")
            ),
            None => return None,
        },
        ValidationErrorKind::Constant { expected_value } => {
            format!("must be {}", shown(expected_value))
        }
        ValidationErrorKind::Minimum { limit } => format!("must be at least {}", number(limit)),
        ValidationErrorKind::Maximum { limit } => format!("must be at most {}", number(limit)),
        ValidationErrorKind::ExclusiveMinimum { limit } => {
            format!("must be more than {}", number(limit))
        }
        ValidationErrorKind::ExclusiveMaximum { limit } => {
            format!("must be less than {}", number(limit))
        }
        ValidationErrorKind::MinLength { limit } => {
            format!("must have at least {limit} characters")
        }
        ValidationErrorKind::MaxLength { limit } => format!("must have at most {limit} characters"),
        ValidationErrorKind::MinItems { limit } => format!("must list at least {limit} items"),
        ValidationErrorKind::MaxItems { limit } => format!("must list at most {limit} items"),
        ValidationErrorKind::Pattern { pattern } => format!("must match the pattern {pattern}"),
        ValidationErrorKind::Format { format } => format!("must be a valid {format}"),
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            format!("has no field {}", unexpected.join(", "))
        }
        _ => return None,
    })
}

/// A JSON type as a value of it is called.
fn a_type(kind: JsonType) -> &'static str {
    match kind {
        JsonType::Null => "empty",
        JsonType::Boolean => "true or false",
        JsonType::Integer => "a whole number",
        JsonType::Number => "a number",
        JsonType::String => "text",
        JsonType::Array => "a JSON list",
        JsonType::Object => "a JSON object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "required": ["url", "mode"], "properties": {
            "url": {"type": "string", "description": "What to fetch"},
            "tries": {"type": "integer", "minimum": 1, "default": 3},
            "mode": {"enum": ["fast", "safe"]},
            "dry": {"type": "boolean"},
            "headers": {"type": "object"}
        }})
    }

    fn posted(pairs: &[(&str, &str)]) -> Fields {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn fields_come_typed_with_required_marks_defaults_and_choices() {
        let html = fields(&schema(), None, &Problems::new()).into_string();
        assert!(
            html.contains(r#"name="in.url" value="" aria-required="true""#),
            "{html}"
        );
        assert!(
            html.contains(r#"type="number" step="1" name="in.tries" value="3""#),
            "{html}"
        );
        assert!(
            html.contains(r#"<option value="safe">safe</option>"#),
            "{html}"
        );
        assert!(
            html.contains("What to fetch") && html.matches("required\">*").count() == 2,
            "{html}"
        );
    }

    #[test]
    fn posted_fields_become_typed_params() {
        let form = posted(&[
            ("in.url", "https://x"),
            ("in.tries", "5"),
            ("in.mode", "safe"),
            ("in.dry", "true"),
            ("in.headers", r#"{"a": "b"}"#),
        ]);
        let params = params(Some(&schema()), &form).unwrap();
        assert_eq!(
            params,
            json!({"url": "https://x", "tries": 5, "mode": "safe", "dry": true, "headers": {"a": "b"}})
        );
    }

    #[test]
    fn problems_sit_at_their_fields() {
        let form = posted(&[("in.tries", "0"), ("in.headers", "{oops")]);
        let problems = params(Some(&schema()), &form).unwrap_err();
        assert!(
            problems["headers"].contains("line 1, column 2"),
            "{problems:?}"
        );
        assert!(problems["url"].contains("required"), "{problems:?}");
        assert!(problems["mode"].contains("required"), "{problems:?}");
        let form = posted(&[("in.url", "u"), ("in.mode", "fast"), ("in.tries", "0")]);
        let problems = params(Some(&schema()), &form).unwrap_err();
        assert_eq!(problems["tries"], "must be at least 1", "{problems:?}");
    }

    #[test]
    fn schema_problems_are_in_words_and_positions_said_once() {
        let raw = |text: &str| params(Some(&schema()), &posted(&[("params", text)])).unwrap_err();
        let problems = raw(r#"{"url": 3, "mode": "slow", "tries": 1.5}"#);
        assert_eq!(problems["url"], "must be text");
        assert_eq!(problems["mode"], "must be one of fast, safe");
        assert_eq!(problems["tries"], "must be a whole number");
        let broken = raw("{\n  \"url\" 1}")[""].clone();
        assert_eq!(broken, "not JSON: expected `:`, at line 2, column 9");
        assert_eq!(broken.matches("line").count(), 1, "{broken}");
    }

    #[test]
    fn raw_json_stands_in_for_the_fields_and_says_where_it_breaks() {
        let form = posted(&[
            ("in.url", "ignored"),
            ("params", r#"{"url": "u", "mode": "fast"}"#),
        ]);
        assert_eq!(
            params(Some(&schema()), &form).unwrap(),
            json!({"url": "u", "mode": "fast"})
        );
        let broken = posted(&[("params", "{\n  \"url\": \"u\",\n  oops\n}")]);
        let problems = params(Some(&schema()), &broken).unwrap_err();
        assert!(problems[""].contains("line 3, column 3"), "{problems:?}");
        assert_eq!(params(None, &posted(&[])).unwrap(), json!({}));
    }
}
