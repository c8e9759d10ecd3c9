//! `.opc` print/parse round trip. For any input that parses as `.opc`:
//! formatting never panics and is idempotent, and the formatted text means
//! the same JSON. For any input that is a JSON object: its `.opc` form
//! parses back to the same JSON value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use opcode_compiler::syntax::opc;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(once) = opc::format(text) {
        let twice = opc::format(&once).expect("formatted text parses");
        assert_eq!(once, twice, "fmt is idempotent");
        if let (Ok(a), Ok(b)) = (opc::to_json(text), opc::to_json(&once)) {
            assert_eq!(a, b, "fmt keeps the meaning");
        }
    }
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(text)
        && value.is_object()
        && let Ok(printed) = opc::from_json(text)
    {
        let back = opc::to_json(&printed).expect("printed .opc parses");
        assert_eq!(back, value, "JSON → .opc → JSON");
    }
});
