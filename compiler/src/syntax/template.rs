//! `${{…}}` interpolation and the reference grammar.
//!
//! A string value is split into literal text and references:
//!
//! ```text
//! template  := (text | "$${{" | "${{" ws reference ws "}}")*
//! reference := name segment*
//! segment   := "." name | "[" quoted "]" | "[" digits "]"
//! name      := [A-Za-z0-9_-]+
//! quoted    := '…' | "…"        (\' \" \\ escapes)
//! ```
//!
//! `$${{` writes a literal `${{`. Spans produced here are byte offsets into
//! the *decoded* string; callers map them to the file with
//! [`super::json::lexer::raw_offset`].

use std::ops::Range;

/// One path segment after the namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Segment {
    /// `.name` or `['name']`.
    Key(String),
    /// `[3]`.
    Index(u64),
}

impl Segment {
    /// The segment as written canonically (`.a`, `['b-c d']`, `[0]`).
    pub fn render(&self) -> String {
        match self {
            Segment::Key(k) if is_name(k) => format!(".{k}"),
            Segment::Key(k) => format!("['{}']", k.replace('\\', "\\\\").replace('\'', "\\'")),
            Segment::Index(i) => format!("[{i}]"),
        }
    }
}

/// A parsed reference such as `steps.fetch.output.body[0]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawReference {
    /// The first name (`steps`, `inputs`…).
    pub namespace: String,
    /// Where the namespace is.
    pub namespace_span: Range<usize>,
    /// The segments with their spans.
    pub segments: Vec<(Segment, Range<usize>)>,
    /// The whole reference.
    pub span: Range<usize>,
}

/// A piece of a string value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Literal text (with `$${{` already turned into `${{`).
    Text(String),
    /// A `${{…}}` token; the span covers the whole token.
    Ref(RawReference, Range<usize>),
}

/// A problem in a template or reference, with its span in the decoded string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    /// What is wrong.
    pub message: String,
    /// Where.
    pub span: Range<usize>,
    /// How to fix it, when there is something to say.
    pub help: Option<String>,
    /// Text whose insertion at an offset of the string is the fix.
    pub insert: Option<(usize, &'static str)>,
}

fn error(message: impl Into<String>, span: Range<usize>) -> TemplateError {
    TemplateError {
        message: message.into(),
        span,
        help: None,
        insert: None,
    }
}

/// Is the string free of interpolation (no `${{` at all)?
pub fn is_plain(s: &str) -> bool {
    find_from(s, 0, b"${{").is_none()
}

/// The byte offset of `needle` in `s` at or after `from` (fast for the short
/// strings of workflow files: no searcher set-up).
fn find_from(s: &str, from: usize, needle: &[u8]) -> Option<usize> {
    let hay = s.as_bytes().get(from..)?;
    let (&first, rest) = needle.split_first()?;
    let mut i = 0;
    while let Some(p) = memchr::memchr(first, hay.get(i..)?) {
        let at = i + p;
        if hay.get(at + 1..).is_some_and(|tail| tail.starts_with(rest)) {
            return Some(from + at);
        }
        i = at + 1;
    }
    None
}

