//! `.opc` text as an editor sends it while it is typed: the parser recovers
//! from any error, and checking (what `opcodec check` and the language
//! server run) never panics; every diagnostic lies inside the text, on
//! character boundaries, and renders.
#![no_main]

use libfuzzer_sys::fuzz_target;
use opcode_compiler::diagnostics::Diagnostics;
use opcode_compiler::diagnostics::render::{human, json};
use opcode_compiler::syntax::opc;
use opcode_compiler::{Compiler, Syntax};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut sink = Diagnostics::new();
    let _ = opc::parse_tree(text, &mut sink);
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    let checked = compiler.check_as(text, Syntax::Opc);
    for diagnostic in sink.iter().chain(checked.iter()) {
        for label in &diagnostic.labels {
            let (start, end) = (label.span.start as usize, label.span.end as usize);
            assert!(start <= end && end <= text.len(), "{diagnostic:?} outside the text");
            assert!(
                text.is_char_boundary(start) && text.is_char_boundary(end),
                "{diagnostic:?} splits a character"
            );
        }
    }
    let sorted = checked.into_sorted();
    let _ = human::render(&sorted, "fuzz.opc", text, false);
    let _ = json::to_json_array(&sorted, "fuzz.opc", text);
});
