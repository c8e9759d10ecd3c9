//! The built-in actions, one module per family.
//!
//! Each module declares its actions' signatures (`specs`), with opcode's
//! parameter names and output shapes (reference §5).

mod assert;
mod crypto;
mod expr;
mod fs;
mod http;
mod json;
mod shell;
mod spec;
mod workflow;

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
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn has_opcode_actions_plus_json_jq() {
        let names: Vec<String> = specs().into_iter().map(|s| s.name).collect();
        assert_eq!(names.len(), 27, "{names:?}");
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