/// Splits a string into text and references.
pub fn parse_template(s: &str) -> Result<Vec<Piece>, TemplateError> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut i = 0;
    while let Some(start) = find_from(s, i, b"${{") {
        if start > 0 && s.as_bytes()[start - 1] == b'$' {
            // `$${{` is an escaped, literal `${{`.
            text.push_str(&s[i..start - 1]);
            text.push_str("${{");
            i = start + 3;
            continue;
        }
        text.push_str(&s[i..start]);
        let inner_start = start + 3;
        let Some(close) = find_from(s, inner_start, b"}}") else {
            // The reference ends where its characters do: `}}` goes there.
            let inner = &s[inner_start..];
            let spaces = inner.len() - inner.trim_start().len();
            let length = inner[spaces..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || "_-.[]'\"".contains(c)))
                .unwrap_or(inner.len() - spaces);
            // A single `}` where the reference ends was meant as `}}`.
            let end = inner_start + spaces + length;
            let insert = if s[end..].starts_with('}') {
                (end + 1, "}")
            } else {
                (end, "}}")
            };
            return Err(TemplateError {
                help: Some("close the token with `}}`".into()),
                insert: Some(insert),
                ..error("unclosed `${{`", start..s.len())
            });
        };
        if let Some(open) = find_from(&s[..close], inner_start, b"${{") {
            return Err(TemplateError {
                help: Some("interpolation tokens cannot be nested".into()),
                ..error("`${{` inside another `${{`", open..open + 3)
            });
        }
        let inner = &s[inner_start..close];
        let leading = inner.len() - inner.trim_start().len();
        let trimmed = inner.trim();
        if trimmed.is_empty() {
            return Err(error("empty `${{ }}`", start..close + 2));
        }
        let reference = parse_reference_at(trimmed, inner_start + leading)?;
        if !text.is_empty() {
            pieces.push(Piece::Text(std::mem::take(&mut text)));
        }
        pieces.push(Piece::Ref(reference, start..close + 2));
        i = close + 2;
    }
    text.push_str(&s[i..]);
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

/// Parses a bare reference (as in `data_inject` values).
pub fn parse_reference(s: &str) -> Result<RawReference, TemplateError> {
    let leading = s.len() - s.trim_start().len();
    parse_reference_at(s.trim(), leading)
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Can `s` be written as a `.name` segment?
pub fn is_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(is_name_byte)
}

/// Parses `s` (already trimmed) whose first byte is at `base` in the string.
fn parse_reference_at(s: &str, base: usize) -> Result<RawReference, TemplateError> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && is_name_byte(b[i]) {
        i += 1;
    }
    if i == 0 {
        return Err(TemplateError {
            help: Some("a reference starts with a namespace such as `inputs` or `steps`".into()),
            ..error("expected a name", base..base + s.len().max(1))
        });
    }
    let namespace = s[..i].to_owned();
    let namespace_span = base..base + i;
    let mut segments = Vec::new();
    while i < b.len() {
        let seg_start = i;
        match b[i] {
            b'.' => {
                i += 1;
                let name_start = i;
                while i < b.len() && is_name_byte(b[i]) {
                    i += 1;
                }
                if i == name_start {
                    return Err(error(
                        "expected a name after `.`",
                        base + seg_start..base + i + 1,
                    ));
                }
                segments.push((
                    Segment::Key(s[name_start..i].to_owned()),
                    base + seg_start..base + i,
                ));
            }
            b'[' => {
                i += 1;
                let (segment, after) = bracket(s, i).map_err(|e| TemplateError {
                    span: base + e.span.start..base + e.span.end,
                    ..e
                })?;
                i = after;
                segments.push((segment, base + seg_start..base + i));
            }
            _ => {
                let i = i + (s[i..].len() - s[i..].trim_start().len());
                let ch = s[i..].chars().next().unwrap_or(' ');
                return Err(TemplateError {
                    help: Some(
                        "references are paths such as `steps.fetch.output.body[0]`; \
                         expressions belong in CEL fields such as `condition`"
                            .into(),
                    ),
                    ..error(
                        format!("unexpected `{ch}` in reference"),
                        base + i..base + i + ch.len_utf8(),
                    )
                });
            }
        }
    }
    Ok(RawReference {
        namespace,
        namespace_span,
        segments,
        span: base..base + s.len(),
    })
}

