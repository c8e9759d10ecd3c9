//! What the server answers: diagnostics with fixes, hover, completion,
//! definitions and references of step ids, symbols, formatting.

use std::collections::HashMap;
use std::fmt::Write as _;

use opcode_compiler::diagnostics::{Diagnostic, Severity};
use opcode_compiler::syntax::template::Segment;
use opcode_compiler::{Compiler, Syntax};
use opcode_vm::catalog::ActionSpec;
use tower_lsp_server::ls_types::{
    self as lsp, CodeAction, CodeActionOrCommand, CompletionItem, CompletionItemKind,
    DocumentSymbol, Hover, HoverContents, Location, MarkupContent, MarkupKind, NumberOrString,
    Position, SymbolKind, TextEdit, Uri, WorkspaceEdit,
};

use super::document::Document;

/// The namespaces of `${{…}}` references and CEL expressions.
const NAMESPACES: &[(&str, &str)] = &[
    ("steps", "outputs of earlier steps: `steps.ID.output…`"),
    ("inputs", "the run's inputs"),
    (
        "workflow",
        "facts about the run: `run_id`, `name`, `agent_id`, `error`…",
    ),
    ("context", "the workflow context: `intent`, `notes`, …"),
    (
        "secrets",
        "vault secrets, resolved only when an action is dispatched (params only)",
    ),
    ("loop", "the current loop iteration: `item`, `index`"),
];

/// The LSP diagnostics of a document.
pub fn diagnostics(doc: &Document) -> Vec<lsp::Diagnostic> {
    let Some(analysis) = &doc.analysis else {
        return Vec::new();
    };
    analysis
        .diagnostics
        .iter()
        .map(|d| {
            let mut message = d.message.clone();
            if let Some(help) = &d.help {
                message.push_str("\nhelp: ");
                message.push_str(help);
            }
            lsp::Diagnostic {
                range: doc.lines.range(&doc.text, d.span()),
                severity: Some(match d.severity {
                    Severity::Error => lsp::DiagnosticSeverity::ERROR,
                    Severity::Warning => lsp::DiagnosticSeverity::WARNING,
                }),
                code: Some(NumberOrString::String(d.code.id.to_owned())),
                source: Some("opcode".into()),
                message,
                ..lsp::Diagnostic::default()
            }
        })
        .collect()
}

/// The fixes of the diagnostics that touch `range`, as quick fixes.
pub fn code_actions(doc: &Document, uri: &Uri, range: lsp::Range) -> Vec<CodeActionOrCommand> {
    let Some(analysis) = &doc.analysis else {
        return Vec::new();
    };
    let start = doc.lines.offset(&doc.text, range.start);
    let end = doc.lines.offset(&doc.text, range.end);
    analysis
        .diagnostics
        .iter()
        .filter(|d| {
            let span = d.span();
            (span.start as usize) <= end && start <= span.end as usize
        })
        .filter_map(|d: &Diagnostic| {
            let fix = d.fix.as_ref()?;
            let edits = fix
                .edits
                .iter()
                .map(|e| TextEdit::new(doc.lines.range(&doc.text, e.span), e.replacement.clone()))
                .collect();
            let mut changes = HashMap::new();
            changes.insert(uri.clone(), edits);
            Some(CodeActionOrCommand::CodeAction(CodeAction {
                title: fix.message.clone(),
                kind: Some(lsp::CodeActionKind::QUICKFIX),
                diagnostics: Some(diagnostics_for(doc, d)),
                edit: Some(WorkspaceEdit::new(changes)),
                is_preferred: Some(true),
                ..CodeAction::default()
            }))
        })
        .collect()
}

fn diagnostics_for(doc: &Document, d: &Diagnostic) -> Vec<lsp::Diagnostic> {
    diagnostics(doc)
        .into_iter()
        .filter(|l| l.range == doc.lines.range(&doc.text, d.span()))
        .collect()
}

/// Markdown documentation of an action.
pub fn action_doc(spec: &ActionSpec) -> String {
    let mut out = format!(
        "**{}**\n\n`{}`\n\n{}\n",
        spec.name,
        spec.signature(),
        spec.doc
    );
    if !spec.params.is_empty() {
        out.push_str("\n| parameter | type | |\n|---|---|---|\n");
        for p in &spec.params {
            let required = if p.required { " (required)" } else { "" };
            let _ = writeln!(
                out,
                "| `{}`{required} | `{}` | {} |",
                p.name,
                p.ty.describe(),
                p.doc
            );
        }
    }
    let _ = writeln!(out, "\nOutput: `{}`", spec.output.describe());
    out
}

fn markdown(value: String) -> Hover {
    Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value,
        }),
        range: None,
    }
}

