//! The README's workflows stay true: every JSON block in it that carries a
//! `definition` (as `opcode.define` takes it) compiles without a diagnostic.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test code may panic

use opcode_compiler::Compiler;

/// The JSON code blocks of `markdown`, their indentation removed.
fn json_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match &mut open {
            None if trimmed == "```json" => open = Some((indent, String::new())),
            Some((_, text)) if trimmed == "```" => {
                blocks.push(std::mem::take(text));
                open = None;
            }
            Some((indent, text)) => {
                text.push_str(line.get(*indent..).unwrap_or(trimmed));
                text.push('\n');
            }
            None => {}
        }
    }
    blocks
}

#[test]
fn the_readmes_workflows_compile() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    let mut checked = 0;
    for block in json_blocks(&readme) {
        let value: serde_json::Value = serde_json::from_str(&block)
            .unwrap_or_else(|e| panic!("a README JSON block does not parse ({e}):\n{block}"));
        let Some(definition) = value.get("definition") else {
            continue;
        };
        let diagnostics = compiler.check(&definition.to_string());
        let said: Vec<String> = diagnostics.iter().map(|d| d.message.clone()).collect();
        assert!(diagnostics.is_empty(), "{said:?} in:\n{block}");
        checked += 1;
    }
    assert!(checked > 0, "the README shows no workflow");
}
