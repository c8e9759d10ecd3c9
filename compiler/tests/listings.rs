//! Golden listings: each input under `tests/listings/` compiles, and its
//! Program listing (every table, every instruction) is snapshotted with
//! the source. Together the inputs use every instruction.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test code may panic

use std::collections::BTreeSet;

use opcode_compiler::Compiler;
use opcode_vm::{Instr, listing};

#[test]
fn listings() {
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/listings");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut seen = BTreeSet::new();
    for path in files {
        let source = std::fs::read_to_string(&path).unwrap();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let (program, diagnostics) = compiler.compile(&source, &format!("{name}.json"));
        let program = program
            .unwrap_or_else(|| panic!("{name} does not compile: {:?}", diagnostics.iter().next()));
        for instr in &program.code {
            let op = serde_json::to_value(instr).unwrap()["op"]
                .as_str()
                .unwrap()
                .to_owned();
            seen.insert(op);
        }
        // Round-trip through bytes: the loaded Program lists the same.
        let loaded = opcode_vm::Program::from_bytes(&program.to_bytes()).unwrap();
        assert_eq!(
            loaded, program,
            "{name}: the Program does not survive serialization"
        );
        insta::assert_snapshot!(
            name,
            format!(
                "--- SOURCE\n{source}\n--- PROGRAM\n{}",
                listing::listing(&program)
            )
        );
    }
    let all: BTreeSet<String> = [
        Instr::Guard { expr: 0 },
        Instr::Call {
            action: String::new(),
            params: 0,
            scope: None,
        },
        Instr::Branch { expr: 0, table: 0 },
        Instr::ForEach {
            over: 0,
            body: 0,
            max_iter: None,
        },
        Instr::Repeat {
            mode: opcode_vm::policy::LoopMode::While,
            cond: 0,
            body: 0,
            max_iter: None,
        },
        Instr::Fork {
            branches: vec![],
            mode: opcode_vm::policy::ParallelMode::All,
            max_concurrency: None,
        },
        Instr::Sleep { ms: 0 },
        Instr::AwaitSignal {
            name: String::new(),
            timeout_ms: None,
        },
        Instr::Decide { decision: 0 },
    ]
    .iter()
    .map(|i| {
        serde_json::to_value(i).unwrap()["op"]
            .as_str()
            .unwrap()
            .to_owned()
    })
    .collect();
    assert_eq!(seen, all, "the golden inputs must use every instruction");
}
