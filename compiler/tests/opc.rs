//! `.opc`: every example round-trips JSON → `.opc` → JSON with the same
//! Program hash, its checked-in `.opc` is the converter's output and is
//! formatted, formatting keeps comments and is idempotent, and syntax
//! errors are reported several at a time with their positions.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test helpers may panic

use std::path::PathBuf;

use opcode_compiler::codegen::meaning_hash;
use opcode_compiler::syntax::opc;
use opcode_compiler::{Compiler, Syntax};

fn compiler() -> Compiler {
    Compiler::new().with_actions(opcode_stdlib::catalog())
}

fn hash(src: &str, file: &str) -> String {
    let (program, diagnostics) = compiler().compile(src, file);
    let program = program.unwrap_or_else(|| panic!("{file} does not compile: {diagnostics:?}"));
    meaning_hash(&program)
}

fn examples() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("workflow.json").is_file())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn every_example_round_trips_with_the_same_program_hash() {
    let dirs = examples();
    assert!(dirs.len() >= 45, "{} examples", dirs.len());
    for dir in dirs {
        let name = dir.display().to_string();
        let json = std::fs::read_to_string(dir.join("workflow.json")).unwrap();
        let opc_text = opc::from_json(&json).unwrap();
        let checked_in = std::fs::read_to_string(dir.join("workflow.opc"))
            .unwrap_or_else(|_| panic!("{name} has no workflow.opc (opcodec convert)"));
        assert_eq!(
            opc_text, checked_in,
            "{name}/workflow.opc is stale: run opcodec convert"
        );
        assert_eq!(
            opc::format(&opc_text).unwrap(),
            opc_text,
            "{name}: fmt changes the converter's output"
        );
        let back = serde_json::to_string_pretty(&opc::to_json(&opc_text).unwrap()).unwrap();
        let expected = hash(&json, "workflow.json");
        assert_eq!(hash(&opc_text, "workflow.opc"), expected, "{name}: .opc");
        assert_eq!(
            hash(&back, "workflow.json"),
            expected,
            "{name}: .opc → JSON"
        );
    }
}

const COMMENTED: &str = r#"# A workflow with comments
name: "demo"   # trailing
definition {
  # the first step
  step a crypto.uuid
  step b    workflow.log after a when "true" {
     params { message: "hi" ,level:"info" }  # inline
     # dangling in b
  }
  output: [1,2,
    # in the list
    3]
}
# the end
"#;

#[test]
fn fmt_keeps_comments_and_is_idempotent() {
    let once = opc::format(COMMENTED).unwrap();
    assert_eq!(opc::format(&once).unwrap(), once);
    insta::assert_snapshot!(once);
    for comment in [
        "# A workflow",
        "# trailing",
        "# the first step",
        "# inline",
        "# dangling in b",
        "# in the list",
        "# the end",
    ] {
        assert!(once.contains(comment), "{comment} lost");
    }
    assert_eq!(hash(&once, "x.opc"), hash(COMMENTED, "x.opc"));
}

#[test]
fn syntax_errors_are_reported_together() {
    let src = "definition {\n  step a crypto.uuid {\n    params { x: bare }\n  }\n  oops oops\n  step c workflow.log\n}\n";
    let diagnostics = compiler().check_as(src, Syntax::Opc).into_sorted();
    let found: Vec<(&str, usize)> = diagnostics
        .iter()
        .map(|d| (d.code.id, src[..d.span().start as usize].lines().count()))
        .collect();
    assert_eq!(found, [("E0007", 3), ("E0007", 5)], "{diagnostics:?}");
}

#[test]
fn checks_apply_to_opc_with_positions_in_the_opc_text() {
    let src = "step fetch http.gett {\n  params { url: \"${{inputs.nope}}\" }\n}\n";
    let diagnostics = compiler().check_as(src, Syntax::Opc).into_sorted();
    let first = diagnostics.first().unwrap();
    assert_eq!(first.code.id, "E0040");
    assert_eq!(&src[first.span().range()], "http.gett");
    let both = "steps: []\nstep a crypto.uuid\n";
    let codes: Vec<&str> = compiler()
        .check_as(both, Syntax::Opc)
        .iter()
        .map(|d| d.code.id)
        .collect();
    assert!(codes.contains(&"E0008"), "{codes:?}");
}

/// Found by the `opc_check` fuzz target: an empty `.opc` text reported its
/// missing `steps` one byte past its end.
#[test]
fn an_empty_opc_text_is_told_so_within_itself() {
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    for text in ["", " ", "\n"] {
        let diagnostics = compiler.check_as(text, Syntax::Opc);
        let codes: Vec<_> = diagnostics.iter().map(|d| d.code.id).collect();
        assert_eq!(codes, ["E0011"], "{text:?}");
        for d in diagnostics.iter() {
            for label in &d.labels {
                assert!(label.span.end as usize <= text.len(), "{text:?}: {d:?}");
            }
        }
    }
}

/// Found by the `opc_check` fuzz target: a text ending inside a member
/// (here after a comment) got a backwards span, end before start.
#[test]
fn a_text_ending_too_early_is_told_so_at_its_end() {
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    let text = "iStj#######p";
    let diagnostics = compiler.check_as(text, Syntax::Opc);
    let first = diagnostics.iter().next().expect("a diagnostic");
    assert_eq!(first.code.id, "E0007");
    assert!(
        first.message.starts_with("the file ends; expected"),
        "{}",
        first.message
    );
    let span = first.labels[0].span;
    assert_eq!((span.start, span.end), (12, 12));
}

/// Found by the `opc_check` fuzz target: a CEL syntax error at a
/// non-ASCII character was reported as its first byte alone.
#[test]
fn a_cel_error_at_a_non_ascii_character_covers_the_character() {
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    let text = "step a expr.eval {\n  params { expression: \"1 \u{20d} 2\" }\n}\n";
    let diagnostics = compiler.check_as(text, Syntax::Opc);
    let cel = diagnostics
        .iter()
        .find(|d| d.code.id == "E0030")
        .unwrap_or_else(|| {
            panic!(
                "{:?}",
                diagnostics.iter().map(|d| &d.message).collect::<Vec<_>>()
            )
        });
    for label in &cel.labels {
        let (start, end) = (label.span.start as usize, label.span.end as usize);
        assert!(
            text.is_char_boundary(start) && text.is_char_boundary(end),
            "{cel:?}"
        );
    }
}
