//! Diagnostics as JSON, for tools, CI and MCP clients.
//!
//! Every position is given twice: 1-based `line`/`column` (characters) for
//! people and byte offsets for programs. A fix carries both text edits and,
//! when expressible, JSON Patch operations on the document.

use serde_json::{Value, json};

use crate::diagnostics::Diagnostic;
use crate::source::{LineIndex, Span};

/// Renders one diagnostic of `file` (whose text is `src`) as a JSON object.
pub fn to_json(diagnostic: &Diagnostic, file: &str, src: &str, index: &LineIndex) -> Value {
    let position = |span: Span| {
        let start = index.line_col(src, span.start as usize);
        let end = index.line_col(src, span.end as usize);
        (start, end)
    };
    let (start, end) = position(diagnostic.span());
    let labels: Vec<Value> = diagnostic
        .labels
        .iter()
        .filter(|l| !l.primary)
        .map(|l| {
            let (s, e) = position(l.span);
            json!({
                "message": l.message,
                "line": s.line, "column": s.column,
                "end_line": e.line, "end_column": e.column,
                "start": l.span.start, "end": l.span.end,
            })
        })
        .collect();
    let fix = diagnostic.fix.as_ref().map(|fix| {
        let edits: Vec<Value> = fix
            .edits
            .iter()
            .map(|edit| {
                let (s, e) = position(edit.span);
                json!({
                    "line": s.line, "column": s.column,
                    "end_line": e.line, "end_column": e.column,
                    "start": edit.span.start, "end": edit.span.end,
                    "replacement": edit.replacement,
                })
            })
            .collect();
        json!({"message": fix.message, "edits": edits, "patch": fix.patch})
    });
    let mut out = json!({
        "code": diagnostic.code.id,
        "name": diagnostic.code.name,
        "severity": diagnostic.severity,
        "message": diagnostic.message,
        "file": file,
        "line": start.line,
        "column": start.column,
        "end_line": end.line,
        "end_column": end.column,
        "start": diagnostic.span().start,
        "end": diagnostic.span().end,
        "pointer": diagnostic.pointer,
        "help": diagnostic.help,
        "notes": diagnostic.notes,
        "labels": labels,
        "fix": fix,
    });
    // What a diagnostic does not have is left out, not sent as null.
    if let Value::Object(members) = &mut out {
        members.retain(|_, value| !value.is_null());
    }
    out
}

/// Renders every diagnostic of one file as a JSON array.
pub fn to_json_array<'d>(
    diagnostics: impl IntoIterator<Item = &'d Diagnostic>,
    file: &str,
    src: &str,
) -> Value {
    let index = LineIndex::new(src);
    Value::Array(
        diagnostics
            .into_iter()
            .map(|d| to_json(d, file, src, &index))
            .collect(),
    )
}
