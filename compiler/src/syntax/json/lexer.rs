//! The JSON lexer (logos).
//!
//! Strings are scanned by a callback so that escapes are decoded once and
//! every malformed string gets a precise error: where the bad escape or the
//! raw control character is, or that the closing quote is missing. Common
//! non-JSON habits (comments, single quotes, `NaN`) lex as errors with their
//! own messages rather than as "unexpected character".

use std::borrow::Cow;

use logos::{FilterResult, Lexer, Logos};

/// A lexing problem, with the byte range it covers (relative to the input).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum LexError {
    /// A character that cannot start a token.
    Unexpected(char),
    /// A string without its closing quote.
    UnterminatedString,
    /// A backslash escape JSON does not have, at this byte offset.
    InvalidEscape(usize),
    /// A raw control character (such as a newline) inside a string, at this byte offset.
    ControlInString(usize),
    /// A `//` or `/* */` comment.
    Comment,
    /// A string in single quotes.
    SingleQuoted,
    /// A word such as `NaN`, `undefined` or `True`.
    BareWord(String),
    /// A malformed number such as `01`, `1.` or `+1`.
    BadNumber,
    /// End of input or an unclassified error.
    #[default]
    Other,
}

impl LexError {
    fn from_lexer<'s>(lex: &mut Lexer<'s, Token<'s>>) -> LexError {
        lex.slice()
            .chars()
            .next()
            .map_or(LexError::Other, LexError::Unexpected)
    }

    /// The message for people.
    pub fn message(&self) -> String {
        match self {
            LexError::Unexpected(c) => format!("unexpected character `{}`", c.escape_debug()),
            LexError::UnterminatedString => "string is missing its closing quote".into(),
            LexError::InvalidEscape(_) => "invalid escape sequence in string".into(),
            LexError::ControlInString(_) => {
                "raw control character in string (write `\\n`, `\\t`…)".into()
            }
            LexError::Comment => "JSON does not allow comments".into(),
            LexError::SingleQuoted => "JSON strings use double quotes".into(),
            LexError::BareWord(w) => format!("`{w}` is not a JSON value"),
            LexError::BadNumber => "malformed number".into(),
            LexError::Other => "unexpected input".into(),
        }
    }
}

/// One JSON token.
#[derive(Logos, Debug, Clone, PartialEq)]
#[logos(error(LexError, LexError::from_lexer))]
#[logos(skip r"[ \t\r\n]+")]
pub enum Token<'s> {
    /// `{`
    #[token("{")]
    LBrace,
    /// `}`
    #[token("}")]
    RBrace,
    /// `[`
    #[token("[")]
    LBracket,
    /// `]`
    #[token("]")]
    RBracket,
    /// `:`
    #[token(":")]
    Colon,
    /// `,`
    #[token(",")]
    Comma,
    /// `true`
    #[token("true")]
    True,
    /// `false`
    #[token("false")]
    False,
    /// `null`
    #[token("null")]
    Null,
    /// A number; its text is the token slice. The pattern is broad on purpose
    /// (`01`, `1.`, `+1` are lexed whole) so malformed numbers get one clear error.
    #[regex(r"[-+]?[0-9.][0-9A-Za-z_.+-]*", number)]
    Number,
    /// A string, unescaped (borrowed when it has no escapes).
    #[token("\"", lex_string)]
    String(Cow<'s, str>),
    /// Comments.
    #[regex(r"//[^\n]*|/\*([^*]|\*+[^*/])*\*+/", comment, allow_greedy = true)]
    Comment,
    /// Single-quoted strings.
    #[regex(r"'([^'\\\n]|\\.)*'?", single_quoted)]
    SingleQuoted,
    /// Identifiers that are not `true`, `false` or `null`.
    #[regex(r"[A-Za-z_][A-Za-z0-9_]*", bare_word)]
    BareWord,
}

fn number<'s>(lex: &mut Lexer<'s, Token<'s>>) -> FilterResult<(), LexError> {
    if is_json_number(lex.slice()) {
        FilterResult::Emit(())
    } else {
        FilterResult::Error(LexError::BadNumber)
    }
}

/// Does `s` follow JSON's number grammar exactly?
fn is_json_number(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(b.first() == Some(&b'-'));
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            digits(&mut i);
        }
        _ => return false,
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

fn comment<'s>(_: &mut Lexer<'s, Token<'s>>) -> FilterResult<(), LexError> {
    FilterResult::Error(LexError::Comment)
}

fn single_quoted<'s>(_: &mut Lexer<'s, Token<'s>>) -> FilterResult<(), LexError> {
    FilterResult::Error(LexError::SingleQuoted)
}

fn bare_word<'s>(lex: &mut Lexer<'s, Token<'s>>) -> FilterResult<(), LexError> {
    FilterResult::Error(LexError::BareWord(lex.slice().to_owned()))
}

/// Scans a string body after the opening quote, decoding escapes.
fn lex_string<'s>(lex: &mut Lexer<'s, Token<'s>>) -> FilterResult<Cow<'s, str>, LexError> {
    let rest = lex.remainder();
    let base = lex.span().end;
    match scan_string(rest) {
        Ok((decoded, consumed)) => {
            lex.bump(consumed);
            FilterResult::Emit(decoded)
        }
        Err((error, consumed)) => {
            lex.bump(consumed);
            FilterResult::Error(match error {
                LexError::InvalidEscape(at) => LexError::InvalidEscape(base + at),
                LexError::ControlInString(at) => LexError::ControlInString(base + at),
                other => other,
            })
        }
    }
}

