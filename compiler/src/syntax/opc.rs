//! `.opc`: the compact text form of workflows (spec/opc.md).
//!
//! ```text
//! text ─► lexer (logos) ─► parser (chumsky, recovering) ─► .opc tree
//!      ─► JSON node tree ─► the same lowering and checks as JSON
//! ```
//!
//! The printer writes the canonical layout ([`format`]) and converts JSON
//! to `.opc` ([`from_json`]); [`to_json`] goes the other way.

pub mod lexer;
pub mod lower;
pub mod parser;
pub mod print;
pub mod tree;

use chumsky::span::SimpleSpan;

use self::lexer::Token;
use super::node::Node;
use crate::diagnostics::codes::{E0003, E0007};
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::source::Span;

/// Deepest nesting of blocks and lists accepted.
pub const MAX_DEPTH: usize = 128;

/// A parsed `.opc` file: its tree and its comments.
#[derive(Debug, Clone)]
pub struct Parsed<'s> {
    /// The top-level block.
    pub root: tree::Block,
    /// The comments, in order.
    pub comments: Vec<(Span, &'s str)>,
}

/// Parses `.opc` text; problems go to `sink`. The tree comes back even
/// with errors (the parser recovers); `None` only when nothing is usable.
pub fn parse_tree<'s>(src: &'s str, sink: &mut Diagnostics) -> Option<Parsed<'s>> {
    let lexed = lexer::lex(src);
    if !balanced(&lexed.tokens, sink) {
        return None;
    }
    let tokens: Vec<(Token<'s>, SimpleSpan)> = lexed
        .tokens
        .iter()
        .map(|(t, s)| (*t, SimpleSpan::from(s.range())))
        .collect();
    let (root, errors) = parser::parse(&tokens, src.len());
    for error in errors {
        let found = error.found.map_or_else(
            || "the file ends".to_owned(),
            |found| format!("unexpected {found}"),
        );
        let message = if error.expected.is_empty() {
            found
        } else {
            format!("{found}; expected {}", error.expected.join(", "))
        };
        sink.push(Diagnostic::error(E0007, error.span, message).with_help(
            "see spec/opc.md for the grammar: `key: value`, `key { … }`, `step ID ACTION { … }`",
        ));
    }
    root.map(|root| Parsed {
        root,
        comments: lexed.comments,
    })
}

/// Checks that braces and brackets pair up (and are not nested too deep),
/// reporting each that does not. The parser's error recovery relies on it.
fn balanced(tokens: &[(Token<'_>, Span)], sink: &mut Diagnostics) -> bool {
    let mut open: Vec<(Token<'_>, Span)> = Vec::new();
    let mut ok = true;
    for (token, span) in tokens {
        match token {
            Token::LBrace | Token::LBracket => {
                if open.len() == MAX_DEPTH {
                    sink.push(Diagnostic::error(
                        E0003,
                        *span,
                        format!("blocks and lists are nested deeper than {MAX_DEPTH} levels"),
                    ));
                    return false;
                }
                open.push((*token, *span));
            }
            Token::RBrace | Token::RBracket => {
                let wanted = if *token == Token::RBrace {
                    Token::LBrace
                } else {
                    Token::LBracket
                };
                match open.last() {
                    Some((t, _)) if *t == wanted => {
                        open.pop();
                    }
                    Some((t, at)) => {
                        let closer = if *t == Token::LBrace { "`}`" } else { "`]`" };
                        sink.push(
                            Diagnostic::error(
                                E0007,
                                *span,
                                format!("unexpected {token}; expected {closer}"),
                            )
                            .with_secondary(*at, format!("this {t} is not closed")),
                        );
                        return false;
                    }
                    None => {
                        sink.push(Diagnostic::error(
                            E0007,
                            *span,
                            format!("unexpected {token}: nothing to close"),
                        ));
                        ok = false;
                    }
                }
            }
            _ => {}
        }
    }
    for (token, span) in open {
        let closer = if token == Token::LBrace { "`}`" } else { "`]`" };
        sink.push(Diagnostic::error(
            E0007,
            span,
            format!("this {token} is never closed: add {closer}"),
        ));
        ok = false;
    }
    ok
}

/// Reads `.opc` text into the JSON node tree the compiler lowers.
pub fn parse(src: &str, sink: &mut Diagnostics) -> Option<Node<'static>> {
    let parsed = parse_tree(src, sink)?;
    if sink.has_errors() {
        return None;
    }
    Some(lower::block(&parsed.root, sink))
}

/// The canonical layout of `.opc` text, comments kept; the diagnostics
/// when it does not parse.
pub fn format(src: &str) -> Result<String, Diagnostics> {
    crate::deep(|| format_here(src))
}

fn format_here(src: &str) -> Result<String, Diagnostics> {
    let mut sink = Diagnostics::new();
    match parse_tree(src, &mut sink) {
        Some(parsed) if !sink.has_errors() => {
            Ok(print::document(&parsed.root, &parsed.comments, src))
        }
        _ => Err(sink),
    }
}

/// `.opc` text for a JSON workflow; the diagnostics when it is not JSON
/// holding an object.
pub fn from_json(src: &str) -> Result<String, Diagnostics> {
    crate::deep(|| from_json_here(src))
}

fn from_json_here(src: &str) -> Result<String, Diagnostics> {
    let mut sink = Diagnostics::new();
    let node = super::json::parse_here(src, &mut sink);
    match node {
        Some(node) if node.as_object().is_some() && !sink.has_errors() => {
            Ok(print::document(&print::from_node(&node), &[], ""))
        }
        Some(node) => {
            sink.push(Diagnostic::error(
                crate::diagnostics::codes::E0010,
                node.span,
                "a workflow is a JSON object",
            ));
            Err(sink)
        }
        None => Err(sink),
    }
}

/// The JSON value of `.opc` text; the diagnostics when it does not parse.
pub fn to_json(src: &str) -> Result<serde_json::Value, Diagnostics> {
    crate::deep(|| {
        let mut sink = Diagnostics::new();
        match parse(src, &mut sink) {
            Some(node) if !sink.has_errors() => Ok(node.to_value()),
            _ => Err(sink),
        }
    })
}
