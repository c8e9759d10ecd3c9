//! Action steps against the catalog: the action exists, required parameters
//! are present, values have the right JSON type (literal values, and
//! references whose type is known), unknown parameters are warned about,
//! and the code some actions carry (`expr.eval`'s CEL or Expr, `json.jq`'s
//! filter) parses.

use opcode_vm::catalog::{ActionSpec, Catalog, Ty};

use super::cel;
use super::expr_lang::{self, Dialect};
use super::jq;
use super::references::Resolver;
use crate::ast::{ActionStep, Expr, Step, TemplateKind, TextOrigin};
use crate::diagnostics::codes::{E0015, E0031, E0040, E0041, E0042, E0048, E0049, W0002};
use crate::diagnostics::{Diagnostic, Diagnostics, Fix, PatchOp, did_you_mean};
use crate::duration::parse_millis;
use crate::source::Span;
use crate::syntax::node::child_pointer;

use super::params::{Param, params_of};

/// Checks one action step.
pub fn check(
    step: &Step,
    action: &ActionStep,
    catalog: &Catalog,
    resolver: &Resolver<'_, '_>,
    src: &str,
    sink: &mut Diagnostics,
) {
    let Some(spec) = catalog.get(&action.action.value) else {
        unknown_action(step, action, catalog, src, sink);
        return;
    };
    let params_pointer = format!("{}/params", step.pointer);
    let params = params_of(action.params.as_ref());
    let missing: Vec<&opcode_vm::catalog::ParamSpec> = spec
        .params
        .iter()
        .filter(|p| p.required && !params.iter().any(|given| given.key == p.name))
        .collect();
    if !missing.is_empty() {
        let span = action
            .params
            .as_ref()
            .map_or(action.action.span, |t| t.span);
        let names: Vec<String> = missing.iter().map(|p| format!("`{}`", p.name)).collect();
        let plural = if missing.len() == 1 { "" } else { "s" };
        let help: Vec<String> = missing
            .iter()
            .map(|p| format!("{}: {}", p.name, p.doc))
            .collect();
        // No fix: a placeholder value would check clean and fail at run
        // time, and the value cannot be guessed.
        let d = Diagnostic::error(
            E0041,
            span,
            format!(
                "`{}` needs parameter{plural} {}",
                spec.name,
                names.join(", ")
            ),
        )
        .with_help(help.join("; "))
        .with_note(format!("signature: {}", spec.signature()))
        .with_pointer(params_pointer.clone());
        sink.push(d);
    }
    for given in &params {
        let pointer = child_pointer(&params_pointer, given.key);
        match spec.param(given.key) {
            Some(p) => check_type(spec, &p.name, &p.ty, given, resolver, &pointer, sink),
            None if spec.open_params => {}
            None => unknown_param(spec, given, &pointer, sink),
        }
    }
    match spec.name.as_str() {
        "expr.eval" => check_expr_eval(action, src, &params_pointer, sink),
        "json.jq" => check_jq_filter(&params, src, &params_pointer, sink),
        "assert.equals" => check_never_equal(&params, resolver, &params_pointer, sink),
        "assert.matches" => check_pattern(&params, src, &params_pointer, sink),
        name if name.starts_with("agent.") => {
            super::agent_budget::check(step, name, &params, &params_pointer, sink);
        }
        _ => {}
    }
}

