//! Diagnostics for people, with source snippets (ariadne).
//!
//! This is the only file that knows ariadne. Spans are byte offsets, so the
//! report is configured with `IndexType::Byte`; colour is a parameter so that
//! output to a pipe, a file or a snapshot is plain text.

use ariadne::{Color, Config, IndexType, Label, Report, ReportKind, Source};

use crate::diagnostics::{Diagnostic, Severity};

/// Renders diagnostics of `file` (whose text is `src`) into a string.
pub fn render<'d>(
    diagnostics: impl IntoIterator<Item = &'d Diagnostic>,
    file: &str,
    src: &str,
    color: bool,
) -> String {
    let mut out = Vec::new();
    let mut cache = (file, Source::from(src));
    for diagnostic in diagnostics {
        let report = build(diagnostic, file, src, color);
        // Writing into a Vec cannot fail.
        let _ = report.write(&mut cache, &mut out);
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn build<'f>(
    diagnostic: &Diagnostic,
    file: &'f str,
    src: &str,
    color: bool,
) -> Report<'f, (&'f str, std::ops::Range<usize>)> {
    let kind = match diagnostic.severity {
        Severity::Error => ReportKind::Error,
        Severity::Warning => ReportKind::Warning,
    };
    // Spans may come from bytes that were not valid UTF-8: keep them on
    // character boundaries of the text being shown.
    let clamp = |span: crate::source::Span| {
        let mut start = (span.start as usize).min(src.len());
        while !src.is_char_boundary(start) {
            start -= 1;
        }
        let mut end = (span.end as usize).clamp(start, src.len());
        while !src.is_char_boundary(end) {
            end += 1;
        }
        start..end
    };
    let primary = clamp(diagnostic.span());
    let config = Config::default()
        .with_index_type(IndexType::Byte)
        .with_color(color);
    let mut report = Report::build(kind, (file, primary.clone()))
        .with_config(config)
        .with_code(diagnostic.code.id)
        .with_message(&diagnostic.message);
    for label in &diagnostic.labels {
        let mut l = Label::new((file, clamp(label.span)));
        // ariadne underlines only labels that have a message.
        if !label.message.is_empty() {
            l = l.with_message(&label.message);
        } else if label.primary {
            l = l.with_message(diagnostic.code.name.replace('-', " "));
        }
        if color {
            l = l.with_color(if label.primary {
                Color::Red
            } else {
                Color::Blue
            });
        }
        report = report.with_label(l);
    }
    for note in &diagnostic.notes {
        report = report.with_note(note);
    }
    if let Some(help) = &diagnostic.help {
        report = report.with_help(help);
    }
    if let Some(fix) = &diagnostic.fix {
        report = report.with_help(format!("fix: {}", fix.message));
    }
    if let Some(pointer) = &diagnostic.pointer {
        report = report.with_note(format!(
            "at {}",
            if pointer.is_empty() { "/" } else { pointer }
        ));
    }
    report.finish()
}
