//! The JSON reader never panics, and every span it reports is inside the input
//! on character boundaries.
#![no_main]

use libfuzzer_sys::fuzz_target;
use opcode_compiler::diagnostics::Diagnostics;
use opcode_compiler::syntax::json;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut sink = Diagnostics::new();
    let node = json::parse(text, &mut sink);
    assert!(node.is_some() || sink.has_errors());
    for d in sink.iter() {
        let span = d.span();
        assert!(span.end as usize <= text.len());
        assert!(text.is_char_boundary(span.start as usize));
    }
});
