//! Every example draws in all four formats, and the PNGs show their
//! labels (a drawing differs clearly from the same drawing without text).
#![allow(clippy::expect_used, clippy::unwrap_used)] // test helpers may panic

use std::path::PathBuf;

use opcode_compiler::Compiler;
use opcode_compiler::diagram::{self, png, svg};
use resvg::usvg::fontdb;

fn fonts() -> fontdb::Database {
    let mut db = fontdb::Database::new();
    db.load_system_fonts();
    db
}

/// The RGBA pixels of a PNG.
fn pixels(png: &[u8]) -> Vec<u8> {
    resvg::tiny_skia::Pixmap::decode_png(png)
        .unwrap()
        .data()
        .to_vec()
}

#[test]
fn every_example_draws_in_every_format_and_pngs_show_their_labels() {
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let db = fonts();
    let mut count = 0;
    for entry in std::fs::read_dir(root).unwrap() {
        let dir = entry.unwrap().path();
        let Ok(src) = std::fs::read_to_string(dir.join("workflow.json")) else {
            continue;
        };
        let name = dir.display().to_string();
        let (program, _) = compiler.compile(&src, "workflow.json");
        let program = program.unwrap_or_else(|| panic!("{name} compiles"));
        assert!(
            diagram::ascii(&program, None).lines().count() > 1,
            "{name}: ascii"
        );
        assert!(
            diagram::mermaid(&program, None).starts_with("flowchart TD"),
            "{name}: mermaid"
        );
        let drawing = svg::svg(&program, None);
        for step in &program.steps {
            assert!(
                drawing.contains(&format!(">{} (", step.id)),
                "{name}: {} is not drawn",
                step.id
            );
        }
        let with_text = png::png(&drawing, db.clone(), 1.0).unwrap();
        let without_text = {
            let stripped: String = drawing
                .lines()
                .filter_map(|l| match (l.contains("<text"), l.ends_with("</g>")) {
                    (true, true) => Some("</g>"),
                    (true, false) => None,
                    _ => Some(l),
                })
                .collect::<Vec<_>>()
                .join("\n");
            png::png(&stripped, db.clone(), 1.0).unwrap()
        };
        let (a, b) = (pixels(&with_text), pixels(&without_text));
        assert_eq!(a.len(), b.len(), "{name}: same size");
        let changed = a.chunks(4).zip(b.chunks(4)).filter(|(x, y)| x != y).count();
        let labels: usize = program.steps.iter().map(|s| s.id.len()).sum();
        assert!(
            changed > labels * 10,
            "{name}: only {changed} pixels of text for {labels} label characters"
        );
        count += 1;
    }
    assert!(count >= 45, "{count} examples drawn");
}
