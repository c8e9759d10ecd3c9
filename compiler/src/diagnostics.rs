//! Diagnostics are data.
//!
//! Every problem the compiler finds becomes one [`Diagnostic`]: a stable
//! [`Code`], a severity, a message, labelled spans, a help line, and where
//! possible a machine-applicable [`Fix`]. Phases push into a [`Diagnostics`]
//! sink and keep going, so one run reports every problem. Rendering happens at
//! the edge: [`render::human`] (ariadne) and [`render::json`] (tools, MCP).

pub mod codes;
pub mod patch;
pub mod render;

use opcode_vm::Code;
use serde::Serialize;

use crate::source::Span;

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The workflow is still valid; something looks wrong.
    Warning,
    /// The workflow cannot be compiled.
    Error,
}

/// A span with a message, pointing into the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// Where.
    pub span: Span,
    /// What is there (may be empty).
    pub message: String,
    /// Is this the main location of the diagnostic?
    pub primary: bool,
}

/// One text replacement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TextEdit {
    /// The bytes to replace (empty to insert).
    #[serde(skip)]
    pub span: Span,
    /// The new text.
    pub replacement: String,
}

/// One JSON Patch (RFC 6902) operation, for clients that edit the JSON tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum PatchOp {
    /// Replace the value at `path`.
    Replace {
        /// JSON Pointer of the value.
        path: String,
        /// The new value.
        value: serde_json::Value,
    },
    /// Remove the value at `path`.
    Remove {
        /// JSON Pointer of the value.
        path: String,
    },
    /// Add a value at `path`.
    Add {
        /// JSON Pointer where the value goes.
        path: String,
        /// The value.
        value: serde_json::Value,
    },
    /// Move the value at `from` to `path` (a key renamed).
    Move {
        /// JSON Pointer of the value.
        from: String,
        /// JSON Pointer where it goes.
        path: String,
    },
}

/// A machine-applicable correction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fix {
    /// What applying it does, such as "replace with `http.get`".
    pub message: String,
    /// Text edits on the source, non-overlapping.
    pub edits: Vec<TextEdit>,
    /// The same change as JSON Patch operations on the document, when expressible.
    pub patch: Vec<PatchOp>,
}

/// One problem found in a workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The stable code.
    pub code: Code,
    /// Error or warning.
    pub severity: Severity,
    /// One sentence, lower-case start, no final period.
    pub message: String,
    /// Where; the first primary label is the diagnostic's location.
    pub labels: Vec<Label>,
    /// Extra facts.
    pub notes: Vec<String>,
    /// How to fix it, in words.
    pub help: Option<String>,
    /// How to fix it, as edits.
    pub fix: Option<Fix>,
    /// JSON Pointer of the offending node in the document, when known.
    pub pointer: Option<String>,
}

impl Diagnostic {
    /// An error with a primary label at `span`.
    pub fn error(code: Code, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(code, Severity::Error, span, message)
    }

    /// A warning with a primary label at `span`.
    pub fn warning(code: Code, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(code, Severity::Warning, span, message)
    }

    fn new(code: Code, severity: Severity, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            code,
            severity,
            message: message.into(),
            labels: vec![Label {
                span,
                message: String::new(),
                primary: true,
            }],
            notes: Vec::new(),
            help: None,
            fix: None,
            pointer: None,
        }
    }

    /// Sets the primary label's message.
    pub fn with_label_message(mut self, message: impl Into<String>) -> Diagnostic {
        if let Some(label) = self.labels.iter_mut().find(|l| l.primary) {
            label.message = message.into();
        }
        self
    }

    /// Adds a secondary label.
    pub fn with_secondary(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.labels.push(Label {
            span,
            message: message.into(),
            primary: false,
        });
        self
    }

    /// Adds a note.
    pub fn with_note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }

    /// Sets the help line.
    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    /// Sets the fix.
    pub fn with_fix(mut self, fix: Fix) -> Diagnostic {
        self.fix = Some(fix);
        self
    }

    /// Sets the JSON Pointer of the offending node.
    pub fn with_pointer(mut self, pointer: impl Into<String>) -> Diagnostic {
        self.pointer = Some(pointer.into());
        self
    }

    /// The primary span.
    pub fn span(&self) -> Span {
        self.labels
            .iter()
            .find(|l| l.primary)
            .map(|l| l.span)
            .unwrap_or_default()
    }

    /// Is it an error?
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl Fix {
    /// A fix replacing one span with new text, with an optional equivalent patch.
    pub fn replace(
        message: impl Into<String>,
        span: Span,
        replacement: impl Into<String>,
        patch: Option<PatchOp>,
    ) -> Fix {
        Fix {
            message: message.into(),
            edits: vec![TextEdit {
                span,
                replacement: replacement.into(),
            }],
            patch: patch.into_iter().collect(),
        }
    }

    /// A fix renaming the object key written at `key_span`, whose value is
    /// at `pointer`, to `new_key`: the text edit and the RFC 6902 `move`.
    pub fn rename_key(
        message: impl Into<String>,
        key_span: Span,
        pointer: &str,
        new_key: &str,
    ) -> Fix {
        let parent = pointer.rsplit_once('/').map_or("", |(parent, _)| parent);
        let to = crate::syntax::node::child_pointer(parent, new_key);
        Fix::replace(
            message,
            key_span,
            serde_json::Value::from(new_key).to_string(),
            Some(PatchOp::Move {
                from: pointer.to_owned(),
                path: to,
            }),
        )
    }
}

