//! jq filters (the `json.jq` action), run with jaq. A filter may never
//! end, recurse without bound or fill the memory, and jaq cannot be
//! interrupted, so the daemon runs each evaluation in a process of its own
//! ([`crate::evaluator`]): a timeout or a cancel kills it, and a filter that
//! overflows its stack or its memory ends that process, not the daemon.

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, Vars, data::JustLut, unwrap_valr};
use jaq_json::Val;
use serde_json::Value;

/// Why a jq evaluation gave no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The filter does not compile, or raised an error.
    Error(String),
    /// It gave more than this many outputs.
    TooManyOutputs(u64),
}

/// Runs `filter` on `input`; every output (at most `max_outputs`), or the
/// first error.
pub fn run(filter: &str, input: &Value, max_outputs: u64) -> Result<Vec<Value>, Failure> {
    let error = |e: String| Failure::Error(e);
    opcode_vm::limits::check_jq(filter).map_err(|limit| error(format!("the filter {limit}")))?;
    let arena = Arena::default();
    let defs = jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs());
    let loader = Loader::new(defs);
    let modules = loader
        .load(
            &arena,
            File {
                code: filter,
                path: (),
            },
        )
        .map_err(|_| error(format!("invalid jq filter `{filter}`")))?;
    let funs = jaq_core::funs()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs());
    let compiled = Compiler::<_, JustLut<Val>>::default()
        .with_funs(funs)
        .compile(modules)
        .map_err(|_| error(format!("invalid jq filter `{filter}`")))?;
    let input: Val = serde_json::from_value(input.clone()).map_err(|e| error(e.to_string()))?;
    let ctx = Ctx::<JustLut<Val>>::new(&compiled.lut, Vars::new([]));
    let mut out = Vec::new();
    for result in compiled.id.run((ctx, input)).map(unwrap_valr) {
        if out.len() as u64 >= max_outputs {
            return Err(Failure::TooManyOutputs(max_outputs));
        }
        let val = result.map_err(|e| error(format!("jq: {e}")))?;
        out.push(
            serde_json::from_str(&val.to_string())
                .map_err(|e| error(format!("jq produced a value JSON cannot hold: {e}")))?,
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn runs_filters() {
        let data = json!({"users": [{"name": "b", "on": true}, {"name": "a", "on": true}, {"name": "c", "on": false}]});
        assert_eq!(
            run("[.users[] | select(.on) | .name] | sort", &data, 10).unwrap(),
            vec![json!(["a", "b"])]
        );
        assert_eq!(
            run(".[]", &json!([1, 2]), 10).unwrap(),
            vec![json!(1), json!(2)]
        );
        assert!(run(".a | error(\"boom\")", &json!({"a": 1}), 10).is_err());
        assert_eq!(
            run("repeat(.)", &json!(1), 100),
            Err(Failure::TooManyOutputs(100))
        );
    }
}
