//! `json.jq`.

use opcode_vm::catalog::{ActionSpec, Ty};

use super::spec::action;

/// Signatures.
pub fn specs() -> Vec<ActionSpec> {
    vec![
        action("json.jq", "Runs a jq filter over `data`. `result` is the first output (null when none), `results` all of them.")
            .req("filter", Ty::String, "a jq filter")
            .opt("data", Ty::Any, "the input value (default null)")
            .output(Ty::object([("result", Ty::Any), ("results", Ty::array(Ty::Any))])),
    ]
}
