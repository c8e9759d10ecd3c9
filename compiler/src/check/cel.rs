//! CEL expressions: parse every one with the `cel` crate and find what it
//! refers to.
//!
//! A parse error becomes `E0030` at the exact character, with help for the
//! two mistakes people coming from opcode make: writing `loop.item` (`loop`
//! is reserved in CEL; use `iter.item`) and writing `${{…}}` inside CEL. The
//! references found (`steps['x']`, `steps.x`, `inputs.y`, `iter`) are checked
//! by `check::references` like interpolation references.

use rustc_hash::FxHashMap as HashMap;
use std::fmt::Write;

use cel::common::ast::operators::INDEX;
use cel::common::ast::{Expr as CelExpr, IdedExpr, LiteralValue};

use crate::ast::Expr;
use crate::diagnostics::codes::{E0030, E0037, E0053};
use crate::diagnostics::{Diagnostic, Fix, PatchOp, did_you_mean};
use crate::source::Span;
use crate::syntax::template::{self, Piece, Segment};

/// What a CEL expression refers to.
#[derive(Debug, Default)]
pub struct CelRefs {
    /// `steps['x']` / `steps.x`: the id and where it is written.
    pub steps: Vec<(String, Span)>,
    /// `steps.x.field` / `steps['x']['field']`: the id, the field read
    /// from its output, and where `.field` is written (when it is found).
    pub step_fields: Vec<(String, String, Option<Span>)>,
    /// `steps` used as a whole or indexed dynamically.
    pub dynamic_steps: bool,
    /// Where `iter` is used, if anywhere.
    pub iter: Option<Span>,
    /// `inputs.x` / `inputs['x']`.
    pub inputs: Vec<(String, Span)>,
    /// Where `secrets` is used, if anywhere (never allowed in CEL).
    pub secrets: Option<Span>,
    /// The functions it calls: the name, whether on a receiver, and
    /// where the name is written (when it is found).
    pub calls: Vec<(String, bool, Option<Span>)>,
    /// The namespaces besides `steps` it reads.
    pub reads: opcode_vm::program::Reads,
    /// Names read at the top that are no variable, and where.
    pub unknown: Vec<(String, Span)>,
}

/// Parses `expr`; reports errors; returns its references when it parses.
///
/// Parsing uses cel's Pratt parser: it builds the same AST as the ANTLR one
/// at a sixteenth of the cost (4 µs against 60 µs), which keeps checking a
/// 1,000-step workflow under 5 ms. It gives no node offsets, so references are
/// located in the text (see [`locate`]).
pub fn analyze(expr: &Expr, src: &str, pointer: &str) -> Result<CelRefs, Diagnostic> {
    if let Err(limit) = opcode_vm::limits::check_cel(&expr.source) {
        return Err(too_complex(expr, src, pointer, "CEL expression", &limit));
    }
    match cel::parser::PrattParser::default().parse(&expr.source) {
        Ok(ast) => {
            let mut found = Vec::new();
            walk(&ast, &mut found, &mut Vec::new());
            guard_tested_inputs(&mut found);
            Ok(locate(expr, src, found))
        }
        Err(errors) => {
            let first = errors.errors.first();
            let (line, column) = first.map_or((1, 1), |e| e.pos);
            let offset = line_col_to_byte(&expr.source, line, column);
            let span = expr.origin.file_span(src, one_char(&expr.source, offset));
            let message = first.map_or_else(
                || "invalid expression".to_owned(),
                |e| plain_message(&e.msg),
            );
            Err(parse_error(expr, src, span, &message, pointer))
        }
    }
}

/// A reference found in the AST, before it is located in the text.
enum Found {
    Step(String),
    /// A field read from the output of the step just found.
    StepField(String),
    /// A function called by name (on a receiver when `true`).
    Call(String, bool),
    Input(String),
    /// `has(inputs.x)`: the input is tested, so its reads are guarded.
    TestedInput(String),
    Iter,
    Secrets,
    DynamicSteps,
    /// Another variable read at the top (`inputs`, `workflow`, `context`…).
    Name(String),
    /// A name read at the top that is no variable.
    Unknown(String),
}

