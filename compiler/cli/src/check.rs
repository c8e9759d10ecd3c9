//! `opcodec check FILE...`: validate workflows and report every problem.

use std::path::PathBuf;

use opcode_compiler::diagnostics::render::{human, json};
use opcode_compiler::diagnostics::{Diagnostic, apply_fixes};
use opcode_compiler::{Compiler, MAX_SOURCE_BYTES, decode_utf8};

use crate::output::{ColorChoice, Format, eprint_line, print};

/// Arguments of `check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Workflow files (JSON, bare or in opcode's wrapper format, or `.opc`),
    /// or agent definitions (`*.agent.json`).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Output format; `json` is a JSON array of diagnostics.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Treat warnings as errors (exit 1 when there are any).
    #[arg(long)]
    deny_warnings: bool,
    /// Colour the human output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
    /// Apply every suggested fix to the files, then report what remains.
    #[arg(long)]
    fix: bool,
}

/// One checked file.
pub struct Checked {
    /// The path as given.
    pub file: String,
    /// Its text (lossily decoded when it is not UTF-8).
    pub text: String,
    /// What was found.
    pub diagnostics: Vec<Diagnostic>,
}

/// Reads a UTF-8 source file: `(display name, text)`.
pub fn read_source(path: &std::path::Path) -> Result<(String, String), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let text = decode_utf8(&bytes).map_err(|d| format!("{}: {}", path.display(), d.message))?;
    Ok((path.display().to_string(), text.to_owned()))
}

/// Reads and checks one file; `Err` is an I/O error message.
pub fn check_file(compiler: &Compiler, path: &PathBuf) -> Result<Checked, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let file = path.display().to_string();
    match decode_utf8(&bytes) {
        Ok(text) => {
            let diagnostics = diagnose(compiler, &file, text);
            // An oversized file is reported at its start; keep only what the
            // report shows instead of rendering megabytes.
            let shown = if text.len() > MAX_SOURCE_BYTES {
                head(text, 4096)
            } else {
                text
            };
            Ok(Checked {
                file,
                text: shown.to_owned(),
                diagnostics,
            })
        }
        Err(diagnostic) => Ok(Checked {
            file,
            text: String::from_utf8_lossy(&bytes).into_owned(),
            diagnostics: vec![diagnostic],
        }),
    }
}

/// What checking `text`, the file `file`, finds: an agent definition
/// (`*.agent.json`, spec/registry.md), an eval suite (`*.eval.json`,
/// spec/agent-evals.md) or a workflow of either syntax.
pub fn diagnose(compiler: &Compiler, file: &str, text: &str) -> Vec<Diagnostic> {
    if let Some(found) = opcode_compiler::agent::diagnose(file, text) {
        return found.into_sorted();
    }
    let syntax = opcode_compiler::Syntax::of_file(file);
    compiler.check_as(text, syntax).into_sorted()
}

/// Applies the fixes of one file's diagnostics in place (repeating while
/// fixes reveal more, at most a few rounds).
fn fix_file(compiler: &Compiler, path: &PathBuf) -> Result<(), String> {
    let (_, text) = read_source(path)?;
    let (fixed, applied) = fixed_text(compiler, path, &text);
    if applied > 0 {
        std::fs::write(path, fixed).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        eprint_line(&format!(
            "{}: applied {applied} {}",
            path.display(),
            fixes(applied)
        ));
    }
    Ok(())
}

/// `text` (of the file `path`) with every fix applied, repeating while
/// fixes reveal more (at most a few rounds), and how many were applied.
fn fixed_text(compiler: &Compiler, path: &std::path::Path, text: &str) -> (String, usize) {
    let file = path.display().to_string();
    let mut text = text.to_owned();
    let mut total = 0;
    for _ in 0..4 {
        let diagnostics = diagnose(compiler, &file, &text);
        let (fixed, applied) = apply_fixes(&text, &diagnostics);
        if applied == 0 {
            break;
        }
        text = fixed;
        total += applied;
    }
    (text, total)
}

fn fixes(n: usize) -> &'static str {
    if n == 1 { "fix" } else { "fixes" }
}

/// Arguments of `fix`.
#[derive(Debug, clap::Args)]
pub struct FixArgs {
    /// Workflow files (JSON, bare or in opcode's wrapper format, or `.opc`).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Write nothing: say which files have fixes to apply (exit 1 when any does).
    #[arg(long)]
    check: bool,
}

/// Runs `fix`: applies every suggested fix, then reports what remains as
/// `check` does; with `--check`, only says what would change.
pub fn run_fix(args: &FixArgs) -> u8 {
    if !args.check {
        return run(&Args {
            files: args.files.clone(),
            format: Format::Human,
            deny_warnings: false,
            color: ColorChoice::Auto,
            fix: true,
        });
    }
    let compiler = compiler();
    let mut pending = false;
    for path in &args.files {
        match read_source(path) {
            Ok((_, text)) => {
                let (_, applied) = fixed_text(&compiler, path, &text);
                if applied > 0 {
                    pending = true;
                    print(&format!(
                        "{}: {applied} {} to apply\n",
                        path.display(),
                        fixes(applied)
                    ));
                }
            }
            Err(message) => {
                eprint_line(&format!("error: {message}"));
                return 2;
            }
        }
    }
    u8::from(pending)
}

/// The first `max` bytes of `text`, cut at a character boundary.
fn head(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The compiler with the standard actions.
pub fn compiler() -> Compiler {
    Compiler::new().with_actions(opcode_stdlib::catalog())
}

/// Runs `check`.
pub fn run(args: &Args) -> u8 {
    let compiler = compiler();
    let mut all = Vec::new();
    let mut io_error = false;
    for path in &args.files {
        if args.fix
            && let Err(message) = fix_file(&compiler, path)
        {
            eprint_line(&format!("error: {message}"));
            io_error = true;
            continue;
        }
        match check_file(&compiler, path) {
            Ok(checked) => all.push(checked),
            Err(message) => {
                eprint_line(&format!("error: {message}"));
                io_error = true;
            }
        }
    }
    let (errors, warnings) = all
        .iter()
        .flat_map(|c| &c.diagnostics)
        .fold(
            (0, 0),
            |(e, w), d| {
                if d.is_error() { (e + 1, w) } else { (e, w + 1) }
            },
        );
    match args.format {
        Format::Json => {
            let items: Vec<serde_json::Value> = all
                .iter()
                .flat_map(
                    |c| match json::to_json_array(&c.diagnostics, &c.file, &c.text) {
                        serde_json::Value::Array(items) => items,
                        _ => Vec::new(),
                    },
                )
                .collect();
            print(&format!("{}\n", serde_json::Value::Array(items)));
        }
        Format::Human => {
            let color = args.color.enabled();
            for c in &all {
                print(&human::render(&c.diagnostics, &c.file, &c.text, color));
            }
            print(&summary(all.len(), errors, warnings));
        }
    }
    if io_error {
        2
    } else {
        u8::from(errors > 0 || (args.deny_warnings && warnings > 0))
    }
}

fn summary(files: usize, errors: usize, warnings: usize) -> String {
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    format!(
        "checked {}: {}, {}\n",
        plural(files, "file"),
        plural(errors, "error"),
        plural(warnings, "warning")
    )
}
