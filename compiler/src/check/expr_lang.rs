//! Expr, opcode's language for `expr.eval` (spec/language.md, "Expr";
//! decision 0030): which language an `expr.eval` is written in, and, for
//! Expr, a check as thorough as CEL's. The text is parsed by the
//! `expr-lang` crate that evaluates it; its references are read from its
//! tokens ([`opcode_vm::expr_lang`]), since the crate keeps its syntax tree
//! to itself, and function names are asked of the engine.

use crate::ast::Expr;
use crate::diagnostics::codes::E0054;
use crate::diagnostics::{Diagnostic, Fix, did_you_mean};
use opcode_vm::expr_lang::{self as text, Kind, Token};

use super::cel::{CelRefs, line_col_to_byte, one_char, too_complex};

/// The language of an `expr.eval` expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// CEL, the language of every other expression.
    Cel,
    /// Expr, opcode's.
    Expr,
}

impl Dialect {
    /// The value of `language` that names it.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Cel => "cel",
            Dialect::Expr => "expr",
        }
    }
}

/// The language of `source`: the one `language` names; without it CEL if
/// the text parses as CEL, else Expr if it parses as Expr, else CEL (whose
/// error is then reported). The runtime reads a text with no `language`
/// the same way (`opcode_stdlib::cel::parses`).
pub fn dialect(source: &str, language: Option<&str>) -> Dialect {
    match language {
        Some("expr") => Dialect::Expr,
        Some(_) => Dialect::Cel,
        None if parses_as_cel(source) || parse(source).is_err() => Dialect::Cel,
        None => Dialect::Expr,
    }
}

/// Does `source` use syntax only Expr has: the predicate shorthand
/// (`{.score}`, `#`), `??`, or its word operators?
pub fn looks_like_expr(source: &str) -> bool {
    let Ok(tokens) = text::tokens(source) else {
        return false;
    };
    let word = |t: &Token| &source[t.range.clone()];
    tokens
        .windows(2)
        .any(|pair| word(&pair[0]) == "{" && word(&pair[1]) == ".")
        || tokens.iter().any(|t| {
            let w = word(t);
            w.starts_with('#') || matches!(w, "??" | "and" | "or" | "not" | "let")
        })
}

fn parses_as_cel(source: &str) -> bool {
    opcode_vm::limits::check_cel(source).is_err()
        || cel::parser::PrattParser::default().parse(source).is_ok()
}

/// Why a text is not an Expr expression: where (a byte of the text) and what.
struct ParseError {
    at: Option<usize>,
    message: String,
}

/// Parses `source` as the engine will; where and why it does not parse.
fn parse(source: &str) -> Result<Vec<Token>, ParseError> {
    let located = |(at, what): (usize, &str)| ParseError {
        at: Some(at),
        message: what.to_owned(),
    };
    if let Err(limit) = opcode_vm::limits::check_expr(source) {
        return Err(ParseError {
            at: None,
            message: limit.to_string(),
        });
    }
    let tokens = text::tokens(source).map_err(located)?;
    let sites = text::shorthand_sites(source).map_err(located)?;
    let normal = text::normalize(source).map_err(located)?;
    if let Some(value) = text::unbuilt_map_value(source) {
        return Err(located((value.start, text::MAP_VALUES)));
    }
    // The crate stops (panics) on some texts its grammar takes: each is
    // this text's error, never the caller's end.
    let compiled = std::panic::catch_unwind(|| expr::compile(&normal)).unwrap_or_else(|_| {
        Err(expr::Error::ExprError(
            "opcode's Expr engine cannot read this expression".to_owned(),
        ))
    });
    match compiled {
        Ok(_) => Ok(tokens),
        Err(expr::Error::PestError(e)) => {
            let (line, column) = match e.line_col {
                pest::error::LineColLocation::Pos(at)
                | pest::error::LineColLocation::Span(at, _) => at,
            };
            let at = line_col_to_byte(&normal, line as isize, column as isize);
            Err(ParseError {
                at: Some(text::source_offset(&sites, at)),
                message: plain_message(&e.variant.message()),
            })
        }
        Err(e) => Err(ParseError {
            at: None,
            message: e.to_string(),
        }),
    }
}

