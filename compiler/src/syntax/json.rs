//! The span-keeping JSON reader.
//!
//! A recursive-descent parser over the logos tokens in [`lexer`]. It keeps the
//! span of every key and value, reports duplicate keys (JSON allows them; a
//! workflow that has them is ambiguous), bounds nesting depth so hostile input
//! cannot overflow the stack, and stops at the first syntax error with a
//! message that names what was expected.

pub mod lexer;

use logos::Logos;
use serde_json::Number;

use self::lexer::{LexError, Token};
use super::node::{Member, Node, NodeKind};
use crate::diagnostics::codes::{E0001, E0003, E0004, E0005};
use crate::diagnostics::{Diagnostic, Diagnostics, Fix};
use crate::source::Span;

/// Deepest nesting of arrays and objects accepted.
pub const MAX_DEPTH: usize = 256;

/// Reads a JSON document. Problems go to `sink`; `None` when it is unusable.
/// On the compiler's own stack ([`crate::deep`]), whatever thread calls.
pub fn parse<'s>(src: &'s str, sink: &mut Diagnostics) -> Option<Node<'s>> {
    crate::deep(|| parse_here(src, sink))
}

/// [`parse`] on the caller's stack.
pub(crate) fn parse_here<'s>(src: &'s str, sink: &mut Diagnostics) -> Option<Node<'s>> {
    let mut reader = Reader {
        src,
        lexer: Token::lexer(src),
        peeked: Peeked::Nothing,
        sink,
    };
    let value = reader.value(0).ok()?;
    match reader.next() {
        None => Some(value),
        Some((token, span)) => {
            let message = match token {
                Ok(_) => "unexpected content after the end of the document".to_owned(),
                Err(error) => error.message(),
            };
            reader.sink.push(
                Diagnostic::error(E0001, span, message)
                    .with_help("a workflow file holds exactly one JSON object"),
            );
            None
        }
    }
}

/// Marker: the document is unusable; the diagnostic was already reported.
struct Stop;

type Spanned<'s> = (Result<Token<'s>, LexError>, Span);

/// A token looked at but not consumed.
enum Peeked<'s> {
    Nothing,
    Token(Spanned<'s>),
    End,
}

struct Reader<'src, 'sink> {
    src: &'src str,
    lexer: logos::Lexer<'src, Token<'src>>,
    peeked: Peeked<'src>,
    sink: &'sink mut Diagnostics,
}

