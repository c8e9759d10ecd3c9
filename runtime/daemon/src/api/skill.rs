//! The agent skill (`editors/skill/opcode/`) and the two prompts built on
//! it (spec/mcp.md, "Prompts"): `write-workflow` serves the skill's guide
//! with the live action catalog; `fix-workflow` a definition's diagnostics
//! to repair.

use std::fmt::Write as _;

use opcode_vm::catalog::ActionSpec;
use serde_json::Value;

use super::Api;

/// The skill's `SKILL.md`, frontmatter included.
pub const SKILL_MD: &str = include_str!("../../../../editors/skill/opcode/SKILL.md");

/// The skill's action reference: [`actions_reference`] of the standard
/// library, as committed.
pub const ACTIONS_MD: &str = include_str!("../../../../editors/skill/opcode/references/actions.md");

/// Where the skill's files are resources (SEP-2640's `skill://` scheme):
/// this and their path.
pub const URI: &str = "skill://opcode/";

/// The skill's files, by path inside the skill.
pub const FILES: [(&str, &str); 2] = [
    ("SKILL.md", SKILL_MD),
    ("references/actions.md", ACTIONS_MD),
];

/// The skill's `name` and `description` (its frontmatter).
pub fn frontmatter() -> (&'static str, &'static str) {
    let field = |key: &str| {
        SKILL_MD
            .lines()
            .take_while(|l| !l.is_empty())
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(": "))
            .unwrap_or_default()
    };
    (field("name"), field("description"))
}

/// `SKILL.md` without its frontmatter.
pub fn guide() -> &'static str {
    SKILL_MD
        .strip_prefix("---\n")
        .and_then(|rest| rest.split_once("\n---\n"))
        .map_or(SKILL_MD, |(_, body)| body.trim_start())
}

/// Every action of `actions` as Markdown: signature, documentation, a
/// table of parameters and the output's shape.
pub fn actions_reference<'a>(actions: impl Iterator<Item = &'a ActionSpec>) -> String {
    let cell = |text: &str| text.replace('|', "\\|").replace('\n', " ");
    let mut out = String::from(
        "# Actions\n\nEvery action of the standard library: its signature (`?` marks an \
         optional parameter), what it does, its parameters and its output. Generated from the \
         catalog (the drift test in runtime/daemon/tests/skill.rs rewrites it with \
         `OPCODE_BLESS=1`); the `opcode://actions` resource lists plugins' actions too.\n",
    );
    for action in actions {
        let _ = write!(
            out,
            "\n## `{}`\n\n`{}`\n\n{}\n",
            action.name,
            cell(&action.signature()),
            action.doc
        );
        if !action.params.is_empty() {
            out.push_str("\n| parameter | type | required | meaning |\n|---|---|---|---|\n");
            for p in &action.params {
                let _ = writeln!(
                    out,
                    "| `{}` | {} | {} | {} |",
                    p.name,
                    cell(&p.ty.shape()),
                    if p.required { "yes" } else { "no" },
                    cell(&p.doc)
                );
            }
        }
        if action.open_params {
            out.push_str("\nOther parameters are accepted too.\n");
        }
        let _ = writeln!(out, "\nOutput: {}", cell(&action.output.shape()));
    }
    out
}

impl Api {
    /// The `write-workflow` prompt: the guide, the actions this daemon
    /// offers (plugins' included), and the `goal` when one is given.
    pub fn write_workflow_prompt(&self, goal: Option<&str>) -> String {
        let compiler = self.exec.compiler();
        let mut text = format!(
            "{}\n\n{}",
            guide(),
            actions_reference(compiler.catalog().iter())
        );
        if let Some(goal) = goal.filter(|g| !g.trim().is_empty()) {
            let _ = write!(
                text,
                "\n\n# The workflow to write\n\n{goal}\n\nWrite it as an opcode workflow, \
                 check it with opcode.define, and fix what the diagnostics name."
            );
        }
        text
    }

    /// The `fix-workflow` prompt: `definition` (JSON or `.opc` text) with
    /// what the compiler says of it.
    pub fn fix_workflow_prompt(&self, definition: &str) -> String {
        let opc = !definition.trim_start().starts_with('{');
        let (file, fence) = if opc {
            ("workflow.opc", "opc")
        } else {
            ("workflow.json", "json")
        };
        let verdict = match super::check_text(self, definition, file) {
            Ok(diagnostics) if diagnostics.as_array().is_none_or(Vec::is_empty) => {
                return format!(
                    "This opcode workflow compiles without diagnostics:\n\n```{fence}\n{definition}\n```\n\n\
                     If it does not do what it should, say what it should do instead."
                );
            }
            Ok(warnings) => (
                "This opcode workflow compiles, with warnings. Fix each one (apply its `fix` \
                 where it has one) unless it is intended",
                warnings,
            ),
            Err(error) => (
                "This opcode workflow does not compile. Fix every error (apply its `fix` where \
                 it has one) and keep what the workflow is meant to do",
                error
                    .details
                    .and_then(|d| d.get("diagnostics").cloned())
                    .unwrap_or(Value::Null),
            ),
        };
        let (ask, diagnostics) = verdict;
        let diagnostics = serde_json::to_string_pretty(&diagnostics).unwrap_or_default();
        format!(
            "{ask}; then call opcode.define with the corrected definition. Each diagnostic names \
             its code (explained at spec/errors/CODE.md and in the language reference, resource \
             opcode://docs/language), a JSON pointer, a line and a column.\n\n\
             Diagnostics:\n\n```json\n{diagnostics}\n```\n\nThe definition:\n\n```{fence}\n{definition}\n```"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frontmatter_and_the_guide_split_at_the_rule() {
        let (name, description) = frontmatter();
        assert_eq!(name, "opcode");
        assert!(description.starts_with("Define a workflow once"));
        assert!(guide().starts_with("# opcode"));
    }
}
