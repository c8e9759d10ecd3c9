//! The compiler checks CEL function names against the engine the runtime
//! evaluates with: its copy of that engine's environment must stay the same
//! as the runtime's (`opcode_stdlib::cel::env`).

use opcode_compiler::check::cel_functions::{
    MACROS, OTHER_SPELLINGS, SUGGESTIONS, UNAVAILABLE, env, known_in,
};

#[test]
fn the_compiler_knows_the_functions_the_runtime_has() {
    let ours = std::sync::Arc::new(env());
    let runtime = opcode_stdlib::cel::env();
    let names = SUGGESTIONS
        .iter()
        .chain(MACROS)
        .chain(UNAVAILABLE)
        .copied()
        .chain(
            OTHER_SPELLINGS
                .iter()
                .flat_map(|(theirs, ours, _)| [*theirs, *ours]),
        );
    for name in names {
        assert_eq!(
            known_in(&ours, name),
            known_in(&runtime, name),
            "the compiler and the runtime disagree on `{name}`"
        );
    }
}