/// What is under the cursor: an action, a reference, a step id.
pub fn hover(doc: &Document, compiler: &Compiler, position: Position) -> Option<Hover> {
    let offset = doc.lines.offset(&doc.text, position);
    let analysis = doc.analysis.as_ref()?;
    let index = analysis.index.as_ref()?;
    if let Some(step) = index.steps.iter().find(|s| {
        s.action
            .as_ref()
            .is_some_and(|(_, span)| (span.start as usize) <= offset && offset <= span.end as usize)
    }) {
        let (name, _) = step.action.as_ref()?;
        return compiler
            .catalog()
            .get(name)
            .map(|spec| markdown(action_doc(spec)));
    }
    if let Some(reference) = index.reference_at(offset) {
        return Some(markdown(describe_reference(reference, doc, compiler)));
    }
    let id = index.id_at(offset)?;
    let step = index.step(id)?;
    let what = step
        .action
        .as_ref()
        .map_or_else(|| step.kind.to_owned(), |(a, _)| format!("action `{a}`"));
    let mut text = format!("**step `{id}`**: {what}");
    if !step.parents.is_empty() {
        let _ = write!(text, ", inside `{}`", step.parents.join("` › `"));
    }
    Some(markdown(text))
}

fn describe_reference(
    r: &opcode_compiler::ast::Reference,
    doc: &Document,
    compiler: &Compiler,
) -> String {
    let rendered = r.render();
    let key = |i: usize| match r.segments.get(i).map(|s| &s.value) {
        Some(Segment::Key(k)) => Some(k.as_str()),
        _ => None,
    };
    let body = match r.namespace.value.as_str() {
        "steps" => {
            let id = key(0).unwrap_or_default();
            match doc.index().and_then(|i| i.step(id)) {
                Some(step) => match &step.action {
                    Some((action, _)) => {
                        let output = compiler
                            .catalog()
                            .get(action)
                            .map_or_else(|| "unknown".to_owned(), |s| s.output.describe());
                        format!("the output of step `{id}` (`{action}`), shaped `{output}`")
                    }
                    None => format!("the output of the {} step `{id}`", step.kind),
                },
                None => format!("no step is named `{id}`"),
            }
        }
        "inputs" => {
            let name = key(0).unwrap_or_default();
            let inputs = doc
                .analysis
                .as_ref()
                .map(|a| a.inputs.as_slice())
                .unwrap_or_default();
            match inputs.iter().find(|(n, _)| n == name) {
                Some((_, schema)) => format!("the input `{name}`: `{schema}`"),
                None => format!("the input `{name}` (not declared: null unless the run passes it)"),
            }
        }
        "secrets" => format!(
            "the secret `{}`, resolved from the vault when the action is dispatched, never stored",
            key(0).unwrap_or_default()
        ),
        other => NAMESPACES.iter().find(|(n, _)| *n == other).map_or_else(
            || format!("`{other}` is not a namespace"),
            |(_, d)| (*d).to_owned(),
        ),
    };
    format!("`{rendered}`: {body}")
}

/// Completions at a position, from what precedes it on its line.
pub fn completion(doc: &Document, compiler: &Compiler, position: Position) -> Vec<CompletionItem> {
    let offset = doc.lines.offset(&doc.text, position);
    let line_start = doc.text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let before = &doc.text[line_start..offset];
    let index = doc.index();
    let item = |label: &str, kind, detail: &str| CompletionItem {
        label: label.to_owned(),
        kind: Some(kind),
        detail: Some(detail.to_owned()),
        ..CompletionItem::default()
    };
    // `steps.` and `inputs.` (in a reference or in CEL), then namespaces.
    let word_start = before
        .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-' || c == '.'))
        .map_or(0, |i| i + 1);
    let word = &before[word_start..];
    if word
        .strip_prefix("steps.")
        .is_some_and(|p| !p.contains('.'))
    {
        return index
            .map(|i| {
                i.steps
                    .iter()
                    .map(|s| item(&s.id, CompletionItemKind::REFERENCE, s.kind))
                    .collect()
            })
            .unwrap_or_default();
    }
    if word.starts_with("inputs.") && !word["inputs.".len()..].contains('.') {
        let inputs = doc
            .analysis
            .as_ref()
            .map(|a| a.inputs.clone())
            .unwrap_or_default();
        return inputs
            .iter()
            .map(|(name, schema)| item(name, CompletionItemKind::VARIABLE, &schema.to_string()))
            .collect();
    }
    if let Some(open) = before.rfind("${{")
        && !before[open..].contains("}}")
        && !word.contains('.')
    {
        return NAMESPACES
            .iter()
            .map(|(n, d)| item(n, CompletionItemKind::MODULE, d))
            .collect();
    }
    let actions = || -> Vec<CompletionItem> {
        compiler
            .catalog()
            .iter()
            .map(|s| CompletionItem {
                documentation: Some(lsp::Documentation::MarkupContent(MarkupContent {
                    kind: MarkupKind::Markdown,
                    value: action_doc(s),
                })),
                ..item(&s.name, CompletionItemKind::FUNCTION, &s.signature())
            })
            .collect()
    };
    let wants_action = match doc.syntax {
        Syntax::Json => typing_json_action(before),
        Syntax::Opc => {
            let words: Vec<&str> = before.split_whitespace().collect();
            let typing_head = words.len() == 3 && !before.ends_with(' ');
            words.first() == Some(&"step")
                && ((words.len() == 2 && before.ends_with(' ')) || typing_head)
        }
    };
    if wants_action {
        let mut items = actions();
        if doc.syntax == Syntax::Opc {
            for kind in opcode_compiler::syntax::opc::tree::FLOW_TYPES {
                items.push(item(kind, CompletionItemKind::KEYWORD, "flow step type"));
            }
        }
        return items;
    }
    // Inside an action's params: its parameters.
    let offset = doc.index_offset(offset);
    if let Some(index) = index
        && let Some(step) = index.step_at(offset)
        && let (Some((action, _)), Some(params)) = (&step.action, step.params)
        && (params.start as usize) < offset
        && offset <= params.end as usize
        && let Some(spec) = compiler.catalog().get(action)
    {
        return spec
            .params
            .iter()
            .map(|p| {
                let insert = match doc.syntax {
                    Syntax::Json => format!("\"{}\": ", p.name),
                    Syntax::Opc => format!("{}: ", p.name),
                };
                CompletionItem {
                    insert_text: Some(insert),
                    documentation: Some(lsp::Documentation::String(p.doc.clone())),
                    ..item(&p.name, CompletionItemKind::PROPERTY, &p.ty.describe())
                }
            })
            .collect();
    }
    Vec::new()
}

