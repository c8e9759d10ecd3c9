//! The opcode workflow compiler: read, validate, report.
//!
//! The pipeline, for one source text:
//!
//! ```text
//! bytes ─► UTF-8 check ─► JSON reader (logos, spans) ─► Node tree
//!       ─► lowering (structure, field types) ─► AST
//!       ─► checks (ids, dependencies, references, CEL, jq, actions) ─► Diagnostics
//! ```
//!
//! The compiler is pure: no files, no network, no clock. Action signatures
//! arrive as data ([`Compiler::with_actions`]), usually from
//! `opcode_stdlib::catalog()`.
//!
//! ```
//! use opcode_compiler::Compiler;
//!
//! let compiler = Compiler::new();
//! let diagnostics = compiler.check(r#"{"steps": [{"id": "a", "action": "nope"}]}"#);
//! assert!(diagnostics.has_errors());
//! assert_eq!(diagnostics.iter().next().unwrap().code.id, "E0040");
//! ```
#![deny(clippy::disallowed_methods)]
#![warn(missing_docs)]

pub mod agent;
pub mod ast;
pub mod check;
pub mod codegen;
pub mod diagnostics;
pub mod diagram;
pub mod duration;
pub mod index;
pub mod source;
pub mod syntax;

use opcode_vm::Program;
use opcode_vm::catalog::{ActionSpec, Catalog};

use crate::ast::Document;
use crate::diagnostics::codes::{E0002, E0006};
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::source::Span;

/// Largest workflow source accepted, in bytes.
pub const MAX_SOURCE_BYTES: usize = 32 * 1024 * 1024;

/// The surface syntax of a source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// JSON (a bare definition or opcode's template wrapper).
    Json,
    /// The `.opc` text form (spec/opc.md).
    Opc,
}

impl Syntax {
    /// The syntax of a file, from its name: `.opc`, else JSON.
    pub fn of_file(name: &str) -> Syntax {
        let is_opc = std::path::Path::new(name)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("opc"));
        if is_opc { Syntax::Opc } else { Syntax::Json }
    }
}

/// The compiler, configured with the actions workflows may use.
#[derive(Debug, Clone, Default)]
pub struct Compiler {
    catalog: Catalog,
}

impl Compiler {
    /// A compiler that knows no actions (every action step is an error).
    pub fn new() -> Compiler {
        Compiler::default()
    }

    /// Adds action signatures, such as `opcode_stdlib::catalog()`.
    pub fn with_actions(mut self, actions: impl IntoIterator<Item = ActionSpec>) -> Compiler {
        for spec in actions {
            self.catalog.insert(spec);
        }
        self
    }

    /// The actions this compiler knows.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Reads and lowers a JSON source text into the AST, reporting structural problems.
    pub fn parse(&self, src: &str, sink: &mut Diagnostics) -> Option<Document> {
        self.parse_as(src, Syntax::Json, sink)
    }

    /// Reads and lowers a source text of either syntax into the AST.
    pub fn parse_as(&self, src: &str, syntax: Syntax, sink: &mut Diagnostics) -> Option<Document> {
        guarded(|| read(src, syntax, sink)).unwrap_or_else(|internal| {
            sink.push(internal);
            None
        })
    }

    /// Runs every check on a JSON source text and returns what was found.
    pub fn check(&self, src: &str) -> Diagnostics {
        self.check_as(src, Syntax::Json)
    }

    /// Runs every check on a source text of either syntax.
    pub fn check_as(&self, src: &str, syntax: Syntax) -> Diagnostics {
        guarded(|| {
            let mut sink = Diagnostics::new();
            if let Some(doc) = read(src, syntax, &mut sink) {
                check::check(&doc, &self.catalog, src, &mut sink);
            }
            with_patches(sink, src, syntax)
        })
        .unwrap_or_else(Diagnostics::of)
    }

    /// Checks and compiles a source text. The Program is produced only when
    /// there is no error; warnings are returned either way. `file` names the
    /// source in run-time messages, and its extension the syntax (`.opc`,
    /// else JSON).
    pub fn compile(&self, src: &str, file: &str) -> (Option<Program>, Diagnostics) {
        self.compile_with(src, file, Embedding::default())
    }

    /// `src` with each `agent.*` step's literal `agent` that names a
    /// release otherwise than exactly (`name` alone) written as the release
    /// it names (`"name@1.2.0"`), so that the text pins it
    /// (spec/registry.md, "Steps naming a release"); `src` itself when
    /// there is nothing to pin or it cannot be read.
    pub fn pin_agents(&self, src: &str, file: &str, agents: &dyn AgentLookup) -> String {
        guarded(|| {
            let mut sink = Diagnostics::new();
            let Some(doc) = read(src, Syntax::of_file(file), &mut sink) else {
                return src.to_owned();
            };
            let mut out = src.to_owned();
            // From the end, so the spans before each edit stay true.
            for (span, pinned) in check::agent_ref::pins(&doc, agents).into_iter().rev() {
                let quoted = serde_json::Value::String(pinned).to_string();
                out.replace_range(span.start as usize..span.end as usize, &quoted);
            }
            out
        })
        .unwrap_or_else(|_| src.to_owned())
    }