impl<'src> Reader<'src, '_> {
    fn next(&mut self) -> Option<Spanned<'src>> {
        match std::mem::replace(&mut self.peeked, Peeked::Nothing) {
            Peeked::Token(token) => return Some(token),
            Peeked::End => return None,
            Peeked::Nothing => {}
        }
        let token = self.lexer.next()?;
        Some((token, self.lexer.span().into()))
    }

    fn peek(&mut self) -> Option<&Spanned<'src>> {
        if matches!(self.peeked, Peeked::Nothing) {
            self.peeked = match self.next() {
                Some(token) => Peeked::Token(token),
                None => Peeked::End,
            };
        }
        match &self.peeked {
            Peeked::Token(token) => Some(token),
            Peeked::Nothing | Peeked::End => None,
        }
    }

    fn end_span(&self) -> Span {
        Span::at(self.src.len())
    }

    fn error(&mut self, span: Span, message: impl Into<String>) -> Stop {
        self.sink.push(Diagnostic::error(E0001, span, message));
        Stop
    }

    fn lex_error(&mut self, error: &LexError, span: Span) -> Stop {
        let span = match error {
            LexError::InvalidEscape(at) | LexError::ControlInString(at) => Span::new(*at, *at + 1),
            _ => span,
        };
        let mut diagnostic = Diagnostic::error(E0001, span, error.message());
        diagnostic = match error {
            LexError::UnterminatedString => diagnostic.with_help("add the closing `\"`"),
            LexError::InvalidEscape(_) => diagnostic.with_help(
                "valid escapes are \\\" \\\\ \\/ \\b \\f \\n \\r \\t and \\uXXXX; write a backslash as \\\\",
            ),
            LexError::Comment => diagnostic.with_help(
                "remove the comment, or use the `.opc` syntax, which allows `#` comments",
            ),
            LexError::SingleQuoted => diagnostic.with_help("replace the single quotes with `\"`"),
            _ => diagnostic,
        };
        self.sink.push(diagnostic);
        Stop
    }

    fn expect_value_token(&mut self, what: &str) -> Result<(Token<'src>, Span), Stop> {
        match self.next() {
            Some((Ok(token), span)) => Ok((token, span)),
            Some((Err(error), span)) => Err(self.lex_error(&error, span)),
            None => {
                let span = self.end_span();
                Err(self.error(span, format!("unexpected end of file, expected {what}")))
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node<'src>, Stop> {
        let (token, span) = self.expect_value_token("a value")?;
        let kind = match token {
            Token::Null => NodeKind::Null,
            Token::True => NodeKind::Bool(true),
            Token::False => NodeKind::Bool(false),
            Token::String(s) => NodeKind::String(s),
            Token::Number => NodeKind::Number(self.number(span)?),
            Token::LBrace => return self.object(span, depth + 1),
            Token::LBracket => return self.array(span, depth + 1),
            other => {
                return Err(self.error(
                    span,
                    format!("expected a value, found {}", describe(&other)),
                ));
            }
        };
        Ok(Node::new(kind, span))
    }

    fn number(&mut self, span: Span) -> Result<Number, Stop> {
        let text = &self.src[span.range()];
        match text.parse::<Number>() {
            Ok(n) if n.as_f64().is_some_and(f64::is_finite) => Ok(n),
            _ => {
                self.sink.push(
                    Diagnostic::error(E0004, span, format!("number `{text}` is out of range"))
                        .with_help("numbers must fit a 64-bit float; pass large values as strings"),
                );
                Err(Stop)
            }
        }
    }

    fn check_depth(&mut self, open: Span, depth: usize) -> Result<(), Stop> {
        if depth > MAX_DEPTH {
            self.sink.push(
                Diagnostic::error(
                    E0003,
                    open,
                    format!("arrays and objects are nested more than {MAX_DEPTH} deep"),
                )
                .with_help("flatten the structure; no workflow needs this depth"),
            );
            return Err(Stop);
        }
        Ok(())
    }

    /// After a `,`: is the next token the closer (a trailing comma)?
    fn trailing_comma(&mut self, comma: Span, closer: &Token<'_>) -> Result<(), Stop> {
        if matches!(self.peek(), Some((Ok(t), _)) if t == closer) {
            self.sink.push(
                Diagnostic::error(E0001, comma, "trailing comma")
                    .with_help("JSON does not allow a comma before the closing bracket")
                    .with_fix(Fix::replace("remove the comma", comma, "", None)),
            );
            return Err(Stop);
        }
        Ok(())
    }

    fn array(&mut self, open: Span, depth: usize) -> Result<Node<'src>, Stop> {
        self.check_depth(open, depth)?;
        let mut items = Vec::new();
        if let Some((Ok(Token::RBracket), close)) = self.peek() {
            let close = *close;
            self.next();
            return Ok(Node::new(NodeKind::Array(items), open.join(close)));
        }
        loop {
            items.push(self.value(depth)?);
            match self.next() {
                Some((Ok(Token::Comma), comma)) => self.trailing_comma(comma, &Token::RBracket)?,
                Some((Ok(Token::RBracket), close)) => {
                    return Ok(Node::new(NodeKind::Array(items), open.join(close)));
                }
                Some((Ok(other), span)) => {
                    let at = items.last().map_or(span, |n| Span::at(n.span.end as usize));
                    self.sink.push(
                        Diagnostic::error(
                            E0001,
                            span,
                            format!("expected `,` or `]`, found {}", describe(&other)),
                        )
                        .with_help("separate array items with commas")
                        .with_fix(Fix::replace(
                            "insert a comma",
                            at,
                            ",",
                            None,
                        )),
                    );
                    return Err(Stop);
                }
                Some((Err(error), span)) => return Err(self.lex_error(&error, span)),
                None => {
                    let span = self.end_span();
                    self.sink.push(
                        Diagnostic::error(E0001, span, "unexpected end of file, expected `]`")
                            .with_secondary(open, "the array starts here"),
                    );
                    return Err(Stop);
                }
            }
        }
    }

    fn object(&mut self, open: Span, depth: usize) -> Result<Node<'src>, Stop> {
        self.check_depth(open, depth)?;
        let mut members: Vec<Member<'src>> = Vec::new();
        if let Some((Ok(Token::RBrace), close)) = self.peek() {
            let close = *close;
            self.next();
            return Ok(Node::new(NodeKind::Object(members), open.join(close)));
        }
        // The comma before the member being read (none before the first).
        let mut comma_before: Option<Span> = None;
        loop {
            let (key, key_span) = match self.next() {
                Some((Ok(Token::String(key)), span)) => (key, span),
                Some((Ok(other), span)) => {
                    return Err(self.error(
                        span,
                        format!(
                            "expected a key in double quotes, found {}",
                            describe(&other)
                        ),
                    ));
                }
                Some((Err(LexError::BareWord(word)), span)) => {
                    self.sink.push(
                        Diagnostic::error(
                            E0001,
                            span,
                            "object keys must be strings in double quotes",
                        )
                        .with_fix(Fix::replace(
                            "quote the key",
                            span,
                            format!("\"{word}\""),
                            None,
                        )),
                    );
                    return Err(Stop);
                }
                Some((Err(error), span)) => return Err(self.lex_error(&error, span)),
                None => {
                    let span = self.end_span();
                    return Err(self.error(span, "unexpected end of file, expected a key"));
                }
            };
            match self.next() {
                Some((Ok(Token::Colon), _)) => {}
                Some((Ok(other), span)) => {
                    return Err(self.error(
                        span,
                        format!("expected `:` after the key, found {}", describe(&other)),
                    ));
                }
                Some((Err(error), span)) => return Err(self.lex_error(&error, span)),
                None => {
                    let span = self.end_span();
                    return Err(self.error(span, "unexpected end of file, expected `:`"));
                }
            }
            let value = self.value(depth)?;
            if let Some(first) = members.iter().find(|m| m.key == key) {
                self.sink.push(
                    Diagnostic::error(E0005, key_span, format!("duplicate key `{key}`"))
                        .with_secondary(first.key_span, "first defined here")
                        .with_help("remove one of them; only the first is used")
                        .with_fix(Fix::replace(
                            "remove the second member",
                            comma_before.unwrap_or(key_span).join(value.span),
                            "",
                            None,
                        )),
                );
            } else {
                members.push(Member {
                    key,
                    key_span,
                    value,
                });
            }
            match self.next() {
                Some((Ok(Token::Comma), comma)) => {
                    comma_before = Some(comma);
                    self.trailing_comma(comma, &Token::RBrace)?;
                }
                Some((Ok(Token::RBrace), close)) => {
                    return Ok(Node::new(NodeKind::Object(members), open.join(close)));
                }
                Some((Ok(other), span)) => {
                    let end = self.previous_end(span);
                    self.sink.push(
                        Diagnostic::error(
                            E0001,
                            span,
                            format!("expected `,` or `}}`, found {}", describe(&other)),
                        )
                        .with_help("separate object members with commas")
                        .with_fix(Fix::replace(
                            "insert a comma",
                            Span::at(end),
                            ",",
                            None,
                        )),
                    );
                    return Err(Stop);
                }
                Some((Err(error), span)) => return Err(self.lex_error(&error, span)),
                None => {
                    let span = self.end_span();
                    self.sink.push(
                        Diagnostic::error(E0001, span, "unexpected end of file, expected `}`")
                            .with_secondary(open, "the object starts here"),
                    );
                    return Err(Stop);
                }
            }
        }
    }

    /// End of the last non-blank byte before `span` (where a missing comma goes).
    fn previous_end(&self, span: Span) -> usize {
        let before = &self.src[..span.start as usize];
        before.trim_end().len()
    }
}