/// Reads of an input the expression tests with `has(inputs.x)` are
/// guarded: not an undeclared input's read that may fail (W0004), only
/// reads of `inputs`.
fn guard_tested_inputs(found: &mut [Found]) {
    let tested: Vec<String> = found
        .iter()
        .filter_map(|f| match f {
            Found::TestedInput(name) => Some(name.clone()),
            _ => None,
        })
        .collect();
    for f in found.iter_mut() {
        if matches!(f, Found::Input(name) if tested.contains(name)) {
            *f = Found::TestedInput(String::new());
        }
    }
}

/// The variables a CEL expression has besides `steps`, `iter` and `secrets`.
const VARIABLES: &[&str] = &["inputs", "workflow", "context", "data"];

/// Gives each found reference the span of its occurrence in the source: the
/// k-th reference to `steps['x']` gets the k-th place `steps['x']` or
/// `steps.x` is written.
fn locate(expr: &Expr, src: &str, found: Vec<Found>) -> CelRefs {
    let mut refs = CelRefs {
        reads: opcode_vm::program::Reads::NONE,
        ..CelRefs::default()
    };
    let mut used: HashMap<(&str, String), usize> = HashMap::default();
    let whole = 0..expr.source.len();
    let mut place = |root: &'static str, key: &str| -> std::ops::Range<usize> {
        let nth = used.entry((root, key.to_owned())).or_insert(0);
        let range = occurrences(&expr.source, root, Some(key))
            .into_iter()
            .nth(*nth)
            .unwrap_or_else(|| whole.clone());
        *nth += 1;
        range
    };
    // Where the last step reference found ends, for the field read after it.
    let mut step_end = None;
    let mut called: HashMap<String, usize> = HashMap::default();
    for item in found {
        match item {
            Found::Step(id) => {
                let range = place("steps", &id);
                step_end = (range != whole).then_some(range.end);
                refs.steps.push((id, expr.origin.file_span(src, range)));
            }
            Found::StepField(field) => {
                let id = refs
                    .steps
                    .last()
                    .map(|(id, _)| id.clone())
                    .unwrap_or_default();
                let span = step_end
                    .and_then(|end| field_after(&expr.source, end, &field))
                    .map(|range| expr.origin.file_span(src, range));
                refs.step_fields.push((id, field, span));
            }
            Found::Input(name) => {
                refs.reads.inputs = true;
                let span = expr.origin.file_span(src, place("inputs", &name));
                refs.inputs.push((name, span));
            }
            Found::TestedInput(_) => refs.reads.inputs = true,
            Found::Name(name) => match name.as_str() {
                "inputs" => refs.reads.inputs = true,
                "workflow" => refs.reads.workflow = true,
                "context" => refs.reads.context = true,
                _ => {}
            },
            Found::Iter | Found::Secrets => {
                let name = if matches!(item, Found::Iter) {
                    "iter"
                } else {
                    "secrets"
                };
                let range = occurrences(&expr.source, name, None)
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| whole.clone());
                let span = expr.origin.file_span(src, range);
                if name == "iter" {
                    refs.reads.iter = true;
                    refs.iter.get_or_insert(span);
                } else {
                    refs.secrets.get_or_insert(span);
                }
            }
            Found::DynamicSteps => refs.dynamic_steps = true,
            Found::Unknown(name) => {
                let range = occurrences(&expr.source, &name, None)
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| whole.clone());
                refs.unknown.push((name, expr.origin.file_span(src, range)));
            }
            Found::Call(name, member) => {
                let nth = called.entry(name.clone()).or_insert(0);
                let span = call_sites(&expr.source, &name)
                    .into_iter()
                    .nth(*nth)
                    .map(|range| expr.origin.file_span(src, range));
                *nth += 1;
                refs.calls.push((name, member, span));
            }
        }
    }
    refs
}

