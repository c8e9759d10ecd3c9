//! The compiler's code registry: every `E…` and `W…` code, one line each.
//!
//! Adding a code: add a line here and a page `spec/errors/<CODE>.md` (see
//! CONTRIBUTING.md). A test checks that the registry and the pages match.

use opcode_vm::{Code, code_registry};

code_registry! { ALL, "../../../spec/errors/";
    /// The file is not well-formed JSON.
    E0001 = "invalid-json",
    /// The file is not valid UTF-8.
    E0002 = "invalid-utf8",
    /// Arrays and objects are nested deeper than the reader allows.
    E0003 = "nesting-too-deep",
    /// A number cannot be represented.
    E0004 = "number-out-of-range",
    /// An object has the same key twice.
    E0005 = "duplicate-key",
    /// The file is larger than a workflow may be.
    E0006 = "file-too-large",
    /// An `.opc` file does not follow the grammar.
    E0007 = "invalid-opc",
    /// An `.opc` block has both a `steps` list and `step` declarations.
    E0008 = "steps-given-twice",
    /// A field has the wrong JSON type.
    E0010 = "wrong-type",
    /// A required field is missing.
    E0011 = "missing-field",
    /// A list of steps is empty.
    E0012 = "empty-steps",
    /// A step has an unknown `type`.
    E0013 = "unknown-step-type",
    /// A field holds a value outside its allowed set.
    E0014 = "invalid-value",
    /// A duration string cannot be parsed.
    E0015 = "invalid-duration",
    /// A step id is empty or uses characters that references cannot spell.
    E0016 = "invalid-step-id",
    /// A count is negative or not an integer.
    E0017 = "invalid-count",
    /// Two steps share an id.
    E0020 = "duplicate-step-id",
    /// `depends_on` names a step that does not exist.
    E0021 = "unknown-dependency",
    /// A step depends on itself.
    E0022 = "self-dependency",
    /// `depends_on` names a step outside the step's own list.
    E0023 = "dependency-outside-block",
    /// Dependencies form a cycle.
    E0024 = "dependency-cycle",
    /// `depends_on` names a step that only runs as a fallback.
    E0025 = "depends-on-fallback",
    /// A CEL expression does not parse.
    E0030 = "invalid-cel",
    /// A jq filter does not parse.
    E0031 = "invalid-jq",
    /// A `${{…}}` token is malformed.
    E0032 = "invalid-interpolation",
    /// A reference starts with an unknown namespace.
    E0033 = "unknown-namespace",
    /// A reference names a step that does not exist.
    E0034 = "unknown-step-reference",
    /// A reference names a step that may not have finished at that point.
    E0035 = "step-not-guaranteed",
    /// `loop.*` or `iter` is used outside a loop body.
    E0036 = "loop-outside-loop",
    /// A reference path is malformed for its namespace.
    E0037 = "invalid-reference-path",
    /// A step uses an action that does not exist.
    E0040 = "unknown-action",
    /// A required action parameter is missing.
    E0041 = "missing-param",
    /// An action parameter has the wrong type.
    E0042 = "param-type",
    /// `fallback_step` names a step that does not exist.
    E0043 = "unknown-fallback-step",
    /// The `fallback_step` strategy is used without naming a step.
    E0044 = "missing-fallback-step",
    /// A reasoning `fallback` is not one of its options.
    E0045 = "invalid-fallback-option",
    /// An `expr.eval` whose `language` is `cel` is written in Expr.
    E0048 = "expr-syntax",
    /// An equality assertion compares values that can never be equal.
    E0049 = "never-equal",
    /// A step is the fallback of more than one step.
    E0050 = "fallback-reused",
    /// Two reasoning options share an id.
    E0051 = "duplicate-option",
    /// A step's `isolation` block asks for more than the daemon's settings allow.
    E0052 = "isolation-widened",
    /// An expression, filter or pattern is too large or nested too deep.
    E0053 = "expression-too-complex",
    /// An Expr expression does not parse, or calls or reads what Expr does not have.
    E0054 = "invalid-expr",
    /// A workflow test file names a step, an action or a workflow that does not exist.
    E0055 = "test-unknown-name",
    /// A workflow test file mocks an output its action never gives.
    E0056 = "test-output-mismatch",
    /// A delegated agent's budget cannot be met.
    E0057 = "agent-budget",
    /// A template starts itself on every run.
    E0058 = "runs-itself",
    /// The compiler failed inside (a bug in opcode), at this place.
    E0059 = "internal-error",
    /// A condition's expression gives a boolean, and a branch is not named `true` or `false`.
    E0060 = "branch-never-taken",
    /// A reasoning step's `choice` is compared with text that is none of its options.
    E0061 = "not-an-option",
    /// `${{…}}` in a field that is never interpolated.
    E0062 = "never-interpolated",
    /// A concurrency key reads what is not known when a run starts.
    E0063 = "concurrency-key",
    /// A field of an agent definition is unknown or malformed.
    E0064 = "agent-definition",
    /// An agent's version is not a semantic version.
    E0065 = "not-semver",
    /// A skill's path leaves the agent definition's folder.
    E0066 = "skill-outside-folder",
    /// An agent's version is published already, with other content.
    E0067 = "version-published",
    /// No published agent has this name or version.
    E0068 = "unknown-agent",
    /// An agent names an MCP server the settings do not allow.
    E0069 = "mcp-server-not-allowed",
    /// A step names a published agent whose role is not the step's action.
    E0070 = "agent-role-mismatch",
    /// An agent's eval suite has an unknown or malformed field.
    E0071 = "eval-suite",
    /// A field the language does not know is ignored.
    W0001 = "unknown-field",
    /// An action parameter the action does not know is ignored.
    W0002 = "unknown-param",
    /// A `while`/`until` loop has no `max_iter` bound.
    W0003 = "unbounded-loop",
    /// An input is used but not declared in `input_schema`.
    W0004 = "undeclared-input",
    /// A step is referenced by opcode's namespaced id.
    W0005 = "namespaced-step-reference",
    /// A retry policy retries more than ten times.
    W0006 = "excessive-retries",
    /// `depends_on` lists the same step twice.
    W0007 = "duplicate-dependency",
    /// A `data_inject` value is not a reference and is injected as text.
    W0008 = "literal-data-inject",
    /// A fallback step's own `depends_on` is ignored.
    W0009 = "fallback-dependencies",
    /// A reasoning step has no `prompt_context`.
    W0011 = "missing-prompt",
    /// A parameter's whole text is a reference without `${{…}}`: it is sent as text.
    W0012 = "literal-reference",
}

