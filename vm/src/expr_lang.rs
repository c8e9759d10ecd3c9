//! Expr-language text (`expr.eval` with `language: expr`; spec/language.md,
//! "Expr"), read without parsing: its tokens, and opcode's predicate
//! shorthand. expr-lang writes the element of a predicate `#`, and lets
//! `{.score > 1}` stand for `{#.score > 1}`; the `expr-lang` crate that
//! evaluates it knows only the long form, so [`normalize`] writes it out.
//! The compiler and the runtime read the same text the same way.

use std::ops::Range;

/// What a token is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A name, a keyword, or a predicate variable (`#`, `#index`).
    Ident,
    /// A quoted or backquoted string, with its value.
    Str(String),
    /// A number.
    Number,
    /// An operator or bracket (`.`, `?.`, `(`, `==`…).
    Punct,
}

/// One token and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// What it is.
    pub kind: Kind,
    /// Its bytes in the source.
    pub range: Range<usize>,
}

/// Words that are operators (they chain like `+`).
pub const WORD_OPERATORS: &[&str] = &[
    "in",
    "not",
    "and",
    "or",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
];

/// Words that are keywords or literals.
const KEYWORDS: &[&str] = &["let", "if", "else", "true", "false", "nil"];

/// Is `word` an operator, a keyword or a literal, never a variable?
pub fn is_reserved(word: &str) -> bool {
    WORD_OPERATORS.contains(&word) || KEYWORDS.contains(&word)
}

const PUNCT_2: &[&str] = &["?.", "??", "..", "**", "==", "!=", "<=", ">=", "&&", "||"];

/// The tokens of `source`; an unclosed string or comment is an error
/// with the offset where it starts.
pub fn tokens(source: &str) -> Result<Vec<Token>, (usize, &'static str)> {
    let text = source.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if source[i..].starts_with("//") {
            i = source[i..].find('\n').map_or(text.len(), |n| i + n);
            continue;
        }
        if source[i..].starts_with("/*") {
            let end = source[i + 2..]
                .find("*/")
                .ok_or((start, "a comment is not closed"))?;
            i += end + 4;
            continue;
        }
        let bytes_prefix =
            matches!(c, b'b' | b'B') && matches!(text.get(i + 1), Some(b'\'' | b'"'));
        let kind = if matches!(c, b'\'' | b'"' | b'`') || bytes_prefix {
            let (value, end) = string(source, if bytes_prefix { i + 1 } else { i })
                .ok_or((start, "a string is not closed"))?;
            i = end;
            Kind::Str(value)
        } else if c.is_ascii_digit()
            || (c == b'.'
                && text.get(i + 1).is_some_and(u8::is_ascii_digit)
                && !ends_operand(&out, source))
        {
            i += 1;
            while i < text.len() {
                let d = text[i];
                let exponent_sign = matches!(d, b'+' | b'-') && matches!(text[i - 1], b'e' | b'E');
                let decimal_point =
                    d == b'.' && text.get(i + 1) != Some(&b'.') && !source[start..i].contains('.');
                if d.is_ascii_alphanumeric() || d == b'_' || exponent_sign || decimal_point {
                    i += 1;
                } else {
                    break;
                }
            }
            Kind::Number
        } else if c.is_ascii_alphabetic() || matches!(c, b'_' | b'$' | b'#') {
            i += 1;
            while i < text.len() && (text[i].is_ascii_alphanumeric() || text[i] == b'_') {
                i += 1;
            }
            Kind::Ident
        } else {
            let two = source.get(i..i + 2).filter(|t| PUNCT_2.contains(t));
            i += two.map_or_else(
                || source[i..].chars().next().map_or(1, char::len_utf8),
                str::len,
            );
            Kind::Punct
        };
        out.push(Token {
            kind,
            range: start..i,
        });
    }
    Ok(out)
}

/// A string starting at `at` (its quote): its value and where it ends.
fn string(source: &str, at: usize) -> Option<(String, usize)> {
    let quote = source[at..].chars().next()?;
    let mut value = String::new();
    let mut chars = source[at + 1..].char_indices();
    while let Some((n, c)) = chars.next() {
        match c {
            _ if c == quote => return Some((value, at + 1 + n + 1)),
            '\\' if quote != '`' => match chars.next()?.1 {
                'n' => value.push('\n'),
                't' => value.push('\t'),
                'r' => value.push('\r'),
                other => value.push(other),
            },
            _ => value.push(c),
        }
    }
    None
}

/// Does the last token end an operand (so a `.` after it reads a member)?
fn ends_operand(tokens: &[Token], source: &str) -> bool {
    tokens.last().is_some_and(|t| match &t.kind {
        Kind::Ident => {
            let word = &source[t.range.clone()];
            !is_reserved(word) || matches!(word, "true" | "false" | "nil")
        }
        Kind::Str(_) | Kind::Number => true,
        Kind::Punct => matches!(&source[t.range.clone()], ")" | "]" | "}"),
    })
}

/// `source` with the predicate shorthand written out: a `.name` that does
/// not follow an operand (`{.score > 1}`, `filter(xs, .ok)`) reads a member
/// of the element, `#.name`.
pub fn normalize(source: &str) -> Result<String, (usize, &'static str)> {
    Ok(shorthand_sites(source)?
        .into_iter()
        .rev()
        .fold(source.to_owned(), |mut text, at| {
            text.insert(at, '#');
            text
        }))
}

