//! `opcode`: runs workflows durably on an embedded libSQL database.
//!
//! A thin shell over `opcode-runtime`: it parses arguments, opens the
//! store, drives the executor and prints what happened. Exit codes: 0 the
//! workflow completed (or the command succeeded), 1 it failed or was
//! cancelled, 2 usage, compile, input or store errors, 3 it is suspended
//! waiting for a decision or a signal.

mod cli;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

/// jemalloc: as fast as mimalloc here, and with its background thread
/// (started below, once past the helpers) a long-running daemon gives
/// memory freed after a burst back to the system
/// (spec/decisions/0024-the-daemon-allocator.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    // A helper (a sandbox stage, a jq evaluation) does its job and exits here.
    opcode_stdlib::helpers::main_if_helper();
    opcode_daemon::allocator::return_freed_memory();
    // The daemon's token and passphrase leave its environment (this may
    // start the program again, as the same process).
    if let Err(e) = cli::secrets_out_of_sight() {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let parsed = cli::Cli::command()
        .version(cli::VERSION.as_str())
        .try_get_matches()
        .and_then(|matches| cli::Cli::from_arg_matches(&matches));
    let args = match parsed {
        Ok(args) => args,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    ExitCode::from(cli::main(args))
}
