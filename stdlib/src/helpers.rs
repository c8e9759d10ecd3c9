//! The helper processes a runtime starts from its own binary: the sandbox
//! stages of `shell.exec`, an unsandboxed command tied to the runtime, and
//! one jq or Expr evaluation. A binary that embeds the
//! runtime calls [`main_if_helper`] first thing in `main`.

use crate::evaluator as process;
use crate::isolation::{sandbox, tether};

/// Does the helper's job and exits if this process was started as one;
/// returns otherwise. Call it before any thread starts.
pub fn main_if_helper() {
    sandbox::main_if_sandbox();
    let first = std::env::args_os().nth(1);
    if first.as_deref().is_some_and(|a| a == process::ARG) {
        std::process::exit(process::main());
    }
    if first.as_deref().is_some_and(|a| a == tether::ARG) {
        std::process::exit(tether::main());
    }
}
