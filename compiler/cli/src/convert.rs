//! `opcodec convert IN -o OUT` (JSON ⇄ `.opc`, by extension) and
//! `opcodec fmt FILE... [--check]` (`.opc`, and canonical JSON).

use std::path::{Path, PathBuf};

use opcode_compiler::Syntax;
use opcode_compiler::diagnostics::Diagnostics;
use opcode_compiler::diagnostics::render::human;
use opcode_compiler::syntax::opc;

use crate::check::read_source;
use crate::output::{eprint_line, print};

/// Arguments of `convert`.
#[derive(Debug, clap::Args)]
pub struct ConvertArgs {
    /// The workflow to convert (`.json` or `.opc`).
    input: PathBuf,
    /// Where to write it; the other syntax is chosen by its extension
    /// (default: standard output, in the other syntax).
    #[arg(short, long)]
    output: Option<PathBuf>,
}

/// Arguments of `fmt`.
#[derive(Debug, clap::Args)]
pub struct FmtArgs {
    /// Files to format in place (`.opc`, or JSON).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Change nothing; exit 1 when a file is not formatted.
    #[arg(long)]
    check: bool,
}

fn syntax_of(path: &Path) -> Syntax {
    Syntax::of_file(&path.to_string_lossy())
}

fn report(file: &str, text: &str, diagnostics: &Diagnostics) {
    let sorted = diagnostics.clone().into_sorted();
    eprint_line(human::render(&sorted, file, text, false).trim_end());
}

/// `text` in the other syntax.
fn converted(file: &str, text: &str, from: Syntax) -> Result<String, u8> {
    let result = match from {
        Syntax::Json => opc::from_json(text),
        Syntax::Opc => opc::to_json(text).map(|value| pretty_json(&value)),
    };
    result.map_err(|diagnostics| {
        report(file, text, &diagnostics);
        1
    })
}

/// JSON with two-space indentation and a final newline.
fn pretty_json(value: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

/// Runs `convert`.
pub fn run_convert(args: &ConvertArgs) -> u8 {
    let (file, text) = match read_source(&args.input) {
        Ok(read) => read,
        Err(message) => {
            eprint_line(&format!("error: {message}"));
            return 2;
        }
    };
    let from = syntax_of(&args.input);
    if let Some(out) = &args.output
        && syntax_of(out) == from
    {
        eprint_line(&format!(
            "error: {} and {} have the same syntax; convert goes from .json to .opc or back",
            args.input.display(),
            out.display()
        ));
        return 2;
    }
    let result = match converted(&file, &text, from) {
        Ok(result) => result,
        Err(code) => return code,
    };
    let Some(out) = &args.output else {
        print(&result);
        return 0;
    };
    if let Err(e) = std::fs::write(out, result) {
        eprint_line(&format!("error: cannot write {}: {e}", out.display()));
        return 2;
    }
    0
}

/// The canonical text of a file.
fn formatted(file: &str, text: &str, syntax: Syntax) -> Result<String, u8> {
    let result = match syntax {
        Syntax::Opc => opc::format(text),
        Syntax::Json => serde_json::from_str::<serde_json::Value>(text)
            .map(|value| pretty_json(&value))
            .map_err(|_| {
                let mut sink = Diagnostics::new();
                let _ = opcode_compiler::syntax::json::parse(text, &mut sink);
                sink
            }),
    };
    result.map_err(|diagnostics| {
        report(file, text, &diagnostics);
        1
    })
}

/// Runs `fmt`.
pub fn run_fmt(args: &FmtArgs) -> u8 {
    let mut code = 0;
    for path in &args.files {
        let (file, text) = match read_source(path) {
            Ok(read) => read,
            Err(message) => {
                eprint_line(&format!("error: {message}"));
                code = 2;
                continue;
            }
        };
        let result = match formatted(&file, &text, syntax_of(path)) {
            Ok(result) => result,
            Err(failed) => {
                code = code.max(failed);
                continue;
            }
        };
        if result == text {
            continue;
        }
        if args.check {
            eprint_line(&format!("{file}: not formatted"));
            code = code.max(1);
        } else if let Err(e) = std::fs::write(path, result) {
            eprint_line(&format!("error: cannot write {file}: {e}"));
            code = 2;
        }
    }
    code
}
