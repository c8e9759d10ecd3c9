//! `opcodec`: the opcode workflow compiler's command line.
//!
//! A thin shell: it reads files, calls `opcode-compiler`, renders the
//! diagnostics and picks the exit code (0 fine, 1 problems found, 2 usage or
//! I/O error).

mod check;
mod compile;
mod convert;
mod diagram;
mod explain;
mod lsp;
mod output;
mod run;
mod test;

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
    /// Apply the suggested fixes to workflow files, then report what remains (`--check`: only say what would change).
    Fix(check::FixArgs),
    /// Show the documentation page of a diagnostic code (E0001, W0003, R0100…).
    Explain(explain::Args),
    /// Compile a workflow into a Program file.
    Compile(compile::CompileArgs),
    /// Print the listing of a Program (from a compiled file or a workflow).
    Disasm(compile::DisasmArgs),
    /// Run a workflow in memory (exit 0 completed, 1 failed, 2 compile errors, 3 suspended).
    Run(run::Args),
    /// Run workflow tests (`*.test.json`): mocked actions, scripted answers, a virtual clock (exit 0 all passed, 1 a case failed, 2 nothing to test).
    Test(test::Args),
    /// Convert a workflow between JSON and `.opc` (direction from the extensions).
    Convert(convert::ConvertArgs),
    /// Format `.opc` (and JSON) files in place; `--check` only reports.
    Fmt(convert::FmtArgs),
    /// Serve the language server protocol on stdio (diagnostics, hover, completion…).
    Lsp(lsp::Args),
    /// Draw a workflow: ascii, mermaid, svg or png.
    Diagram(diagram::Args),
}

fn main() -> ExitCode {
    // A jq evaluation started by `opcodec run` does its job and exits here.
    opcode_stdlib::helpers::main_if_helper();
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
        Command::Fix(args) => check::run_fix(&args),
        Command::Explain(args) => explain::run(&args),
        Command::Compile(args) => compile::run_compile(&args),
        Command::Disasm(args) => compile::run_disasm(&args),
        Command::Run(args) => run::run(&args),
        Command::Test(args) => test::run(&args),
        Command::Convert(args) => convert::run_convert(&args),
        Command::Fmt(args) => convert::run_fmt(&args),
        Command::Lsp(args) => lsp::run(&args),
        Command::Diagram(args) => diagram::run(&args),
    };
    ExitCode::from(code)
}