/// A literal `pattern` too large or nested too deep for the regex engine's
/// bounds (E0053).
fn check_pattern(params: &[Param<'_>], src: &str, pointer: &str, sink: &mut Diagnostics) {
    let Some(given) = params.iter().find(|p| p.key == "pattern") else {
        return;
    };
    let Some(pattern) = given.literal().and_then(serde_json::Value::as_str) else {
        return;
    };
    if let Err(limit) = opcode_vm::limits::check_regex(pattern) {
        let expr = Expr {
            source: pattern.to_owned(),
            span: given.value.span,
            origin: TextOrigin::json_string(given.value.span, pattern),
        };
        let pointer = child_pointer(pointer, "pattern");
        sink.push(cel::too_complex(
            &expr,
            src,
            &pointer,
            "regular expression",
            &limit,
        ));
    }
}

/// `crypto.sha256`, `hash.md5`…: `crypto.hash` with that `algorithm`
/// (the default, sha256, is not written).
fn hash_by_algorithm(step: &Step, action: &ActionStep, src: &str) -> Option<Fix> {
    let (_, algorithm) = action.action.value.split_once('.')?;
    if !matches!(algorithm, "sha256" | "sha512" | "sha384" | "sha1" | "md5") {
        return None;
    }
    let mut fix = Fix::replace(
        format!("call `crypto.hash` with algorithm {algorithm}"),
        action.action.span,
        "\"crypto.hash\"",
        Some(PatchOp::Replace {
            path: format!("{}/action", step.pointer),
            value: "crypto.hash".into(),
        }),
    );
    if algorithm != "sha256" {
        let params = action.params.as_ref()?;
        let at = params.span.start as usize;
        if !src.get(at..)?.starts_with('{') || src.get(at + 1..)?.trim_start().starts_with('}') {
            return None;
        }
        fix.edits.push(crate::diagnostics::TextEdit {
            span: Span::new(at + 1, at + 1),
            replacement: format!("\"algorithm\": \"{algorithm}\", "),
        });
        fix.patch.push(PatchOp::Add {
            path: format!("{}/params/algorithm", step.pointer),
            value: algorithm.into(),
        });
    }
    Some(fix)
}

fn unknown_action(
    step: &Step,
    action: &ActionStep,
    catalog: &Catalog,
    src: &str,
    sink: &mut Diagnostics,
) {
    let name = &action.action.value;
    let mut d = Diagnostic::error(
        E0040,
        action.action.span,
        format!("unknown action `{name}`"),
    )
    .with_pointer(format!("{}/action", step.pointer));
    if let Some(fix) = hash_by_algorithm(step, action, src) {
        d = d
            .with_help("hashes are one action, `crypto.hash`, with an `algorithm`")
            .with_fix(fix);
    } else if let Some(close) = synonym(name)
        .filter(|ours| catalog.get(ours).is_some())
        .or_else(|| catalog.closest(name))
    {
        d = d
            .with_help(format!("did you mean `{close}`?"))
            .with_fix(Fix::replace(
                format!("replace with `{close}`"),
                action.action.span,
                format!("\"{close}\""),
                Some(PatchOp::Replace {
                    path: format!("{}/action", step.pointer),
                    value: close.into(),
                }),
            ));
    } else {
        let families: std::collections::BTreeSet<&str> = catalog
            .iter()
            .filter_map(|a| a.name.split_once('.').map(|(f, _)| f))
            .collect();
        d = d.with_help(format!(
            "actions are named `<family>.<name>`; families: {}",
            families.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    sink.push(d);
}

/// Action names agents guess, from other tools' spellings, and ours:
/// offered as a rename when the catalog has ours (edit distance alone
/// does not find `http.fetch` → `http.get`).
const ACTION_SYNONYMS: &[(&str, &str)] = &[
    ("http.fetch", "http.get"),
    ("http.call", "http.request"),
    ("http.send", "http.request"),
    ("shell.run", "shell.exec"),
    ("shell.execute", "shell.exec"),
    ("shell.command", "shell.exec"),
    ("shell.bash", "shell.exec"),
    ("shell.sh", "shell.exec"),
    ("exec.run", "shell.exec"),
    ("fs.read_file", "fs.read"),
    ("fs.cat", "fs.read"),
    ("file.read", "fs.read"),
    ("fs.write_file", "fs.write"),
    ("file.write", "fs.write"),
    ("fs.ls", "fs.list"),
    ("fs.readdir", "fs.list"),
    ("fs.exists", "fs.stat"),
    ("fs.rm", "fs.delete"),
    ("fs.remove", "fs.delete"),
    ("fs.mv", "fs.move"),
    ("fs.rename", "fs.move"),
    ("fs.cp", "fs.copy"),
    ("workflow.print", "workflow.log"),
    ("workflow.echo", "workflow.log"),
    ("log.info", "workflow.log"),
    ("json.query", "json.jq"),
    ("jq.run", "json.jq"),
    ("crypto.random_uuid", "crypto.uuid"),
];

/// Our name for an action another tool spells `name`.
fn synonym(name: &str) -> Option<&'static str> {
    ACTION_SYNONYMS
        .iter()
        .find(|(theirs, _)| theirs.eq_ignore_ascii_case(name))
        .map(|(_, ours)| *ours)
}

/// Parameter names opcode's documentation uses for one of ours: (action,
/// its spelling, ours). Offered as a rename.
const OPCODE_SPELLINGS: &[(&str, &str, &str)] = &[("shell.exec", "workdir", "cwd")];

fn unknown_param(spec: &ActionSpec, given: &Param<'_>, pointer: &str, sink: &mut Diagnostics) {
    let names: Vec<&str> = spec.params.iter().map(|p| p.name.as_str()).collect();
    let spelled = OPCODE_SPELLINGS
        .iter()
        .find(|(action, theirs, _)| *action == spec.name && *theirs == given.key)
        .map(|(_, _, ours)| *ours);
    let mut d = Diagnostic::warning(
        W0002,
        given.key_span,
        format!(
            "`{}` has no parameter `{}`; it is ignored",
            spec.name, given.key
        ),
    )
    .with_note(format!("signature: {}", spec.signature()))
    .with_pointer(pointer);
    if let Some(close) = spelled.or_else(|| did_you_mean(given.key, &names)) {
        d = d
            .with_help(format!("did you mean `{close}`?"))
            .with_fix(Fix::rename_key(
                format!("rename to `{close}`"),
                given.key_span,
                pointer,
                close,
            ));
    }
    sink.push(d);
}

fn check_type(
    spec: &ActionSpec,
    name: &str,
    ty: &Ty,
    given: &Param<'_>,
    resolver: &Resolver<'_, '_>,
    pointer: &str,
    sink: &mut Diagnostics,
) {
    let mismatch = |found: String| {
        Diagnostic::error(
            E0042,
            given.value.span,
            format!(
                "parameter `{name}` of `{}` must be {}, found {found}",
                spec.name,
                ty.describe()
            ),
        )
        .with_pointer(pointer)
    };
    match &given.value.kind {
        TemplateKind::Literal(value) => {
            if !ty.accepts(value) {
                let mut d = mismatch(kind_name(value).to_owned());
                if *ty == Ty::Duration && value.is_number() {
                    d = d.with_help(format!(
                        "write it with its unit: \"{value}ms\" or \"{value}s\" (a bare number's unit cannot be told)"
                    ));
                }
                let fixed = match ty {
                    Ty::Array { .. } => as_list(value).filter(|v| ty.accepts(v)),
                    _ => coerce_literal(ty, value),
                };
                if let Some(fixed) = fixed {
                    d = d.with_fix(Fix::replace(
                        format!("write `{fixed}` instead of `{value}`"),
                        given.value.span,
                        fixed.to_string(),
                        Some(PatchOp::Replace {
                            path: pointer.to_owned(),
                            value: fixed,
                        }),
                    ));
                }
                sink.push(d);
            } else if *ty == Ty::Duration
                && let Some(text) = value.as_str()
                && let Err(why) = parse_millis(text)
            {
                let mut d =
                    Diagnostic::error(E0015, given.value.span, format!("invalid duration: {why}"))
                        .with_pointer(pointer);
                if let Some(fix) = crate::duration::fix(text, given.value.span, pointer) {
                    d = d.with_fix(fix);
                }
                sink.push(d);
            }
        }
        TemplateKind::Text(_) if !ty.accepts(&serde_json::Value::String(String::new())) => {
            sink.push(mismatch("text".into()).with_help(
                "a string mixing text and `${{…}}` is rendered as text; to pass a value as-is, make the string exactly one `${{…}}`",
            ));
        }
        TemplateKind::Ref(r) => {
            if let Some(found) = resolver.reference_type(r)
                && incompatible(&found, ty)
            {
                sink.push(mismatch(found.describe()));
            }
        }
        _ => {}
    }
}

/// The JSON type name of a value, for messages.
fn kind_name(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

/// Can no value of `found` ever satisfy `expected`?
fn incompatible(found: &Ty, expected: &Ty) -> bool {
    fn kind(ty: &Ty) -> Option<u8> {
        match ty {
            Ty::Null => Some(0),
            Ty::Bool => Some(1),
            Ty::Int | Ty::Number => Some(2),
            Ty::String | Ty::Duration | Ty::Enum { .. } => Some(3),
            Ty::Array { .. } => Some(4),
            Ty::Map { .. } | Ty::Object { .. } => Some(5),
            Ty::Any | Ty::OneOf { .. } => None,
        }
    }
    if let Ty::OneOf { types } = expected {
        return types.iter().all(|t| incompatible(found, t));
    }
    matches!((kind(found), kind(expected)), (Some(a), Some(b)) if a != b)
}

/// `value` written as the type `ty` takes, when one reading is likely: a
/// number or boolean in quotes unquoted, a number or boolean where text is
/// wanted quoted. A bare number where a duration is wanted gets none: its
/// unit cannot be told (a `delay` of 1000 is most likely milliseconds, a
/// `timeout` of 30 seconds).
fn coerce_literal(ty: &Ty, value: &serde_json::Value) -> Option<serde_json::Value> {
    let as_text = || match value {
        serde_json::Value::Number(_) if *ty == Ty::Duration => None,
        serde_json::Value::Number(_) | serde_json::Value::Bool(_) => Some(value.to_string().into()),
        _ => None,
    };
    let Some(text) = value.as_str().map(str::trim) else {
        return as_text().filter(|v| ty.accepts(v));
    };
    let candidates = [
        text.parse::<i64>().ok().map(serde_json::Value::from),
        text.parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(serde_json::Value::Number),
        text.parse::<bool>().ok().map(serde_json::Value::Bool),
    ];
    candidates.into_iter().flatten().find(|v| ty.accepts(v))
}

/// A list given as one value: a string of words separated by spaces is its
/// words (`"-la /tmp"` → `["-la", "/tmp"]`), unless quotes or escapes make
/// the split a guess; any other value is the list of itself.
fn as_list(value: &serde_json::Value) -> Option<serde_json::Value> {
    let Some(text) = value.as_str() else {
        return (!value.is_null()).then(|| serde_json::json!([value]));
    };
    if text.trim().is_empty() || text.contains(['"', '\'', '\\', '$', '`']) {
        return None;
    }
    Some(text.split_whitespace().collect::<Vec<_>>().into())
}

/// The expression of an `expr.eval` step, when it is written as a literal
/// string, and its language (`language`, else what its text parses as).
pub fn expr_eval_expression(action: &ActionStep) -> Option<(Expr, Dialect)> {
    let params = params_of(action.params.as_ref());
    let given = params.iter().find(|p| p.key == "expression")?;
    let source = given.literal()?.as_str()?;
    let language = params
        .iter()
        .find(|p| p.key == "language")
        .and_then(|p| p.literal())
        .and_then(serde_json::Value::as_str);
    let span = given.value.span;
    let expr = Expr {
        source: source.to_owned(),
        span,
        origin: TextOrigin::json_string(span, source),
    };
    Some((expr, expr_lang::dialect(source, language)))
}

/// An `expr.eval` text that parses as CEL (so it is read as CEL) but
/// calls functions CEL lacks under any name and Expr has (`sum`), and
/// checks clean as Expr: the author wrote Expr (E0048), and the fix says
/// so with `"language": "expr"`. `None` when it is not that.
pub fn reads_as_expr(
    action: &ActionStep,
    expr: &Expr,
    refs: &cel::CelRefs,
    src: &str,
    pointer: &str,
) -> Option<Diagnostic> {
    let missing: Vec<&str> = refs
        .calls
        .iter()
        .map(|(name, ..)| name.as_str())
        .filter(|name| {
            !super::cel_functions::known(name) && !super::cel_functions::MACROS.contains(name)
        })
        .collect();
    // Where CEL has the function under another name (`len` is `size`),
    // that rename is the fix, said by the CEL check.
    if missing.iter().all(|name| {
        super::cel_functions::OTHER_SPELLINGS
            .iter()
            .any(|(theirs, _, renamed)| theirs == name && *renamed)
    }) {
        return None;
    }
    let first = missing.first()?;
    let analysis = expr_lang::analyze(expr, src, pointer).ok()?;
    if !analysis.diagnostics.is_empty() {
        return None;
    }
    let params = action.params.as_ref()?;
    let params_pointer = pointer.rsplit_once('/').map_or("", |(parent, _)| parent);
    let language = params_of(Some(params))
        .into_iter()
        .find(|p| p.key == "language");
    let message = "say it is Expr: `\"language\": \"expr\"`";
    let path = format!("{params_pointer}/language");
    let fix = if let Some(given) = language {
        Fix::replace(
            message,
            given.value.span,
            "\"expr\"",
            Some(PatchOp::Replace {
                path,
                value: "expr".into(),
            }),
        )
    } else {
        if !src.get(params.span.start as usize..)?.starts_with('{') {
            return None;
        }
        let at = params.span.start as usize + 1;
        Fix::replace(
            message,
            Span::new(at, at),
            "\"language\": \"expr\", ",
            Some(PatchOp::Add {
                path,
                value: "expr".into(),
            }),
        )
    };
    Some(
        Diagnostic::error(
            E0048,
            expr.span,
            format!("this is read as CEL, which has no function `{first}`; it is Expr"),
        )
        .with_help("Expr has it: say `\"language\": \"expr\"` (or write it in CEL)")
        .with_pointer(pointer)
        .with_fix(fix),
    )
}

fn check_expr_eval(action: &ActionStep, src: &str, pointer: &str, sink: &mut Diagnostics) {
    let Some((expr, dialect)) = expr_eval_expression(action) else {
        return;
    };
    let expression_pointer = child_pointer(pointer, "expression");
    // When it parses, its references, functions and secrets are checked
    // with the step's others (`check::check_step`).
    if dialect == Dialect::Expr {
        if let Err(d) = expr_lang::analyze(&expr, src, &expression_pointer) {
            sink.push(d);
        }
        return;
    }
    let Err(mut d) = cel::analyze(&expr, src, &expression_pointer) else {
        return;
    };
    let (source, span) = (expr.source.as_str(), expr.span);
    if let Some(rewritten) = expr_to_cel(source) {
        d = Diagnostic::error(
            E0048,
            span,
            "`language` says CEL; this is Expr-language syntax",
        )
        .with_help(format!(
            "in CEL: {rewritten}; or say `\"language\": \"expr\"`"
        ))
        .with_fix(Fix::replace(
            format!("rewrite as `{rewritten}`"),
            span,
            serde_json::to_string(&rewritten).unwrap_or_default(),
            Some(PatchOp::Replace {
                path: expression_pointer,
                value: rewritten.clone().into(),
            }),
        ));
    } else if !language_given(action) && expr_lang::looks_like_expr(source) {
        // Written in Expr's syntax, with a mistake: Expr's error, in Expr's
        // words, not CEL's.
        if let Err(expr_error) = expr_lang::analyze(&expr, src, &expression_pointer) {
            d = expr_error.with_help(
                "this uses Expr's syntax (`{.field}`, `#`, `??`, `and`/`or`) and parses as neither language: Expr's error is given; say `\"language\": \"expr\"` once it is fixed",
            );
        }
    } else {
        d = d.with_help("`expr.eval` reads CEL, or Expr where the text parses only as Expr: this parses as neither (set `\"language\": \"expr\"` to be told what Expr makes of it)");
    }
    sink.push(d);
}

/// Does the `expr.eval` name its `language`?
fn language_given(action: &ActionStep) -> bool {
    params_of(action.params.as_ref())
        .iter()
        .any(|p| p.key == "language")
}

/// Rewrites Expr's `filter(list, {.x > 1})` family into CEL macros.
pub fn expr_to_cel(source: &str) -> Option<String> {
    let s = source.trim();
    let open = s.find('(')?;
    let name = &s[..open];
    let inner = s[open + 1..].strip_suffix(')')?;
    let brace = inner.rfind(", {").or_else(|| inner.rfind(",{"))?;
    let list = inner[..brace].trim();
    let body = inner[brace..]
        .trim_start_matches(',')
        .trim()
        .strip_prefix('{')?
        .strip_suffix('}')?
        .trim();
    let var = "x";
    let mut converted = String::new();
    let mut previous: Option<char> = None;
    for c in body.chars() {
        let at_start = previous
            .is_none_or(|p| !(p.is_alphanumeric() || p == '_' || p == ']' || p == ')' || p == '.'));
        if c == '.' && at_start {
            converted.push_str(var);
            converted.push('.');
        } else if c == '#' {
            converted.push_str(var);
        } else {
            converted.push(c);
        }
        previous = Some(c);
    }
    let rewritten = match name {
        "filter" => format!("{list}.filter({var}, {converted})"),
        "map" => format!("{list}.map({var}, {converted})"),
        "all" => format!("{list}.all({var}, {converted})"),
        "any" => format!("{list}.exists({var}, {converted})"),
        "none" => format!("!{list}.exists({var}, {converted})"),
        "count" => format!("{list}.filter({var}, {converted}).size()"),
        _ => return None,
    };
    ::cel::parser::Parser::new()
        .parse(&rewritten)
        .ok()
        .map(|_| rewritten)
}

fn check_jq_filter(params: &[Param<'_>], src: &str, pointer: &str, sink: &mut Diagnostics) {
    let Some(given) = params.iter().find(|p| p.key == "filter") else {
        return;
    };
    let Some(code) = given.literal().and_then(serde_json::Value::as_str) else {
        return;
    };
    if let Err(limit) = opcode_vm::limits::check_jq(code) {
        let expr = Expr {
            source: code.to_owned(),
            span: given.value.span,
            origin: TextOrigin::json_string(given.value.span, code),
        };
        let pointer = child_pointer(pointer, "filter");
        sink.push(cel::too_complex(&expr, src, &pointer, "jq filter", &limit));
        return;
    }
    if let Err((message, range)) = jq::check(code) {
        let span = TextOrigin::json_string(given.value.span, code).file_span(src, range);
        sink.push(
            Diagnostic::error(E0031, span, format!("invalid jq filter: {message}"))
                .with_secondary(given.value.span, "in this filter")
                .with_pointer(child_pointer(pointer, "filter")),
        );
    }
}

fn check_never_equal(
    params: &[Param<'_>],
    resolver: &Resolver<'_, '_>,
    pointer: &str,
    sink: &mut Diagnostics,
) {
    let find = |key: &str| params.iter().find(|p| p.key == key);
    let (Some(expected), Some(actual)) = (find("expected"), find("actual")) else {
        return;
    };
    let ty_of = |p: &Param<'_>| -> Option<Ty> {
        match &p.value.kind {
            TemplateKind::Literal(serde_json::Value::Null) => Some(Ty::Null),
            TemplateKind::Literal(serde_json::Value::Bool(_)) => Some(Ty::Bool),
            TemplateKind::Literal(serde_json::Value::Number(_)) => Some(Ty::Number),
            TemplateKind::Literal(serde_json::Value::String(_)) | TemplateKind::Text(_) => {
                Some(Ty::String)
            }
            TemplateKind::Ref(r) => resolver.reference_type(r),
            _ => None,
        }
    };
    let (Some(e), Some(a)) = (ty_of(expected), ty_of(actual)) else {
        return;
    };
    if !e.disjoint_scalar(&a) {
        return;
    }
    let mut d = Diagnostic::error(
        E0049,
        expected.value.span,
        format!(
            "`expected` is {} but `actual` is {}: they can never be equal",
            e.describe(),
            a.describe()
        ),
    )
    .with_secondary(actual.value.span, format!("this is {}", a.describe()))
    .with_help("interpolation keeps types: a `${{…}}` that names a number passes a number")
    .with_pointer(child_pointer(pointer, "expected"));
    if let Some(value) = expected.literal()
        && let Some(fixed) = coerce_literal(&a, value)
    {
        d = d.with_fix(Fix::replace(
            format!("compare with `{fixed}`"),
            expected.value.span,
            fixed.to_string(),
            Some(PatchOp::Replace {
                path: child_pointer(pointer, "expected"),
                value: fixed,
            }),
        ));
    }
    sink.push(d);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_expr_filters_to_cel() {
        assert_eq!(
            expr_to_cel("filter(steps['fetch-data'].body.items, {.score >= inputs.threshold})")
                .as_deref(),
            Some("steps['fetch-data'].body.items.filter(x, x.score >= inputs.threshold)")
        );
        assert_eq!(
            expr_to_cel("map(inputs.list, {# * 2})").as_deref(),
            Some("inputs.list.map(x, x * 2)")
        );
        assert_eq!(expr_to_cel("1 + 2"), None);
    }

    #[test]
    fn incompatible_types() {
        assert!(incompatible(&Ty::Int, &Ty::String));
        assert!(!incompatible(&Ty::Int, &Ty::Number));
        assert!(!incompatible(&Ty::Any, &Ty::String));
        assert!(incompatible(
            &Ty::object([]),
            &Ty::OneOf {
                types: vec![Ty::String, Ty::array(Ty::Any)]
            }
        ));
    }
}