/// Where [`normalize`] inserts `#` (byte offsets in `source`, ascending).
pub fn shorthand_sites(source: &str) -> Result<Vec<usize>, (usize, &'static str)> {
    let tokens = tokens(source)?;
    let mut sites = Vec::new();
    for (n, token) in tokens.iter().enumerate() {
        let is_dot = matches!(token.kind, Kind::Punct) && &source[token.range.clone()] == ".";
        let names_member = tokens
            .get(n + 1)
            .is_some_and(|next| next.kind == Kind::Ident && next.range.start == token.range.end);
        if is_dot && names_member && !ends_operand(&tokens[..n], source) {
            sites.push(token.range.start);
        }
    }
    Ok(sites)
}

/// The offset in `source` of offset `at` in its [`normalize`]d text.
pub fn source_offset(sites: &[usize], at: usize) -> usize {
    let mut shift = 0;
    for &site in sites {
        if site + shift < at {
            shift += 1;
        }
    }
    at.saturating_sub(shift)
}

/// What the Expr engine says of a map literal whose value is not a
/// constant (see [`unbuilt_map_value`]).
pub const MAP_VALUES: &str = "a map literal's values must be constants (numbers, strings, true, false, nil) in opcode's Expr engine; compute the map in CEL (`\"language\": \"cel\"`), or return a list";

/// The first value of a map literal (`{"n": sum(xs)}`, `{a: {b: 1}}`) that
/// is not a constant: the `expr-lang` crate builds map literals from
/// constants only (numbers, strings, `true`, `false`, `nil`, a negative
/// number), and stops on anything else. Its bytes in `source`.
pub fn unbuilt_map_value(source: &str) -> Option<Range<usize>> {
    let tokens = tokens(source).ok()?;
    let text = |t: &Token| -> &str { &source[t.range.clone()] };
    let punct =
        |t: Option<&Token>, p: &str| t.is_some_and(|t| t.kind == Kind::Punct && text(t) == p);
    for (n, token) in tokens.iter().enumerate() {
        let key = tokens.get(n + 1);
        let opens_map = punct(Some(token), "{")
            && key.is_some_and(|k| matches!(k.kind, Kind::Ident | Kind::Str(_)))
            && punct(tokens.get(n + 2), ":");
        if !opens_map {
            continue;
        }
        let mut at = n + 3;
        while at < tokens.len() {
            let start = at;
            let mut depth = 0usize;
            while let Some(t) = tokens.get(at) {
                match (t.kind == Kind::Punct).then(|| text(t)) {
                    Some("(" | "[" | "{") => depth += 1,
                    Some(")" | "]" | "}" | ",") if depth == 0 => break,
                    Some(")" | "]" | "}") => depth -= 1,
                    _ => {}
                }
                at += 1;
            }
            let value = &tokens[start..at];
            let constant = match value {
                [] => true,
                [one] => match one.kind {
                    Kind::Str(_) | Kind::Number => true,
                    Kind::Ident => matches!(text(one), "true" | "false" | "nil"),
                    Kind::Punct => false,
                },
                [sign, number] => text(sign) == "-" && number.kind == Kind::Number,
                _ => false,
            };
            if !constant {
                return Some(value[0].range.start..value[value.len() - 1].range.end);
            }
            // Past the `,` to the next key's value, or the map ends.
            if !punct(tokens.get(at), ",") || !punct(tokens.get(at + 2), ":") {
                break;
            }
            at += 3;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_literals_of_constants_only_are_built() {
        fn found(source: &str) -> Option<&str> {
            unbuilt_map_value(source).map(|r| &source[r])
        }
        assert_eq!(found(r#"{"n": sum([1])}"#), Some("sum([1])"));
        assert_eq!(found(r#"{"a": {"b": 1}}"#), Some(r#"{"b": 1}"#));
        assert_eq!(found("{a: 1, b: x.y}"), Some("x.y"));
        assert_eq!(found(r#"{a: 1, "b": -2.5, c: nil, d: "s",}"#), None);
        assert_eq!(found("filter(xs, {.score > 1})"), None);
        assert_eq!(found("map(xs, {#.id})"), None);
        assert_eq!(found("{}"), None);
    }

    #[test]
    fn the_shorthand_is_written_out_where_no_operand_precedes() {
        for (source, normal) in [
            (
                "filter(steps['fetch-data'].body.items, {.score >= inputs.threshold})",
                "filter(steps['fetch-data'].body.items, {#.score >= inputs.threshold})",
            ),
            (
                "all(xs, .ok and .n in .ns)",
                "all(xs, #.ok and #.n in #.ns)",
            ),
            ("{a: 1}.a + (x).y + xs[0].z", "{a: 1}.a + (x).y + xs[0].z"),
            ("a?.b ?? .5 + 1..3", "a?.b ?? .5 + 1..3"),
            ("'.x' + `.y` // .z", "'.x' + `.y` // .z"),
            ("map(xs, .v * 1.5e-3)", "map(xs, #.v * 1.5e-3)"),
        ] {
            assert_eq!(normalize(source).as_deref(), Ok(normal), "{source}");
        }
    }

    #[test]
    fn strings_are_read_with_their_escapes() {
        let t = tokens(r#"steps["a\"b"] + b'x'"#).unwrap();
        assert_eq!(t[2].kind, Kind::Str("a\"b".into()));
        assert_eq!(t[5].kind, Kind::Str("x".into()));
        assert_eq!(tokens("'open").unwrap_err(), (0, "a string is not closed"));
        assert_eq!(tokens("1 /* open").unwrap_err().0, 2);
    }

    #[test]
    fn offsets_map_back_to_the_source() {
        let source = "filter(xs, {.a > .b}) +";
        let sites = shorthand_sites(source).unwrap();
        let normal = normalize(source).unwrap();
        let plus = normal.rfind('+').unwrap();
        assert_eq!(source_offset(&sites, plus), source.rfind('+').unwrap());
        assert_eq!(source_offset(&sites, 0), 0);
    }
}