/// The grammar's rule names in a parser message, as a person says them.
fn plain_message(message: &str) -> String {
    const WORDS: &[(&str, &str)] = &[
        ("conditional_if", "`if`"),
        ("negation_op", "`!`"),
        ("sign_op", "`-`"),
        ("value", "a value"),
        ("array", "a list"),
        ("map", "a map"),
        ("ident", "a name"),
        ("program", "an expression"),
        ("expr", "an expression"),
        ("string", "a string"),
        ("predicate", "a predicate"),
        ("EOI", "the end"),
    ];
    let Some(expected) = message.strip_prefix("expected ") else {
        return message.to_owned();
    };
    let mut said: Vec<&str> = Vec::new();
    for word in expected
        .split([',', ' '])
        .filter(|w| !w.is_empty() && *w != "or")
    {
        let plain = WORDS
            .iter()
            .find(|(rule, _)| *rule == word)
            .map_or("an operator", |(_, plain)| plain);
        if !said.contains(&plain) {
            said.push(plain);
        }
    }
    match said.split_last() {
        Some((last, [])) => format!("expected {last}"),
        Some((last, rest)) => format!("expected {} or {last}", rest.join(", ")),
        None => message.to_owned(),
    }
}

/// Other languages' names for Expr's functions, too far apart to be
/// guessed as misspellings.
const SYNONYMS: &[(&str, &str)] = &[
    ("uppercase", "upper"),
    ("toUpper", "upper"),
    ("toUpperCase", "upper"),
    ("lowercase", "lower"),
    ("toLower", "lower"),
    ("toLowerCase", "lower"),
    ("length", "len"),
    ("size", "len"),
    ("strip", "trim"),
];

/// What an Expr expression refers to, and the diagnostics of its names.
pub struct Analysis {
    /// Its references, checked as a CEL expression's are.
    pub refs: CelRefs,
    /// Unknown functions and variables.
    pub diagnostics: Vec<Diagnostic>,
}

/// The variables an Expr expression has besides the inputs' own names.
const VARIABLES: &[&str] = &["steps", "inputs", "workflow", "context", "iter", "data"];

/// Parses `expr` as Expr; reports its syntax error, or finds its references.
pub fn analyze(expr: &Expr, src: &str, pointer: &str) -> Result<Analysis, Diagnostic> {
    if let Err(limit) = opcode_vm::limits::check_expr(&expr.source) {
        return Err(too_complex(expr, src, pointer, "Expr expression", &limit));
    }
    let tokens = parse(&expr.source).map_err(|e| {
        let span = e.at.map_or(expr.span, |at| {
            expr.origin.file_span(src, one_char(&expr.source, at))
        });
        Diagnostic::error(
            E0054,
            span,
            format!("invalid Expr expression: {}", e.message),
        )
        .with_secondary(expr.span, "in this expression")
        .with_pointer(pointer)
    })?;
    let mut found = Found {
        expr,
        src,
        pointer,
        tokens: &tokens,
        analysis: Analysis {
            refs: CelRefs {
                reads: opcode_vm::program::Reads::NONE,
                ..CelRefs::default()
            },
            diagnostics: Vec::new(),
        },
    };
    found.walk();
    Ok(found.analysis)
}

struct Found<'a> {
    expr: &'a Expr,
    src: &'a str,
    pointer: &'a str,
    tokens: &'a [Token],
    analysis: Analysis,
}

