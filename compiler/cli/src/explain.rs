//! `opcodec explain CODE`: print a diagnostic code's page.

use crate::output::{eprint_line, print};

/// Arguments of `explain`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The code, such as E0024.
    code: String,
}

/// Prints the page; exit 2 when the code is unknown.
pub fn run(args: &Args) -> u8 {
    if let Some(code) = opcode_compiler::diagnostics::codes::lookup(&args.code) {
        print(code.doc);
        if !code.doc.ends_with('\n') {
            print("\n");
        }
        0
    } else {
        eprint_line(&format!(
            "error: unknown code `{}` (codes look like E0001, W0001, R0001)",
            args.code
        ));
        2
    }
}
