//! The mistakes agents make most when they write a workflow, one per file
//! in `tests/mistakes/` (`CODE-what-was-done.json`): each is caught with
//! its code, and at least 80% carry a fix that an agent can apply as it
//! would over MCP — the RFC 6902 patch, applied by the `json-patch` crate
//! to the document as sent — after which the code is gone and no new error
//! has come in, and the fix's text edits give the same document. The
//! files are realistic workflows, not the error pages'
//! minimal examples.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test helpers may panic
use std::path::Path;

use opcode_compiler::Compiler;
use opcode_compiler::diagnostics::{Diagnostic, Severity};

/// The share of the corpus that must carry a fix that works, in percent.
const FIXED_AT_LEAST: usize = 80;

fn compiler() -> Compiler {
    Compiler::new().with_actions(opcode_stdlib::catalog())
}

fn count(diagnostics: &[Diagnostic], code: &str) -> usize {
    diagnostics.iter().filter(|d| d.code.id == code).count()
}

#[test]
fn agents_mistakes_are_caught_and_most_carry_a_fix_that_applies() {
    let compiler = compiler();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mistakes");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 30, "the corpus shrank: {}", files.len());
    let mut unfixed = Vec::new();
    for path in &files {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let code = &name[..5];
        let text = std::fs::read_to_string(path).unwrap();
        let before = compiler.check(&text).into_sorted();
        let codes: Vec<&str> = before.iter().map(|d| d.code.id).collect();
        let Some(caught) = before.iter().find(|d| d.code.id == code) else {
            panic!("{name}: {code} is not reported; got {codes:?}");
        };
        let Some(fix) = &caught.fix else {
            unfixed.push(name);
            continue;
        };
        let mut document: serde_json::Value = serde_json::from_str(&text).unwrap();
        let patch: json_patch::Patch =
            serde_json::from_value(serde_json::to_value(&fix.patch).unwrap()).unwrap();
        json_patch::patch(&mut document, &patch)
            .unwrap_or_else(|e| panic!("{name}: the patch does not apply ({e}): {patch:?}"));
        // `opcodec fix` and editors apply the text edits: the same result.
        let (edited, _) = opcode_compiler::diagnostics::apply_fixes(&text, [caught]);
        let edited: serde_json::Value = serde_json::from_str(&edited)
            .unwrap_or_else(|e| panic!("{name}: the fix's text is not JSON ({e}):\n{edited}"));
        assert_eq!(document, edited, "{name}: the patch and the edits differ");
        let after = compiler.check(&document.to_string()).into_sorted();
        assert!(
            count(&after, code) < count(&before, code),
            "{name}: {code} stays after its fix ({}): {document:#}",
            fix.message
        );
        let new_errors: Vec<&str> = after
            .iter()
            .filter(|d| d.severity == Severity::Error && !codes.contains(&d.code.id))
            .map(|d| d.code.id)
            .collect();
        assert!(
            new_errors.is_empty(),
            "{name}: its fix ({}) brings in {new_errors:?}: {document:#}",
            fix.message
        );
    }
    let fixed = files.len() - unfixed.len();
    eprintln!(
        "{fixed} of {} mistakes carry a fix that applies; without one: {unfixed:?}",
        files.len()
    );
    assert!(
        fixed * 100 >= FIXED_AT_LEAST * files.len(),
        "only {fixed} of {} mistakes carry a fix that applies; without one: {unfixed:?}",
        files.len()
    );
}