/// Decodes a string body; returns the text and the bytes consumed (closing quote included).
///
/// On error returns the error (offsets relative to `rest`) and how far to skip.
fn scan_string(rest: &str) -> Result<(Cow<'_, str>, usize), (LexError, usize)> {
    let bytes = rest.as_bytes();
    let mut out = String::new();
    let mut escaped = false;
    let mut i = 0;
    let mut plain_from = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' if !escaped => return Ok((Cow::Borrowed(&rest[..i]), i + 1)),
            b'"' => {
                out.push_str(&rest[plain_from..i]);
                return Ok((Cow::Owned(out), i + 1));
            }
            b'\\' => {
                escaped = true;
                out.push_str(&rest[plain_from..i]);
                let (ch, len) = decode_escape(&rest[i..])
                    .ok_or_else(|| (LexError::InvalidEscape(i), skip_to_quote(bytes, i + 1)))?;
                out.push(ch);
                i += len;
                plain_from = i;
            }
            b'\n' | b'\r' => {
                // A newline almost always means the closing quote is missing.
                return Err((LexError::UnterminatedString, i));
            }
            c if c < 0x20 => return Err((LexError::ControlInString(i), skip_to_quote(bytes, i))),
            _ => i += 1,
        }
    }
    Err((LexError::UnterminatedString, bytes.len()))
}

fn skip_to_quote(bytes: &[u8], from: usize) -> usize {
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return i + 1,
            b'\\' => i += 2,
            b'\n' => return i,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// Decodes one escape at the start of `s` (which begins with `\`): the char and its length.
fn decode_escape(s: &str) -> Option<(char, usize)> {
    let b = s.as_bytes();
    let simple = match *b.get(1)? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => return decode_unicode(s),
        _ => return None,
    };
    Some((simple, 2))
}

fn hex4(s: &str, at: usize) -> Option<u32> {
    let digits = s.get(at..at + 4)?;
    if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

fn decode_unicode(s: &str) -> Option<(char, usize)> {
    let high = hex4(s, 2)?;
    if (0xD800..0xDC00).contains(&high) {
        // A surrogate pair: `\uD83D\uDE00`.
        if s.get(6..8) == Some("\\u")
            && let Some(low) = hex4(s, 8).filter(|l| (0xDC00..0xE000).contains(l))
        {
            let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
            return char::from_u32(code).map(|c| (c, 12));
        }
        return Some(('\u{FFFD}', 6));
    }
    if (0xDC00..0xE000).contains(&high) {
        return Some(('\u{FFFD}', 6));
    }
    char::from_u32(high).map(|c| (c, 6))
}

/// Maps a byte offset in a decoded string back to the raw source.
///
/// `raw` is the string's source text including its quotes; the result is
/// relative to `raw`'s start. Used to point CEL and interpolation errors at
/// the exact character even when the string contains escapes.
pub fn raw_offset(raw: &str, decoded_offset: usize) -> usize {
    let bytes = raw.as_bytes();
    let mut i = 1; // after the opening quote
    let mut decoded = 0;
    while i < bytes.len() && decoded < decoded_offset {
        if bytes[i] == b'"' {
            break;
        }
        if bytes[i] == b'\\' {
            match decode_escape(&raw[i..]) {
                Some((ch, len)) => {
                    decoded += ch.len_utf8();
                    i += len;
                }
                None => i += 1,
            }
        } else {
            decoded += 1;
            i += 1;
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(src: &str) -> Vec<Result<Token<'_>, LexError>> {
        Token::lexer(src).collect()
    }

    #[test]
    fn lexes_punctuation_and_literals() {
        assert_eq!(
            tokens(r#"{"a": [1, -2.5e3, true, null]}"#),
            vec![
                Ok(Token::LBrace),
                Ok(Token::String("a".into())),
                Ok(Token::Colon),
                Ok(Token::LBracket),
                Ok(Token::Number),
                Ok(Token::Comma),
                Ok(Token::Number),
                Ok(Token::Comma),
                Ok(Token::True),
                Ok(Token::Comma),
                Ok(Token::Null),
                Ok(Token::RBracket),
                Ok(Token::RBrace),
            ]
        );
    }

    #[test]
    fn decodes_escapes() {
        assert_eq!(
            tokens(r#""a\"b\\c\n\u00e9\ud83d\ude00""#),
            vec![Ok(Token::String("a\"b\\c\né😀".into()))]
        );
    }

    #[test]
    fn string_errors_are_precise() {
        assert_eq!(tokens(r#""abc"#), vec![Err(LexError::UnterminatedString)]);
        assert_eq!(tokens(r#""a\qb""#), vec![Err(LexError::InvalidEscape(2))]);
        assert_eq!(
            tokens("\"a\u{1}b\""),
            vec![Err(LexError::ControlInString(2))]
        );
    }

    #[test]
    fn names_common_mistakes() {
        assert_eq!(tokens("// hi"), vec![Err(LexError::Comment)]);
        assert_eq!(tokens("'x'"), vec![Err(LexError::SingleQuoted)]);
        assert_eq!(tokens("NaN"), vec![Err(LexError::BareWord("NaN".into()))]);
        assert_eq!(tokens("01"), vec![Err(LexError::BadNumber)]);
        assert_eq!(tokens("1."), vec![Err(LexError::BadNumber)]);
        assert_eq!(tokens("+1"), vec![Err(LexError::BadNumber)]);
        assert_eq!(tokens("1e"), vec![Err(LexError::BadNumber)]);
        assert_eq!(tokens("-0.5E+3"), vec![Ok(Token::Number)]);
    }

    #[test]
    fn maps_decoded_offsets_to_raw() {
        let raw = r#""a\nb""#;
        assert_eq!(raw_offset(raw, 0), 1);
        assert_eq!(raw_offset(raw, 1), 2);
        assert_eq!(raw_offset(raw, 2), 4);
    }
}
