//! `expr.eval`.

use opcode_vm::catalog::{ActionSpec, Ty};

use super::spec::action;

/// Signatures.
pub fn specs() -> Vec<ActionSpec> {
    vec![
        action("expr.eval", "Evaluates a CEL expression with the workflow's variables (`steps`, `inputs`, `workflow`, `context`, `iter`) and `data`.")
            .req("expression", Ty::String, "a CEL expression")
            .opt("data", Ty::Any, "extra value, visible as `data`")
            .output(Ty::object([("result", Ty::Any)])),
    ]
}