impl Found<'_> {
    fn text(&self, n: usize) -> &str {
        self.tokens
            .get(n)
            .map_or("", |t| &self.expr.source[t.range.clone()])
    }

    fn span(&self, range: std::ops::Range<usize>) -> crate::source::Span {
        self.expr.origin.file_span(self.src, range)
    }

    fn walk(&mut self) {
        let bound: Vec<String> = (0..self.tokens.len())
            .filter(|&n| self.text(n) == "let")
            .map(|n| self.text(n + 1).to_owned())
            .collect();
        let mut brackets: Vec<String> = Vec::new();
        for n in 0..self.tokens.len() {
            let word = self.text(n).to_owned();
            let word = word.as_str();
            match word {
                "(" | "[" | "{" => brackets.push(word.to_owned()),
                ")" | "]" | "}" => {
                    brackets.pop();
                }
                _ => {}
            }
            if self.tokens[n].kind != Kind::Ident
                || text::is_reserved(word)
                || word.starts_with('#')
                || bound.iter().any(|b| b == word)
            {
                continue;
            }
            let member = n > 0 && matches!(self.text(n - 1), "." | "?.");
            let map_key = brackets.last().is_some_and(|b| b == "{")
                && n > 0
                && matches!(self.text(n - 1), "{" | ",")
                && self.text(n + 1) == ":";
            if self.text(n + 1) == "(" {
                self.call(n, member);
            } else if !member && !map_key {
                self.variable(n);
            }
        }
    }

    /// A function called by name (a method when `member`).
    fn call(&mut self, n: usize, member: bool) {
        let (name, range) = (self.text(n).to_owned(), self.tokens[n].range.clone());
        let span = self.span(range);
        let refused = |help: &str| {
            Diagnostic::error(
                E0054,
                span,
                format!("`{name}` is not available in Expr here"),
            )
            .with_help(help)
        };
        let d = if member {
            refused(&format!(
                "expr-lang's methods are its time library's, which is not built in: call functions by name, `{name}(x)`"
            ))
        } else {
            match probe(&name) {
                Probe::Known => return,
                Probe::Refused(feature) if feature == "temporal" => refused(
                    "a run must replay the same way, so Expr's clock and dates (`now`, `date`, `duration`, `timezone`) are not built in: pass times in as inputs (RFC 3339 text compares in order)",
                ),
                Probe::Refused(_) => refused(
                    "values are JSON already: pass them as they are, or reshape them with `json.jq`",
                ),
                Probe::Unknown => {
                    let d =
                        Diagnostic::error(E0054, span, format!("Expr has no function `{name}`"));
                    let synonym = SYNONYMS
                        .iter()
                        .find(|(theirs, _)| *theirs == name)
                        .map(|(_, ours)| *ours);
                    match synonym.or_else(|| did_you_mean(&name, FUNCTIONS)) {
                        Some(close) => d
                            .with_help(format!("did you mean `{close}`?"))
                            .with_fix(Fix::replace(format!("replace with `{close}`"), span, close, None)),
                        None => d.with_help("Expr's functions include len, filter, map, all, any, none, count, sum, upper, lower, split, join, keys, values"),
                    }
                }
            }
        };
        self.analysis.diagnostics.push(d.with_pointer(self.pointer));
    }

    /// A variable read at the top, with the path written after it.
    fn variable(&mut self, n: usize) {
        let name = self.text(n).to_owned();
        let start = self.tokens[n].range.start;
        let path = self.path(n + 1);
        let until = |k: usize| start..path.get(k).map_or(self.tokens[n].range.end, |(_, r)| r.end);
        match name.as_str() {
            "steps" => match path.first() {
                Some((Some(id), _)) => {
                    let span = self.expr.origin.file_span(self.src, until(0));
                    self.analysis.refs.steps.push((id.clone(), span));
                    if let Some((Some(field), range)) = path.get(1) {
                        let field_span = self.span(range.clone());
                        self.analysis.refs.step_fields.push((
                            id.clone(),
                            field.clone(),
                            Some(field_span),
                        ));
                    }
                }
                _ => self.analysis.refs.dynamic_steps = true,
            },
            "inputs" => {
                self.analysis.refs.reads.inputs = true;
                if let Some((Some(input), _)) = path.first() {
                    let span = self.expr.origin.file_span(self.src, until(0));
                    self.analysis.refs.inputs.push((input.clone(), span));
                }
            }
            "workflow" => self.analysis.refs.reads.workflow = true,
            "context" => self.analysis.refs.reads.context = true,
            "data" => {}
            "iter" => {
                self.analysis.refs.reads.iter = true;
                let span = self.span(self.tokens[n].range.clone());
                self.analysis.refs.iter.get_or_insert(span);
            }
            "secrets" => {
                let span = self.span(self.tokens[n].range.clone());
                self.analysis.refs.secrets.get_or_insert(span);
            }
            "$env" => {
                self.analysis.refs.dynamic_steps = true;
                self.analysis.refs.reads = opcode_vm::program::Reads::ALL;
            }
            _ => {
                let span = self.span(self.tokens[n].range.clone());
                if let Some(close) = did_you_mean(&name, VARIABLES) {
                    let d =
                        Diagnostic::error(E0054, span, format!("Expr has no variable `{name}`"))
                            .with_help(format!("did you mean `{close}`?"))
                            .with_fix(Fix::replace(
                                format!("replace with `{close}`"),
                                span,
                                close,
                                None,
                            ))
                            .with_pointer(self.pointer);
                    self.analysis.diagnostics.push(d);
                } else {
                    // opcode gives every input by its own name too.
                    self.analysis.refs.reads.inputs = true;
                    self.analysis.refs.inputs.push((name, span));
                }
            }
        }
    }

    /// The members read after token `n`: each one's name (none when it is
    /// computed) and where it is written (`.name`, `['name']`).
    fn path(&self, mut n: usize) -> Vec<(Option<String>, std::ops::Range<usize>)> {
        let mut path = Vec::new();
        loop {
            let dot = matches!(self.text(n), "." | "?.");
            if dot
                && self
                    .tokens
                    .get(n + 1)
                    .is_some_and(|t| t.kind == Kind::Ident)
            {
                let range = self.tokens[n].range.start..self.tokens[n + 1].range.end;
                path.push((Some(self.text(n + 1).to_owned()), range));
                n += 2;
                continue;
            }
            let open = if self.text(n) == "?." && self.text(n + 1) == "[" {
                n + 1
            } else {
                n
            };
            if self.text(open) != "[" {
                return path;
            }
            match self.tokens.get(open + 1).map(|t| &t.kind) {
                Some(Kind::Str(key)) if self.text(open + 2) == "]" => {
                    let range = self.tokens[open].range.start..self.tokens[open + 2].range.end;
                    path.push((Some(key.clone()), range));
                    n = open + 3;
                }
                _ => {
                    path.push((None, self.tokens[open].range.clone()));
                    return path;
                }
            }
        }
    }
}

