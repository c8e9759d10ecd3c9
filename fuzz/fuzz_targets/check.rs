//! `check` never panics on any input, and rendering its diagnostics (human and
//! JSON) never panics either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use opcode_compiler::diagnostics::render::{human, json};
use opcode_compiler::{Compiler, decode_utf8};

fuzz_target!(|data: &[u8]| {
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    match decode_utf8(data) {
        Ok(text) => {
            let diagnostics = compiler.check(text).into_sorted();
            let _ = human::render(&diagnostics, "fuzz.json", text, false);
            let _ = json::to_json_array(&diagnostics, "fuzz.json", text);
        }
        Err(diagnostic) => {
            let text = String::from_utf8_lossy(data);
            let _ = human::render([&diagnostic], "fuzz.json", &text, false);
        }
    }
});