/// Where `name(` is written in `source` (a name, not the end of a longer
/// one), in order: the ranges of the names.
fn call_sites(source: &str, name: &str) -> Vec<std::ops::Range<usize>> {
    let bytes = source.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    source
        .match_indices(name)
        .map(|(start, _)| start..start + name.len())
        .filter(|r| {
            let before = r.start.checked_sub(1).map(|i| bytes[i]);
            let after = source[r.end..].trim_start();
            !before.is_some_and(is_ident) && after.starts_with('(')
        })
        .collect()
}

/// Diagnostics for the functions `refs` calls that the engine does not
/// know (E0030): the CEL name where another language's is used, else the
/// closest known one.
pub fn unknown_functions(refs: &CelRefs, pointer: &str) -> Vec<Diagnostic> {
    use super::cel_functions::{MACROS, OTHER_SPELLINGS, SUGGESTIONS, UNAVAILABLE, known};
    let mut out = Vec::new();
    for (name, member, span) in &refs.calls {
        let Some(span) = *span else { continue };
        if known(name) {
            continue;
        }
        let mut d = Diagnostic::error(E0030, span, format!("CEL has no function `{name}`"))
            .with_pointer(pointer);
        if UNAVAILABLE.contains(&name.as_str()) {
            d = d.with_help(
                "CEL's time types are not built into this engine: `timestamp()` and `duration()` are refused; pass times as RFC 3339 text (it compares in order) or as numbers",
            );
        } else if let Some((_, ours, renamed)) =
            OTHER_SPELLINGS.iter().find(|(theirs, ..)| theirs == name)
        {
            d = d.with_help(cel_spelling(ours, *member));
            if *renamed && *ours != "!" {
                d = d.with_fix(Fix::replace(
                    format!("replace with `{ours}`"),
                    span,
                    *ours,
                    None,
                ));
            }
        } else {
            let names: Vec<&str> = SUGGESTIONS
                .iter()
                .copied()
                .filter(|n| MACROS.contains(n) || known(n))
                .collect();
            d = match did_you_mean(name, &names) {
                Some(close) => {
                    d.with_help(format!("did you mean `{close}`?"))
                        .with_fix(Fix::replace(
                            format!("replace with `{close}`"),
                            span,
                            close,
                            None,
                        ))
                }
                None => d.with_help(format!("CEL's functions include {}", names.join(", "))),
            };
        }
        out.push(d);
    }
    out
}

/// Diagnostics for the names `refs` reads that are no variable (E0030),
/// with the closest variable as a fix.
pub fn unknown_variables(refs: &CelRefs, pointer: &str) -> Vec<Diagnostic> {
    let names = ["steps", "inputs", "workflow", "context", "iter", "data"];
    refs.unknown
        .iter()
        .map(|(name, span)| {
            let d = Diagnostic::error(E0030, *span, format!("CEL has no variable `{name}`"))
                .with_pointer(pointer);
            match did_you_mean(name, &names) {
                Some(close) => {
                    d.with_help(format!("did you mean `{close}`?"))
                        .with_fix(Fix::replace(
                            format!("replace with `{close}`"),
                            *span,
                            close,
                            None,
                        ))
                }
                None => d.with_help(format!(
                    "CEL's variables here are {}; an input is `inputs.{name}`",
                    names.join(", ")
                )),
            }
        })
        .collect()
}

/// How CEL writes what `ours` does.
fn cel_spelling(ours: &str, member: bool) -> String {
    match ours {
        "!" => "CEL negates with `!`: `!(x)`".to_owned(),
        "upperAscii" | "lowerAscii" | "string" if !member => {
            format!("CEL calls it on the value: `x.{ours}()`")
        }
        _ => format!("CEL's name for it is `{ours}`"),
    }
}

