//! jq filters (the `json.jq` action), run with jaq.

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, Vars, data::JustLut, unwrap_valr};
use jaq_json::Val;
use serde_json::Value;

/// Runs `filter` on `input`; every output, or the first error.
pub fn run(filter: &str, input: &Value) -> Result<Vec<Value>, String> {
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
        .map_err(|_| format!("invalid jq filter `{filter}`"))?;
    let funs = jaq_core::funs()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs());
    let compiled = Compiler::<_, JustLut<Val>>::default()
        .with_funs(funs)
        .compile(modules)
        .map_err(|_| format!("invalid jq filter `{filter}`"))?;
    let input: Val = serde_json::from_value(input.clone()).map_err(|e| e.to_string())?;
    let ctx = Ctx::<JustLut<Val>>::new(&compiled.lut, Vars::new([]));
    let mut out = Vec::new();
    for result in compiled.id.run((ctx, input)).map(unwrap_valr) {
        let val = result.map_err(|e| format!("jq: {e}"))?;
        out.push(
            serde_json::from_str(&val.to_string())
                .map_err(|e| format!("jq produced a value JSON cannot hold: {e}"))?,
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
            run("[.users[] | select(.on) | .name] | sort", &data).unwrap(),
            vec![json!(["a", "b"])]
        );
        assert_eq!(
            run(".[]", &json!([1, 2])).unwrap(),
            vec![json!(1), json!(2)]
        );
        assert!(run(".a | error(\"boom\")", &json!({"a": 1})).is_err());
    }
}