/// The functions expr-lang has (tested against the engine).
pub const FUNCTIONS: &[&str] = &[
    "abs",
    "all",
    "any",
    "bitand",
    "bitnand",
    "bitnot",
    "bitor",
    "bitshl",
    "bitshr",
    "bitushr",
    "bitxor",
    "ceil",
    "concat",
    "count",
    "filter",
    "find",
    "findIndex",
    "findLast",
    "findLastIndex",
    "first",
    "flatten",
    "float",
    "floor",
    "fromBase64",
    "fromPairs",
    "get",
    "groupBy",
    "hasPrefix",
    "hasSuffix",
    "indexOf",
    "int",
    "join",
    "keys",
    "last",
    "lastIndexOf",
    "len",
    "lower",
    "map",
    "max",
    "mean",
    "median",
    "min",
    "none",
    "one",
    "reduce",
    "repeat",
    "replace",
    "reverse",
    "round",
    "sort",
    "sortBy",
    "split",
    "splitAfter",
    "string",
    "sum",
    "take",
    "toBase64",
    "toPairs",
    "trim",
    "trimPrefix",
    "trimSuffix",
    "type",
    "uniq",
    "upper",
    "values",
];

/// What the engine says of a function name.
#[derive(Debug, PartialEq, Eq)]
pub enum Probe {
    /// It has it.
    Known,
    /// It has no such function.
    Unknown,
    /// It has it, but not in this build (the feature it needs).
    Refused(String),
}

/// Asks the engine about `name` by calling it with no arguments (no
/// function of the build does anything but answer).
pub fn probe(name: &str) -> Probe {
    let Ok(program) = expr::compile(&format!("{name}()")) else {
        return Probe::Unknown;
    };
    match expr::run(&program, &expr::Context::default()) {
        Ok(_) => Probe::Known,
        Err(e) => {
            let message = e.to_string();
            if message.starts_with("Unknown function") {
                Probe::Unknown
            } else if let Some(rest) = message.split("requires expr-lang's `").nth(1) {
                Probe::Refused(rest.split('`').next().unwrap_or_default().to_owned())
            } else {
                Probe::Known
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_function_list_is_the_engines() {
        for name in FUNCTIONS {
            assert_eq!(probe(name), Probe::Known, "{name}");
        }
        assert_eq!(probe("size"), Probe::Unknown);
        assert_eq!(probe("now"), Probe::Refused("temporal".into()));
        assert_eq!(probe("toJSON"), Probe::Refused("json".into()));
    }

    #[test]
    fn parser_messages_name_no_grammar_rules() {
        assert_eq!(
            plain_message(
                "expected conditional_if, negation_op, sign_op, value, array, map, or ident"
            ),
            "expected `if`, `!`, `-`, a value, a list, a map or a name"
        );
        assert_eq!(plain_message("expected EOI"), "expected the end");
    }

    #[test]
    fn the_language_is_cel_unless_only_expr_parses() {
        assert_eq!(dialect("size(inputs.xs) > 1", None), Dialect::Cel);
        assert_eq!(dialect("filter(xs, {.a > 1})", None), Dialect::Expr);
        assert_eq!(dialect("a ?? b", None), Dialect::Expr);
        assert_eq!(dialect("a ?? b", Some("cel")), Dialect::Cel);
        assert_eq!(dialect("1 +", None), Dialect::Cel);
        assert_eq!(dialect("1 + 1", Some("expr")), Dialect::Expr);
    }
}
