//! `assert.equals`, `assert.contains`, `assert.matches`, `assert.schema`.

use opcode_vm::catalog::{ActionSpec, Ty};

use super::spec::action;

fn pass() -> Ty {
    Ty::object([("pass", Ty::Bool)])
}

/// Signatures.
pub fn specs() -> Vec<ActionSpec> {
    vec![
        action("assert.equals", "Fails unless `actual` deeply equals `expected` (numbers compare by value; no string/number coercion).")
            .req("expected", Ty::Any, "the expected value")
            .req("actual", Ty::Any, "the value to check")
            .opt("message", Ty::String, "failure message")
            .output(pass()),
        action("assert.contains", "Fails unless the string `haystack` contains `needle`, or the array `haystack` has an element equal to it.")
            .req("haystack", Ty::OneOf { types: vec![Ty::String, Ty::array(Ty::Any)] }, "string or array")
            .req("needle", Ty::Any, "substring or element")
            .opt("message", Ty::String, "failure message")
            .output(pass()),
        action("assert.matches", "Fails unless `value` matches the regular expression `pattern`; returns the first match.")
            .req("value", Ty::String, "the text")
            .req("pattern", Ty::String, "a regular expression")
            .opt("message", Ty::String, "failure message")
            .output(Ty::object([("pass", Ty::Bool), ("matches", Ty::String)])),
        action("assert.schema", "Fails unless `data` is valid against the JSON Schema `schema`.")
            .req("data", Ty::Any, "the value to validate")
            .req("schema", Ty::map(Ty::Any), "a JSON Schema (draft 2020-12)")
            .opt("message", Ty::String, "failure message")
            .output(pass()),
    ]
}