/// The text to delete to remove item `i` of a comma-separated list whose
/// items span `items` (array entries, object members): the item with the
/// separator before it, or for the first the separator after it; `None`
/// for a lone item (the list's own brackets are the caller's to handle).
pub(crate) fn item_removal(items: &[Span], i: usize) -> Option<Span> {
    let this = items[i];
    match (i.checked_sub(1).map(|p| items[p]), items.get(i + 1)) {
        (Some(previous), _) => Some(Span::new(previous.end as usize, this.end as usize)),
        (None, Some(next)) => Some(Span::new(this.start as usize, next.start as usize)),
        (None, None) => None,
    }
}

/// Applies the text edits of every diagnostic's fix to `src`, skipping a fix
/// that overlaps one already taken. Returns the new text and how many fixes
/// were applied.
pub fn apply_fixes<'d>(
    src: &str,
    diagnostics: impl IntoIterator<Item = &'d Diagnostic>,
) -> (String, usize) {
    let mut taken: Vec<&TextEdit> = Vec::new();
    let mut applied = 0;
    for fix in diagnostics.into_iter().filter_map(|d| d.fix.as_ref()) {
        let overlaps = fix.edits.iter().any(|e| {
            taken.iter().any(|t| {
                e.span.start < t.span.end.max(t.span.start + 1)
                    && t.span.start < e.span.end.max(e.span.start + 1)
            })
        });
        let in_bounds = fix.edits.iter().all(|e| {
            e.span.end as usize <= src.len()
                && src.is_char_boundary(e.span.start as usize)
                && src.is_char_boundary(e.span.end as usize)
        });
        if !overlaps && in_bounds && !fix.edits.is_empty() {
            taken.extend(&fix.edits);
            applied += 1;
        }
    }
    taken.sort_by_key(|e| (e.span.start, e.span.end));
    let mut out = String::with_capacity(src.len());
    let mut at = 0;
    for edit in taken {
        out.push_str(&src[at..edit.span.start as usize]);
        out.push_str(&edit.replacement);
        at = edit.span.end as usize;
    }
    out.push_str(&src[at..]);
    (out, applied)
}

/// The closest of `known` to `word`, if it is plausibly a typo of it.
pub fn did_you_mean<'k>(word: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|k| (opcode_vm::catalog::edit_distance(k, word), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 3) && *d < k.len())
        .min()
        .map(|(_, k)| k)
}

/// Diagnostics of one code kept in one report; the rest are counted.
pub const MAX_PER_CODE: usize = 100;

/// The sink every phase reports into. Past [`MAX_PER_CODE`] diagnostics of
/// one code, the rest are counted in one more that says how many.
#[derive(Debug, Default, Clone)]
pub struct Diagnostics {
    items: Vec<Diagnostic>,
    /// Per code: how many were reported, and the index of its summary.
    per_code: Vec<(&'static str, usize, Option<usize>)>,
}

impl Diagnostics {
    /// An empty sink.
    pub fn new() -> Diagnostics {
        Diagnostics::default()
    }

    /// The diagnostics, to change in place (their fixes' patches).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Diagnostic> {
        self.items.iter_mut()
    }

    /// A sink holding `diagnostic` alone.
    pub fn of(diagnostic: Diagnostic) -> Diagnostics {
        let mut sink = Diagnostics::new();
        sink.push(diagnostic);
        sink
    }

    /// Records a diagnostic.
    pub fn push(&mut self, diagnostic: Diagnostic) {
        let id = diagnostic.code.id;
        let at = self
            .per_code
            .iter()
            .position(|(code, ..)| *code == id)
            .unwrap_or_else(|| {
                self.per_code.push((id, 0, None));
                self.per_code.len() - 1
            });
        let (_, seen, summary) = &mut self.per_code[at];
        *seen += 1;
        if *seen <= MAX_PER_CODE {
            self.items.push(diagnostic);
            return;
        }
        let left_out = *seen - MAX_PER_CODE;
        let message = format!(
            "and {left_out} more {id} like the ones above (only the first {MAX_PER_CODE} are shown)"
        );
        if let Some(index) = summary {
            self.items[*index].message = message;
        } else {
            let mut more = diagnostic;
            more.message = message;
            more.fix = None;
            more.notes.clear();
            *summary = Some(self.items.len());
            self.items.push(more);
        }
    }

    /// Are there any errors (warnings do not count)?
    pub fn has_errors(&self) -> bool {
        self.items.iter().any(Diagnostic::is_error)
    }

    /// Number of errors.
    pub fn error_count(&self) -> usize {
        self.items.iter().filter(|d| d.is_error()).count()
    }

    /// Number of warnings.
    pub fn warning_count(&self) -> usize {
        self.items.len() - self.error_count()
    }

    /// The diagnostics, in the order found.
    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.items.iter()
    }

    /// Is the sink empty?
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Number of diagnostics.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// The diagnostics sorted by position, then code (a stable order for output).
    pub fn into_sorted(mut self) -> Vec<Diagnostic> {
        self.items
            .sort_by(|a, b| (a.span(), a.code.id).cmp(&(b.span(), b.code.id)));
        self.items
    }
}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter()
    }
}

impl Extend<Diagnostic> for Diagnostics {
    fn extend<T: IntoIterator<Item = Diagnostic>>(&mut self, iter: T) {
        self.items.extend(iter);
    }
}

/// The diagnostic of a panic inside the compiler (E0059) at `span`: the
/// panic's message, and what to do.
pub fn internal_error(span: Span, pointer: &str, panic: &(dyn std::any::Any + Send)) -> Diagnostic {
    let said = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned());
    let diagnostic = Diagnostic::error(
        codes::E0059,
        span,
        format!("the compiler failed inside while checking this (a bug in opcode): {said}"),
    )
    .with_help("report it with this workflow; writing this step another way may avoid it");
    if pointer.is_empty() {
        diagnostic
    } else {
        diagnostic.with_pointer(pointer)
    }
}