/// Finds a compiler or run-time code by its id (case-insensitive).
pub fn lookup(id: &str) -> Option<Code> {
    ALL.iter()
        .copied()
        .find(|code| code.id.eq_ignore_ascii_case(id))
        .or_else(|| opcode_vm::codes::lookup(id))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn codes_are_unique_and_named() {
        let mut ids = BTreeSet::new();
        let mut names = BTreeSet::new();
        for code in ALL.iter().chain(opcode_vm::codes::RUNTIME) {
            assert!(ids.insert(code.id), "duplicate code {}", code.id);
            assert!(names.insert(code.name), "duplicate name {}", code.name);
            assert!(
                code.doc.starts_with(&format!("# {}: ", code.id)),
                "{} page must start with `# {}: <summary>`",
                code.id,
                code.id
            );
            for section in ["## What it means", "## Example", "## How to fix"] {
                assert!(
                    code.doc.contains(section),
                    "{} page lacks {section}",
                    code.id
                );
            }
        }
    }

    #[test]
    fn every_page_has_a_registry_entry() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/errors");
        #[allow(clippy::disallowed_methods)] // test code reads the spec folder
        let entries = std::fs::read_dir(dir).expect("spec/errors exists");
        for entry in entries {
            let name = entry.expect("readable").file_name();
            let name = name.to_string_lossy();
            if let Some(id) = name.strip_suffix(".md") {
                if id == "README" {
                    continue;
                }
                assert!(
                    lookup(id).is_some(),
                    "spec/errors/{name} has no registry entry"
                );
            }
        }
    }
}
