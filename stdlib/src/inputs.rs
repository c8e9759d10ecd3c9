//! Run inputs: parsed from the command line, defaults merged, validated against `input_schema`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use opcode_vm::program::Program;
use serde_json::{Map, Value};

/// Validators of input schemas, by the source hash of the program they
/// come from (one per template version): building one costs far more
/// than validating with it.
static VALIDATORS: OnceLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> = OnceLock::new();

/// Programs whose validators are kept at most (then the cache starts over).
const KEPT_VALIDATORS: usize = 512;

/// The validator of `program`'s input schema `schema`, built once per source.
fn validator(program: &Program, schema: &Value) -> Result<Arc<jsonschema::Validator>, String> {
    let build = || {
        jsonschema::validator_for(schema)
            .map(Arc::new)
            .map_err(|e| format!("the input_schema is invalid: {e}"))
    };
    let key = &program.header.source_hash;
    if key.is_empty() {
        return build();
    }
    let cache = VALIDATORS.get_or_init(Mutex::default);
    if let Some(kept) = cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(key)
    {
        return Ok(kept.clone());
    }
    let fresh = build()?;
    let mut kept = cache.lock().unwrap_or_else(PoisonError::into_inner);
    if kept.len() >= KEPT_VALIDATORS {
        kept.clear();
    }
    kept.insert(key.clone(), fresh.clone());
    Ok(fresh)
}

/// The inputs a run starts with: the program's defaults overridden by
/// `given`, checked against the program's `input_schema`. On failure, one
/// message per violation.
pub fn prepare(program: &Program, given: &Value) -> Result<Value, Vec<String>> {
    let mut inputs = match program.run.input_defaults {
        Some(c) => program.consts[c as usize]
            .as_object()
            .cloned()
            .unwrap_or_default(),
        None => Map::new(),
    };
    match given {
        Value::Object(map) => {
            for (k, v) in map {
                inputs.insert(k.clone(), v.clone());
            }
        }
        Value::Null => {}
        other => return Err(vec![format!("inputs must be a JSON object, got {other}")]),
    }
    let inputs = Value::Object(inputs);
    if let Some(c) = program.run.input_schema {
        let schema = &program.consts[c as usize];
        let validator = validator(program, schema).map_err(|e| vec![e])?;
        let errors: Vec<String> = validator
            .iter_errors(&inputs)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("{e} (at {at})")
                }
            })
            .collect();
        if !errors.is_empty() {
            return Err(errors);
        }
    }
    Ok(inputs)
}

/// A command-line value: JSON when it parses as JSON, else the text itself.
pub fn parse_value(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// `KEY=VALUE` arguments of `flag`, split.
pub fn pairs(items: &[String], flag: &str) -> Result<Vec<(String, String)>, String> {
    items
        .iter()
        .map(|item| {
            item.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .ok_or_else(|| format!("{flag} takes KEY=VALUE, got `{item}`"))
        })
        .collect()
}

/// Run inputs from `--inputs JSON` and repeated `--input KEY=VALUE`.
pub fn parse_inputs(json: Option<&str>, pairs_given: &[String]) -> Result<Value, String> {
    let mut inputs = match json {
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err("--inputs must be a JSON object".into()),
            Err(e) => return Err(format!("--inputs is not valid JSON: {e}")),
        },
        None => Map::new(),
    };
    for (k, v) in pairs(pairs_given, "--input")? {
        inputs.insert(k, parse_value(&v));
    }
    Ok(Value::Object(inputs))
}