/// Where `.field` (or `['field']`, `["field"]`) is written right at `at`
/// in `source`, spaces allowed.
fn field_after(source: &str, at: usize, field: &str) -> Option<std::ops::Range<usize>> {
    let rest = source.get(at..)?;
    let start = at + (rest.len() - rest.trim_start().len());
    let written = source.get(start..)?;
    let dotted = written.strip_prefix('.').map(str::trim_start);
    if let Some(after_dot) = dotted
        && after_dot.starts_with(field)
        && !after_dot[field.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
    {
        let end = start + (written.len() - after_dot.len()) + field.len();
        return Some(start..end);
    }
    ["'", "\""].iter().find_map(|quote| {
        let pattern = format!("[{quote}{field}{quote}]");
        written
            .starts_with(&pattern)
            .then(|| start..start + pattern.len())
    })
}

/// Where `root.key`, `root['key']` or `root["key"]` (or `root` alone when
/// `key` is `None`) is written in `source`, in order.
fn occurrences(source: &str, root: &str, key: Option<&str>) -> Vec<std::ops::Range<usize>> {
    let bytes = source.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let skip_space = |mut i: usize| {
        while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        i
    };
    let mut out = Vec::new();
    for (start, _) in source.match_indices(root) {
        let before = start.checked_sub(1).map(|i| bytes[i]);
        if before.is_some_and(|b| is_ident(b) || b == b'.') {
            continue;
        }
        let after_root = start + root.len();
        if bytes.get(after_root).copied().is_some_and(is_ident) {
            continue;
        }
        let Some(key) = key else {
            out.push(start..after_root);
            continue;
        };
        let i = skip_space(after_root);
        let end = match bytes.get(i) {
            Some(b'.') => {
                let k = skip_space(i + 1);
                let end = k + key.len();
                (source.get(k..end) == Some(key) && !bytes.get(end).copied().is_some_and(is_ident))
                    .then_some(end)
            }
            Some(b'[') => {
                let q = skip_space(i + 1);
                match bytes.get(q) {
                    Some(&quote @ (b'\'' | b'"')) => {
                        let k = q + 1;
                        let end = k + key.len();
                        if source.get(k..end) == Some(key) && bytes.get(end) == Some(&quote) {
                            let close = skip_space(end + 1);
                            (bytes.get(close) == Some(&b']')).then_some(close + 1)
                        } else {
                            None
                        }
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some(end) = end {
            out.push(start..end);
        }
    }
    out
}

/// E0037 for `secrets` in a CEL expression, at `span`.
pub fn secrets_refused(span: Span, pointer: &str) -> Diagnostic {
    Diagnostic::error(E0037, span, "secrets cannot be used in a CEL expression")
        .with_help("a secret is resolved only into an action's params, as `${{secrets.NAME}}`; an expression never sees its value")
        .with_pointer(pointer)
}

/// E0053 for an expression past a bound of [`opcode_vm::limits`], at the
/// place it goes past it.
pub fn too_complex(
    expr: &Expr,
    src: &str,
    pointer: &str,
    what: &str,
    limit: &opcode_vm::limits::TooComplex,
) -> Diagnostic {
    let at = match limit {
        opcode_vm::limits::TooComplex::Nesting { at, .. } => *at,
        opcode_vm::limits::TooComplex::Size { .. } => 0,
    };
    let span = expr.origin.file_span(src, one_char(&expr.source, at));
    Diagnostic::error(E0053, span, format!("the {what} {limit}"))
        .with_secondary(expr.span, "in this expression")
        .with_help("split it into smaller ones (steps of their own, or `expr.eval` results), and pass large data as inputs rather than writing it out")
        .with_pointer(pointer)
}

fn parse_error(expr: &Expr, src: &str, span: Span, message: &str, pointer: &str) -> Diagnostic {
    let mut d = Diagnostic::error(E0030, span, format!("invalid CEL expression: {message}"))
        .with_secondary(expr.span, "in this expression")
        .with_pointer(pointer);
    if !template::is_plain(&expr.source) {
        d = d.with_help("CEL fields take an expression, not `${{…}}`: write `steps['fetch'].status_code`, `inputs.name`");
        if let Some(rewritten) = rewrite_interpolation(&expr.source) {
            d = d.with_fix(rewrite(
                expr,
                pointer,
                format!("rewrite as `{rewritten}`"),
                rewritten,
            ));
        }
    } else if let Some(rewritten) = word_operators(&expr.source) {
        d = d
            .with_help("CEL writes `&&`, `||` and `!` for and, or and not")
            .with_fix(rewrite(
                expr,
                pointer,
                format!("rewrite as `{rewritten}`"),
                rewritten,
            ));
    } else if let Some(at) = lone_equals(&expr.source) {
        let mut rewritten = expr.source.clone();
        rewritten.replace_range(at..=at, "==");
        d = d
            .with_help("CEL compares with `==`; a single `=` assigns nothing")
            .with_fix(rewrite(
                expr,
                pointer,
                "compare with `==`".into(),
                rewritten,
            ));
    } else if expr.source.contains("??") {
        d = d.with_help(
            "CEL has no `??`: write `has(x.f) ? x.f : fallback`, or `x.?f.orValue(fallback)`",
        );
    } else if mentions_loop(&expr.source) {
        let rewritten = expr.source.replace("loop.", "iter.");
        d = d
            .with_help("`loop` is a reserved word in CEL: write `iter.item` and `iter.index`")
            .with_fix(rewrite(
                expr,
                pointer,
                "replace `loop.` with `iter.`".into(),
                rewritten,
            ));
    }
    let _ = src;
    d
}

/// The one `=` of `source` that is no part of `==`, `!=`, `<=`, `>=`
/// (outside quotes), if there is exactly one.
fn lone_equals(source: &str) -> Option<usize> {
    let bytes = source.as_bytes();
    let mut quote: Option<u8> = None;
    let mut found = Vec::new();
    for (i, &b) in bytes.iter().enumerate() {
        match quote {
            Some(q) if b == q && bytes.get(i.wrapping_sub(1)) != Some(&b'\\') => quote = None,
            None if b == b'\'' || b == b'"' => quote = Some(b),
            None if b == b'=' => {
                let before = i.checked_sub(1).map(|j| bytes[j]);
                let after = bytes.get(i + 1).copied();
                if !matches!(before, Some(b'=' | b'!' | b'<' | b'>')) && after != Some(b'=') {
                    found.push(i);
                }
            }
            Some(_) | None => {}
        }
    }
    (found.len() == 1).then(|| found[0])
}

/// A fix writing the whole expression (a JSON string at `pointer`) as
/// `rewritten`.
fn rewrite(expr: &Expr, pointer: &str, message: String, rewritten: String) -> Fix {
    Fix::replace(
        message,
        expr.span,
        serde_json::to_string(&rewritten).unwrap_or_default(),
        Some(PatchOp::Replace {
            path: pointer.to_owned(),
            value: rewritten.into(),
        }),
    )
}

/// Shortens the parser's messages: `mismatched input 'x' expecting {…}` → "unexpected `x`".
fn plain_message(message: &str) -> String {
    let message = message.trim_start_matches("Syntax error: ");
    for prefix in [
        "mismatched input '",
        "extraneous input '",
        "token recognition error at: '",
    ] {
        if let Some(rest) = message.strip_prefix(prefix)
            && let Some((token, _)) = rest.split_once('\'')
        {
            return if token == "<EOF>" {
                "the expression ends too early".to_owned()
            } else {
                format!("unexpected `{token}`")
            };
        }
    }
    if let Some(rest) = message.strip_prefix("no viable alternative at input '")
        && let Some((input, _)) = rest.rsplit_once('\'')
    {
        return format!("cannot parse `{input}`");
    }
    message.to_owned()
}

fn mentions_loop(source: &str) -> bool {
    source.match_indices("loop.").any(|(i, _)| {
        i == 0
            || !source.as_bytes()[i - 1].is_ascii_alphanumeric() && source.as_bytes()[i - 1] != b'_'
    })
}

/// `${{steps.x.output.y}} == 1` → `steps['x'].y == 1`, when every token is a plain reference.
pub fn rewrite_interpolation(source: &str) -> Option<String> {
    let pieces = template::parse_template(source).ok()?;
    let mut out = String::new();
    for piece in pieces {
        match piece {
            Piece::Text(t) => out.push_str(&t),
            Piece::Ref(r, _) => out.push_str(&cel_path(&r.namespace, &r.segments)?),
        }
    }
    Some(out.trim().to_owned())
}

/// `source` with the words `and`, `or` and `not` (outside string literals)
/// written as CEL's `&&`, `||` and `!`; `None` when it has none.
fn word_operators(source: &str) -> Option<String> {
    let mut out = String::with_capacity(source.len());
    let mut quote: Option<char> = None;
    let mut changed = false;
    let mut chars = source.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if let Some(q) = quote {
            out.push(c);
            if c == '\\' {
                if let Some((_, escaped)) = chars.next() {
                    out.push(escaped);
                }
            } else if c == q {
                quote = None;
            }
            continue;
        }
        if c == '\'' || c == '"' {
            quote = Some(c);
            out.push(c);
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if d.is_ascii_alphanumeric() || d == '_' {
                    end = j + d.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            let word = &source[start..end];
            let after_dot = source[..start].trim_end().ends_with('.');
            let replacement = match word {
                "and" if !after_dot => Some("&&"),
                "or" if !after_dot => Some("||"),
                "not" if !after_dot => Some("!"),
                _ => None,
            };
            match replacement {
                Some("!") => {
                    out.push('!');
                    while chars.peek().is_some_and(|&(_, d)| d == ' ') {
                        chars.next();
                    }
                    changed = true;
                }
                Some(op) => {
                    out.push_str(op);
                    changed = true;
                }
                None => out.push_str(word),
            }
            continue;
        }
        out.push(c);
    }
    changed.then_some(out)
}

/// The CEL spelling of a reference path.
pub fn cel_path(namespace: &str, segments: &[(Segment, std::ops::Range<usize>)]) -> Option<String> {
    let mut rest = segments.iter().map(|(s, _)| s);
    let mut out = match namespace {
        "steps" => {
            let Some(Segment::Key(id)) = rest.next() else {
                return None;
            };
            let mut rest_peek = rest.clone();
            if rest_peek.next() == Some(&Segment::Key("output".into())) {
                rest.next();
            }
            format!("steps['{id}']")
        }
        "loop" => "iter".to_owned(),
        "secrets" => return None,
        other => other.to_owned(),
    };
    for segment in rest {
        match segment {
            Segment::Key(k) if is_cel_ident(k) => {
                out.push('.');
                out.push_str(k);
            }
            Segment::Key(k) => {
                let _ = write!(out, "['{}']", k.replace('\'', "\\'"));
            }
            Segment::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
        }
    }
    Some(out)
}

fn is_cel_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The step id when `e` is `steps.<id>` or `steps['<id>']`.
pub(crate) fn step_of(e: &IdedExpr) -> Option<String> {
    match &e.expr {
        CelExpr::Select(select) => match &select.operand.expr {
            CelExpr::Ident(root) if root == "steps" => Some(select.field.clone()),
            _ => None,
        },
        CelExpr::Call(call) if call.func_name == INDEX => match call.args.as_slice() {
            [
                IdedExpr {
                    expr: CelExpr::Ident(root),
                    ..
                },
                IdedExpr {
                    expr: CelExpr::Literal(LiteralValue::String(key)),
                    ..
                },
            ] if root == "steps" => Some(key.inner().to_owned()),
            _ => None,
        },
        _ => None,
    }
}

/// Finds the references of `e`; `bound` holds the variables of the
/// comprehensions around it.
fn walk(e: &IdedExpr, found: &mut Vec<Found>, bound: &mut Vec<String>) {
    match &e.expr {
        CelExpr::Ident(name) => match name.as_str() {
            "steps" => found.push(Found::DynamicSteps),
            "iter" => found.push(Found::Iter),
            "secrets" => found.push(Found::Secrets),
            other if bound.iter().any(|b| b == other) => {}
            other if VARIABLES.contains(&other) => found.push(Found::Name(other.to_owned())),
            other => found.push(Found::Unknown(other.to_owned())),
        },
        CelExpr::Select(select) => {
            if let Some(id) = step_of(&select.operand) {
                found.push(Found::Step(id));
                return found.push(Found::StepField(select.field.clone()));
            }
            if let CelExpr::Ident(root) = &select.operand.expr {
                match root.as_str() {
                    "steps" => return found.push(Found::Step(select.field.clone())),
                    "inputs" if select.test => {
                        return found.push(Found::TestedInput(select.field.clone()));
                    }
                    "inputs" => return found.push(Found::Input(select.field.clone())),
                    _ => {}
                }
            }
            walk(&select.operand, found, bound);
        }
        CelExpr::Call(call) => {
            if call
                .func_name
                .starts_with(|c: char| c.is_ascii_alphabetic())
            {
                found.push(Found::Call(call.func_name.clone(), call.target.is_some()));
            }
            if call.func_name == INDEX
                && let [target, key] = call.args.as_slice()
                && let CelExpr::Literal(LiteralValue::String(key)) = &key.expr
                && let Some(id) = step_of(target)
            {
                found.push(Found::Step(id));
                return found.push(Found::StepField(key.inner().to_owned()));
            }
            if call.func_name == INDEX
                && let [
                    target,
                    IdedExpr {
                        expr: CelExpr::Literal(LiteralValue::String(key)),
                        ..
                    },
                ] = call.args.as_slice()
                && let CelExpr::Ident(root) = &target.expr
            {
                match root.as_str() {
                    "steps" => return found.push(Found::Step(key.inner().to_owned())),
                    "inputs" => return found.push(Found::Input(key.inner().to_owned())),
                    _ => {}
                }
            }
            if let Some(target) = &call.target {
                walk(target, found, bound);
            }
            // A misspelled macro (`xs.exsts(x, x > 1)`) is reported as a
            // function; its variable is still its variable.
            let outer = bound.len();
            if let [first, _, ..] = call.args.as_slice()
                && let CelExpr::Ident(var) = &first.expr
                && did_you_mean(&call.func_name, super::cel_functions::MACROS).is_some()
            {
                bound.push(var.clone());
            }
            for arg in &call.args {
                walk(arg, found, bound);
            }
            bound.truncate(outer);
        }
        CelExpr::Comprehension(c) => {
            walk(&c.iter_range, found, bound);
            walk(&c.accu_init, found, bound);
            let outer = bound.len();
            bound.extend(
                [Some(&c.iter_var), c.iter_var2.as_ref(), Some(&c.accu_var)]
                    .into_iter()
                    .flatten()
                    .cloned(),
            );
            for part in [&c.loop_cond, &c.loop_step, &c.result] {
                walk(part, found, bound);
            }
            bound.truncate(outer);
        }
        CelExpr::List(list) => {
            for item in &list.elements {
                walk(item, found, bound);
            }
        }
        CelExpr::Map(map) => {
            for entry in &map.entries {
                if let cel::common::ast::EntryExpr::MapEntry(m) = &entry.expr {
                    walk(&m.key, found, bound);
                    walk(&m.value, found, bound);
                }
            }
        }
        CelExpr::Struct(s) => {
            for entry in &s.entries {
                if let cel::common::ast::EntryExpr::StructField(f) = &entry.expr {
                    walk(&f.value, found, bound);
                }
            }
        }
        CelExpr::Literal(_) | CelExpr::Unspecified => {}
    }
}

/// The bytes of the character of `s` at byte `at` (empty at the end; an
/// offset inside a character moves back to its start).
pub(crate) fn one_char(s: &str, at: usize) -> std::ops::Range<usize> {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at..at + s[at..].chars().next().map_or(0, char::len_utf8)
}

/// Byte offset of the `chars`-th character of `s` (clamped).
fn char_to_byte(s: &str, chars: usize) -> usize {
    s.char_indices().nth(chars).map_or(s.len(), |(i, _)| i)
}

/// Byte offset of a 1-based (line, column in characters) position in `s`.
pub(crate) fn line_col_to_byte(s: &str, line: isize, column: isize) -> usize {
    let line = usize::try_from(line.max(1)).unwrap_or(1);
    let column = usize::try_from(column.max(1)).unwrap_or(1);
    let mut start = 0;
    for (i, l) in s.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            return start + char_to_byte(l, column - 1).min(l.len());
        }
        start += l.len();
    }
    s.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::TextOrigin;

    fn expr(source: &str) -> Expr {
        Expr {
            source: source.to_owned(),
            span: Span::new(0, source.len()),
            origin: TextOrigin::Verbatim(0),
        }
    }

    #[test]
    fn one_char_never_splits_a_character() {
        let s = "a\u{20d}b";
        assert_eq!(one_char(s, 0), 0..1);
        assert_eq!(one_char(s, 1), 1..3);
        assert_eq!(one_char(s, 2), 1..3);
        assert_eq!(one_char(s, 3), 3..4);
        assert_eq!(one_char(s, 9), 4..4);
    }

    #[test]
    fn finds_step_input_and_iter_references() {
        let e =
            expr("steps['fetch-a'].hash != steps.b.hash && inputs.x && iter.item in inputs['y-z']");
        let refs = analyze(&e, &e.source, "").unwrap();
        let ids: Vec<&str> = refs.steps.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["fetch-a", "b"]);
        let inputs: Vec<&str> = refs.inputs.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(inputs, ["x", "y-z"]);
        assert!(refs.iter.is_some());
        assert!(!refs.dynamic_steps);
        let (_, span) = &refs.steps[0];
        assert_eq!(&e.source[span.range()], "steps['fetch-a']");
    }

    #[test]
    fn dynamic_step_access_is_flagged() {
        let e = expr("size(steps) > 0");
        assert!(analyze(&e, &e.source, "").unwrap().dynamic_steps);
    }

    #[test]
    fn parse_errors_point_at_the_character() {
        let e = expr("inputs.a == ");
        let d = analyze(&e, &e.source, "/x").unwrap_err();
        assert_eq!(d.code.id, "E0030");
        assert_eq!(d.pointer.as_deref(), Some("/x"));
    }

    #[test]
    fn word_operators_get_cels_spelling() {
        assert_eq!(
            word_operators("a and not b or c == 'x and y'").as_deref(),
            Some("a && !b || c == 'x and y'")
        );
        assert_eq!(word_operators("band && x.or(1)"), None);
        let e = expr("inputs.a == 1 and inputs.b");
        let d = analyze(&e, &e.source, "").unwrap_err();
        assert_eq!(
            d.fix.unwrap().edits[0].replacement,
            "\"inputs.a == 1 && inputs.b\""
        );
    }

    #[test]
    fn loop_keyword_gets_a_fix() {
        let e = expr("loop.item == 'a'");
        let d = analyze(&e, &e.source, "").unwrap_err();
        assert!(d.help.unwrap().contains("iter.item"));
        assert_eq!(d.fix.unwrap().edits[0].replacement, "\"iter.item == 'a'\"");
    }

    #[test]
    fn interpolation_in_cel_gets_a_rewrite() {
        assert_eq!(
            rewrite_interpolation("${{steps.fetch.output.status_code}} == 200").as_deref(),
            Some("steps['fetch'].status_code == 200")
        );
        assert_eq!(
            rewrite_interpolation("${{ loop.item.name }}").as_deref(),
            Some("iter.item.name")
        );
    }
}