    /// [`Compiler::compile`], knowing what the embedding knows: its
    /// ceiling for steps' `isolation` blocks (each widening is an error,
    /// E0052) and the agents steps may name (E0068, E0070).
    pub fn compile_with(
        &self,
        src: &str,
        file: &str,
        embedding: Embedding<'_>,
    ) -> (Option<Program>, Diagnostics) {
        guarded(|| {
            let syntax = Syntax::of_file(file);
            let mut sink = Diagnostics::new();
            let Some(doc) = read(src, syntax, &mut sink) else {
                return (None, with_patches(sink, src, syntax));
            };
            let checked = check::check(&doc, &self.catalog, src, &mut sink);
            if let Some(isolation) = embedding.isolation {
                check::isolation::check(&doc, isolation, &mut sink);
            }
            if let Some(agents) = embedding.agents {
                check::agent_ref::check(&doc, agents, &mut sink);
            }
            let sink = with_patches(sink, src, syntax);
            if sink.has_errors() {
                return (None, sink);
            }
            let program = codegen::generate(&doc, &checked, src, file);
            (Some(program), sink)
        })
        .unwrap_or_else(|internal| (None, Diagnostics::of(internal)))
    }
}

/// `sink` with each fix on a JSON source given the RFC 6902 patch its
/// edits make, where it has none (diagnostics::patch).
fn with_patches(mut sink: Diagnostics, src: &str, syntax: Syntax) -> Diagnostics {
    if syntax == Syntax::Json {
        diagnostics::patch::derive(sink.iter_mut(), src);
    }
    sink
}

/// [`Compiler::parse_as`] on the caller's stack.
fn read(src: &str, syntax: Syntax, sink: &mut Diagnostics) -> Option<Document> {
    if src.len() > MAX_SOURCE_BYTES {
        sink.push(
            Diagnostic::error(
                E0006,
                Span::at(0),
                format!(
                    "the file is {} bytes; a workflow may be at most {MAX_SOURCE_BYTES}",
                    src.len()
                ),
            )
            .with_help("split the workflow, or move data into inputs"),
        );
        return None;
    }
    let node = match syntax {
        Syntax::Json => syntax::json::parse_here(src, sink)?,
        Syntax::Opc => syntax::opc::parse(src, sink)?,
    };
    syntax::lower::lower_document(src, &node, sink)
}

/// The stack every reading, check and compilation runs on, whatever thread
/// calls (a tokio worker has 2 MiB): their recursive descent is bounded
/// by the nesting limits (spec/limits.md), and the deepest input allowed
/// takes under 2 MiB in a debug build. Mapped per call, touched only as
/// far as it is used.
const COMPILE_STACK: usize = 16 << 20;

/// Runs `f` on a stack of [`COMPILE_STACK`].
pub(crate) fn deep<R>(f: impl FnOnce() -> R) -> R {
    stacker::grow(COMPILE_STACK, f)
}

/// [`deep`], a panic inside caught: the internal-error diagnostic (E0059)
/// at the start of the file, instead of an end to the caller (`opcodec`,
/// the language server, the daemon's `opcode.define`).
fn guarded<R>(f: impl FnOnce() -> R) -> Result<R, Diagnostic> {
    deep(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)))
        .map_err(|panic| diagnostics::internal_error(Span::at(0), "", panic.as_ref()))
}

/// What the embedding knows that a workflow's text does not, given to
/// [`Compiler::compile_with`]; nothing, by default.
#[derive(Clone, Copy, Default)]
pub struct Embedding<'a> {
    /// The ceiling for steps' `isolation` blocks.
    pub isolation: Option<&'a dyn IsolationCheck>,
    /// The agents `agent.*` steps may name.
    pub agents: Option<&'a dyn AgentLookup>,
}

/// The agents an `agent.*` step's literal `agent` may name: the settings'
/// entries and the registry's releases (spec/registry.md), as the daemon
/// knows them.
pub trait AgentLookup {
    /// What `reference` (`name` or `name@version`) names.
    fn lookup(&self, reference: &str) -> AgentRef;
}

/// What a step's `agent` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentRef {
    /// An entry of the settings' `agents`.
    Entry,
    /// A published release.
    Release {
        /// The release exactly: `name@version`.
        pinned: String,
        /// Its role: `scout`, `worker` or `runner`.
        role: String,
    },
    /// Nothing known by that name.
    Unknown {
        /// Why, in one sentence.
        message: String,
        /// The closest reference known, when one is close.
        closest: Option<String>,
        /// What to do.
        help: String,
    },
}

/// The embedding's ceiling for steps' `isolation` blocks (the daemon's
/// settings and grants), given to [`Compiler::compile_with`].
pub trait IsolationCheck {
    /// How `block`, the `isolation` block of a step of the template
    /// `template`, goes past the ceiling: one entry per key.
    fn widenings(&self, template: Option<&str>, block: &serde_json::Value) -> Vec<Widening>;
}

/// One way an `isolation` block goes past the ceiling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Widening {
    /// The `isolation` key (`network`), or empty for the block as a whole.
    pub key: String,
    /// What it asks for, in one sentence.
    pub message: String,
    /// What would allow it.
    pub help: String,
}

/// Decodes a file's bytes, or reports where the first invalid UTF-8 byte is.
pub fn decode_utf8(bytes: &[u8]) -> Result<&str, Diagnostic> {
    std::str::from_utf8(bytes).map_err(|e| {
        let at = e.valid_up_to();
        Diagnostic::error(
            E0002,
            Span::new(at, at + e.error_len().unwrap_or(1)),
            format!("invalid UTF-8 at byte {at}"),
        )
        .with_help("workflow files must be UTF-8 encoded")
    })
}
