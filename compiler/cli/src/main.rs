//! `opcodec`: the opcode workflow compiler's command line.
//!
//! A thin shell: it reads files, calls `opcode-compiler`, renders the
//! diagnostics and picks the exit code (0 fine, 1 problems found, 2 usage or
//! I/O error).

mod check;
mod explain;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc: compiling and running workflows allocates many small values.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The opcode workflow compiler.
#[derive(Debug, Parser)]
#[command(
    name = "opcodec",
    version,
    about = "Check, explain, compile and run opcode workflows"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate workflow files and report every problem.
    Check(check::Args),
    /// Show the documentation page of a diagnostic code (E0001, W0003, R0001…).
    Explain(explain::Args),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let code = match cli.command {
        Command::Check(args) => check::run(&args),
        Command::Explain(args) => explain::run(&args),
    };
    ExitCode::from(code)
}
