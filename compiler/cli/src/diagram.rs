//! `opcodec diagram FILE [--format ascii|mermaid|svg|png] [-o OUT]`.

use std::io::Write as _;
use std::path::PathBuf;

use opcode_compiler::diagram::{self, Statuses};

use crate::compile::compile_file;
use crate::output::eprint_line;

/// Diagram formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Levels as indented text.
    Ascii,
    /// A Mermaid flowchart.
    Mermaid,
    /// An SVG drawing.
    Svg,
    /// A PNG image (fonts from the system).
    Png,
}

/// Arguments of `diagram`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The workflow (`.json` or `.opc`).
    file: PathBuf,
    /// What to draw.
    #[arg(long, value_enum, default_value_t = Format::Mermaid)]
    format: Format,
    /// Where to write it (default: standard output).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// A step's status to draw over it, `STEP=STATUS` (repeatable).
    #[arg(long = "status", value_name = "STEP=STATUS")]
    statuses: Vec<String>,
}

/// Runs `diagram`.
pub fn run(args: &Args) -> u8 {
    let program = match compile_file(&args.file, false) {
        Ok(program) => program,
        Err(code) => return code,
    };
    let statuses: Statuses = args
        .statuses
        .iter()
        .filter_map(|s| s.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let statuses = (!statuses.is_empty()).then_some(&statuses);
    let bytes = match args.format {
        Format::Ascii => diagram::ascii(&program, statuses).into_bytes(),
        Format::Mermaid => diagram::mermaid(&program, statuses).into_bytes(),
        Format::Svg => diagram::svg::svg(&program, statuses).into_bytes(),
        Format::Png => {
            let mut fonts = resvg::usvg::fontdb::Database::new();
            fonts.load_system_fonts();
            match diagram::png::png(&diagram::svg::svg(&program, statuses), fonts, 2.0) {
                Ok(png) => png,
                Err(e) => {
                    eprint_line(&format!("error: {e}"));
                    return 2;
                }
            }
        }
    };
    let written = match &args.output {
        Some(path) => std::fs::write(path, &bytes),
        None => std::io::stdout().write_all(&bytes),
    };
    if let Err(e) = written {
        eprint_line(&format!("error: cannot write the diagram: {e}"));
        return 2;
    }
    0
}
