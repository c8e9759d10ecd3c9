//! `opcodec compile FILE [-o OUT] [--print-hash]` and `opcodec disasm FILE`.

use std::path::{Path, PathBuf};

use opcode_compiler::codegen::meaning_hash;
use opcode_compiler::diagnostics::render::human;
use opcode_vm::Program;
use opcode_vm::program::MAGIC;

use crate::check::{compiler, read_source};
use crate::output::{ColorChoice, eprint_line, print};

/// Arguments of `compile`.
#[derive(Debug, clap::Args)]
pub struct CompileArgs {
    /// The workflow file.
    file: PathBuf,
    /// Where to write the Program (default: the file with extension `.opcb`).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Print the hash of the Program's meaning (positions excluded) instead of writing it.
    #[arg(long)]
    print_hash: bool,
    /// Colour diagnostics.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
}

/// Arguments of `disasm`.
#[derive(Debug, clap::Args)]
pub struct DisasmArgs {
    /// A workflow file, or a compiled Program (`.opcb`).
    file: PathBuf,
}

/// Compiles a source file, printing diagnostics; `Err` is the exit code.
pub fn compile_file(path: &Path, color: bool) -> Result<Program, u8> {
    let (file, text) = read_source(path).map_err(|message| {
        eprint_line(&format!("error: {message}"));
        2
    })?;
    let (program, diagnostics) = compiler().compile(&text, &file);
    let diagnostics = diagnostics.into_sorted();
    if !diagnostics.is_empty() {
        eprint_line(human::render(&diagnostics, &file, &text, color).trim_end());
    }
    program.ok_or(1)
}

/// Runs `compile`.
pub fn run_compile(args: &CompileArgs) -> u8 {
    let program = match compile_file(&args.file, args.color.enabled()) {
        Ok(p) => p,
        Err(code) => return code,
    };
    if args.print_hash {
        print(&format!("{}\n", meaning_hash(&program)));
        return 0;
    }
    let out = args
        .output
        .clone()
        .unwrap_or_else(|| args.file.with_extension("opcb"));
    match std::fs::write(&out, program.to_bytes()) {
        Ok(()) => {
            eprint_line(&format!("wrote {}", out.display()));
            0
        }
        Err(e) => {
            eprint_line(&format!("error: cannot write {}: {e}", out.display()));
            2
        }
    }
}

/// Runs `disasm`.
pub fn run_disasm(args: &DisasmArgs) -> u8 {
    let bytes = match std::fs::read(&args.file) {
        Ok(b) => b,
        Err(e) => {
            eprint_line(&format!("error: cannot read {}: {e}", args.file.display()));
            return 2;
        }
    };
    let program = if bytes.starts_with(&MAGIC) {
        match Program::from_bytes(&bytes) {
            Ok(p) => p,
            Err(e) => {
                eprint_line(&format!("error[R0109]: {}: {e}", args.file.display()));
                return 1;
            }
        }
    } else {
        match compile_file(&args.file, false) {
            Ok(p) => p,
            Err(code) => return code,
        }
    };
    print(&opcode_vm::listing::listing(&program));
    0
}
