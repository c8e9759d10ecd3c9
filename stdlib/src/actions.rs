//! The built-in actions, one module per family.
//!
//! Each module declares its actions' signatures (`specs`), with opcode's
//! parameter names and output shapes (reference §5).

pub mod agent;
pub mod assert;
pub mod crypto;
pub mod expr;
pub mod fs;
pub mod http;
pub mod json;
#[cfg(feature = "runtime")]
pub(crate) mod map;
pub mod shell;
mod spec;
pub mod workflow;

use opcode_vm::catalog::ActionSpec;

/// Every built-in action's signature.
pub fn specs() -> Vec<ActionSpec> {
    let mut all = Vec::new();
    all.extend(http::specs());
    all.extend(fs::specs());
    all.extend(shell::specs());
    all.extend(crypto::specs());
    all.extend(assert::specs());
    all.extend(expr::specs());
    all.extend(json::specs());
    all.extend(workflow::specs());
    all.extend(agent::specs());
    all
}

/// The error for an action name the family does not have.
#[cfg(feature = "runtime")]
fn unknown(call: &crate::call::Call) -> opcode_vm::error::ActionError {
    opcode_vm::error::ActionError::new(
        opcode_vm::codes::R0107,
        "ACTION_UNAVAILABLE",
        format!("action `{}` is not available", call.action),
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn has_opcode_actions_plus_json_jq() {
        let names: Vec<String> = specs().into_iter().map(|s| s.name).collect();
        assert_eq!(names.len(), 31, "{names:?}");
        for name in [
            "http.request",
            "fs.move",
            "shell.exec",
            "assert.schema",
            "expr.eval",
            "json.jq",
            "workflow.notify",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} missing");
        }
    }
}