fn describe(token: &Token<'_>) -> String {
    match token {
        Token::LBrace => "`{`".into(),
        Token::RBrace => "`}`".into(),
        Token::LBracket => "`[`".into(),
        Token::RBracket => "`]`".into(),
        Token::Colon => "`:`".into(),
        Token::Comma => "`,`".into(),
        Token::True => "`true`".into(),
        Token::False => "`false`".into(),
        Token::Null => "`null`".into(),
        Token::Number => "a number".into(),
        Token::String(s) => format!("string \"{}\"", truncate(s, 20)),
        Token::Comment | Token::SingleQuoted | Token::BareWord => "an invalid token".into(),
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let cut: String = s.chars().take(max).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(src: &str) -> (Option<Node<'_>>, Vec<Diagnostic>) {
        let mut sink = Diagnostics::new();
        let node = parse(src, &mut sink);
        (node, sink.into_iter().collect())
    }

    #[test]
    fn keeps_spans_of_keys_and_values() {
        let src = r#"{"a": [1, "x"], "b": {"c": null}}"#;
        let (node, diags) = read(src);
        assert!(diags.is_empty());
        let node = node.unwrap();
        let a = node.get("a").unwrap();
        assert_eq!(&src[a.key_span.range()], "\"a\"");
        assert_eq!(&src[a.value.span.range()], "[1, \"x\"]");
        let c = node.get("b").unwrap().value.get("c").unwrap();
        assert_eq!(&src[c.value.span.range()], "null");
        assert_eq!(
            node.to_value(),
            serde_json::json!({"a": [1, "x"], "b": {"c": null}})
        );
    }

    #[test]
    fn reports_truncated_input() {
        let (node, diags) = read(r#"{"a": [1, 2"#);
        assert!(node.is_none());
        assert_eq!(diags.len(), 1);
        assert!(
            diags[0].message.contains("end of file"),
            "{}",
            diags[0].message
        );
    }

    #[test]
    fn reports_trailing_comma_with_fix() {
        let src = r#"{"a": 1,}"#;
        let (_, diags) = read(src);
        assert_eq!(diags[0].message, "trailing comma");
        assert_eq!(&src[diags[0].span().range()], ",");
        assert!(diags[0].fix.is_some());
    }

    #[test]
    fn reports_missing_comma_between_members() {
        let src = "{\"a\": 1\n \"b\": 2}";
        let (_, diags) = read(src);
        assert!(diags[0].message.starts_with("expected `,` or `}`"));
        let fix = diags[0].fix.as_ref().unwrap();
        assert_eq!(fix.edits[0].span, Span::at(7));
    }

    #[test]
    fn reports_duplicate_keys_and_keeps_the_first() {
        let (node, diags) = read(r#"{"a": 1, "a": 2}"#);
        assert_eq!(diags[0].code.id, "E0005");
        assert_eq!(node.unwrap().to_value(), serde_json::json!({"a": 1}));
    }

    #[test]
    fn bounds_nesting_depth() {
        let src = "[".repeat(10_000) + &"]".repeat(10_000);
        let (node, diags) = read(&src);
        assert!(node.is_none());
        assert_eq!(diags[0].code.id, "E0003");
    }

    #[test]
    fn rejects_out_of_range_numbers() {
        let (_, diags) = read("[1e400]");
        assert_eq!(diags[0].code.id, "E0004");
        let (node, diags) = read("[123456789012345678901234567890]");
        assert!(diags.is_empty());
        assert!(node.is_some());
    }

    #[test]
    fn rejects_content_after_the_document() {
        let (_, diags) = read("{} {}");
        assert!(diags[0].message.contains("after the end"));
    }
}