/// Parses the inside of `[...]` starting at `i` (after `[`): the segment and the index after `]`.
fn bracket(s: &str, mut i: usize) -> Result<(Segment, usize), TemplateError> {
    let b = s.as_bytes();
    match b.get(i) {
        Some(&quote @ (b'\'' | b'"')) => {
            let start = i;
            i += 1;
            let mut key = String::new();
            loop {
                match b.get(i) {
                    None => {
                        return Err(error("unterminated quoted key", start..s.len()));
                    }
                    Some(b'\\') => {
                        let next = s[i + 1..].chars().next();
                        match next {
                            Some(c) => {
                                key.push(c);
                                i += 1 + c.len_utf8();
                            }
                            None => return Err(error("unterminated quoted key", start..s.len())),
                        }
                    }
                    Some(&c) if c == quote => {
                        i += 1;
                        break;
                    }
                    Some(_) => {
                        let c = s[i..].chars().next().unwrap_or(' ');
                        key.push(c);
                        i += c.len_utf8();
                    }
                }
            }
            if b.get(i) != Some(&b']') {
                return Err(error("expected `]`", i..i + 1));
            }
            Ok((Segment::Key(key), i + 1))
        }
        Some(c) if c.is_ascii_digit() => {
            let start = i;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            let index = s[start..i]
                .parse::<u64>()
                .map_err(|_| error("index is too large", start..i))?;
            if b.get(i) != Some(&b']') {
                return Err(error("expected `]`", i..i + 1));
            }
            Ok((Segment::Index(index), i + 1))
        }
        _ => Err(TemplateError {
            help: Some("write `['key']` or `[0]`".into()),
            ..error("expected a quoted key or an index", i..i + 1)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(s: &str) -> Vec<String> {
        parse_template(s)
            .unwrap()
            .into_iter()
            .map(|p| match p {
                Piece::Text(t) => format!("T({t})"),
                Piece::Ref(r, _) => {
                    let path: String = r.segments.iter().map(|(s, _)| s.render()).collect();
                    format!("R({}{path})", r.namespace)
                }
            })
            .collect()
    }

    #[test]
    fn splits_text_and_references() {
        assert_eq!(refs("plain"), ["T(plain)"]);
        assert_eq!(refs("${{ inputs.x }}"), ["R(inputs.x)"]);
        assert_eq!(
            refs("a ${{steps.fetch-a.output.body[0]}} b"),
            ["T(a )", "R(steps.fetch-a.output.body[0])", "T( b)"]
        );
        assert_eq!(
            refs("${{steps['review-gate'].choice}}"),
            ["R(steps.review-gate.choice)"]
        );
        assert_eq!(refs("${{inputs[\"a b\"]}}"), ["R(inputs['a b'])"]);
    }

    #[test]
    fn dollar_escapes_a_token() {
        assert_eq!(refs("cost: $${{x}}"), ["T(cost: ${{x}})"]);
    }

    #[test]
    fn reports_malformed_tokens() {
        let e = parse_template("x ${{ inputs.a").unwrap_err();
        assert_eq!(e.message, "unclosed `${{`");
        // A lone `}` closing it is made `}}`, not left after an inserted one.
        let half = parse_template("${{steps.x.y} done").unwrap_err();
        assert_eq!(half.insert, Some((13, "}")));
        assert_eq!(e.span, 2..14);
        let e = parse_template("${{ }}").unwrap_err();
        assert_eq!(e.message, "empty `${{ }}`");
        let e = parse_template("${{ a ${{ b }} }}").unwrap_err();
        assert!(e.message.contains("inside"));
        let e = parse_template("${{ inputs.a + 1 }}").unwrap_err();
        assert_eq!(e.message, "unexpected `+` in reference");
        assert_eq!(e.span, 13..14);
        let e = parse_template("${{ inputs. }}").unwrap_err();
        assert!(e.message.contains("after `.`"));
    }

    #[test]
    fn parses_bare_references() {
        let r = parse_reference(" loop.item ").unwrap();
        assert_eq!(r.namespace, "loop");
        assert_eq!(r.span, 1..10);
        assert!(parse_reference("steps['x'] == 1").is_err());
    }
}