/// Is the cursor inside the string value of an `"action"` key?
fn typing_json_action(before: &str) -> bool {
    before.rfind("\"action\"").is_some_and(|i| {
        before[i + 8..]
            .trim_start()
            .strip_prefix(':')
            .map(str::trim_start)
            .and_then(|rest| rest.strip_prefix('"'))
            .is_some_and(|rest| !rest.contains('"'))
    })
}

/// Where the step id under the cursor is defined.
pub fn definition(doc: &Document, uri: &Uri, position: Position) -> Option<Location> {
    let index = doc.index()?;
    let id = index.id_at(doc.lines.offset(&doc.text, position))?;
    let step = index.step(id)?;
    Some(Location::new(
        uri.clone(),
        doc.lines.range(&doc.text, step.id_span),
    ))
}

/// Every use of the step id under the cursor (and its definition, if asked).
pub fn references(
    doc: &Document,
    uri: &Uri,
    position: Position,
    declaration: bool,
) -> Vec<Location> {
    let Some(index) = doc.index() else {
        return Vec::new();
    };
    let Some(id) = index.id_at(doc.lines.offset(&doc.text, position)) else {
        return Vec::new();
    };
    let defined = index.step(id).filter(|_| declaration).map(|s| s.id_span);
    defined
        .into_iter()
        .chain(
            index
                .uses
                .iter()
                .filter(|(u, _)| u == id)
                .map(|(_, span)| *span),
        )
        .map(|span| Location::new(uri.clone(), doc.lines.range(&doc.text, span)))
        .collect()
}

/// The steps as an outline, nested as in the workflow.
pub fn symbols(doc: &Document) -> Vec<DocumentSymbol> {
    let Some(index) = doc.index() else {
        return Vec::new();
    };
    children(doc, index, &[])
}

/// The whole document in its canonical layout, if it parses.
pub fn formatting(doc: &Document) -> Option<Vec<TextEdit>> {
    let formatted = match doc.syntax {
        Syntax::Opc => opcode_compiler::syntax::opc::format(&doc.text).ok()?,
        Syntax::Json => {
            let value: serde_json::Value = serde_json::from_str(&doc.text).ok()?;
            let mut text = serde_json::to_string_pretty(&value).ok()?;
            text.push('\n');
            text
        }
    };
    if formatted == doc.text {
        return Some(Vec::new());
    }
    let whole = lsp::Range::new(
        Position::new(0, 0),
        doc.lines.position(&doc.text, doc.text.len()),
    );
    Some(vec![TextEdit::new(whole, formatted)])
}

/// The symbols of the steps directly under `parents`.
#[allow(deprecated, reason = "DocumentSymbol::deprecated must still be given")]
fn children(
    doc: &Document,
    index: &opcode_compiler::index::Index,
    parents: &[String],
) -> Vec<DocumentSymbol> {
    index
        .steps
        .iter()
        .filter(|s| s.parents == parents)
        .map(|s| {
            let mut inner = parents.to_vec();
            inner.push(s.id.clone());
            let nested = children(doc, index, &inner);
            DocumentSymbol {
                name: s.id.clone(),
                detail: Some(
                    s.action
                        .as_ref()
                        .map_or_else(|| s.kind.to_owned(), |(a, _)| a.clone()),
                ),
                kind: if s.action.is_some() {
                    SymbolKind::FUNCTION
                } else {
                    SymbolKind::NAMESPACE
                },
                tags: None,
                deprecated: None,
                range: doc.lines.range(&doc.text, s.span),
                selection_range: doc.lines.range(&doc.text, s.id_span),
                children: (!nested.is_empty()).then_some(nested),
            }
        })
        .collect()
}
