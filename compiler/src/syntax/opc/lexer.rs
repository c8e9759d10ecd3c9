//! The `.opc` lexer (logos): JSON's strings and numbers, bare words, the
//! punctuation of blocks and lists, and `#` comments.

use logos::Logos;

use crate::source::Span;

/// One token.
#[derive(Logos, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[logos(skip r"[ \t\r\n\f]+")]
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
    /// A JSON string literal, quotes and escapes as written.
    #[regex(r#""([^"\\\x00-\x1F]|\\(["\\/bfnrt]|u[0-9a-fA-F]{4}))*""#)]
    Str(&'s str),
    /// A JSON number.
    #[regex(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")]
    Num(&'s str),
    /// A bare word: a key, a step id, an action name (`http.get`), a
    /// keyword (`step`, `after`, `when`, `true`, `false`, `null`).
    #[regex(r"[A-Za-z_$][A-Za-z0-9_$-]*(\.[A-Za-z_$][A-Za-z0-9_$-]*)*")]
    Word(&'s str),
    /// A `#` comment, to the end of the line.
    #[regex(r"#[^\n]*", allow_greedy = true)]
    Comment(&'s str),
    /// Anything else.
    Error,
}

impl std::fmt::Display for Token<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Token::LBrace => f.write_str("`{`"),
            Token::RBrace => f.write_str("`}`"),
            Token::LBracket => f.write_str("`[`"),
            Token::RBracket => f.write_str("`]`"),
            Token::Colon => f.write_str("`:`"),
            Token::Comma => f.write_str("`,`"),
            Token::Str(_) => f.write_str("a string"),
            Token::Num(_) => f.write_str("a number"),
            Token::Word(w) => write!(f, "`{w}`"),
            Token::Comment(_) => f.write_str("a comment"),
            Token::Error => f.write_str("an unexpected character"),
        }
    }
}

/// The tokens of `src` with their spans, comments set apart.
pub struct Lexed<'s> {
    /// Every token but comments.
    pub tokens: Vec<(Token<'s>, Span)>,
    /// The comments (text from `#`), in order.
    pub comments: Vec<(Span, &'s str)>,
}

/// Lexes `src`. Characters no token matches become [`Token::Error`].
pub fn lex(src: &str) -> Lexed<'_> {
    let mut tokens = Vec::new();
    let mut comments = Vec::new();
    for (token, range) in Token::lexer(src).spanned() {
        let span = Span::new(range.start, range.end);
        match token {
            Ok(Token::Comment(text)) => comments.push((span, text)),
            Ok(token) => tokens.push((token, span)),
            Err(()) => tokens.push((Token::Error, span)),
        }
    }
    Lexed { tokens, comments }
}

/// Can `text` be written as a bare word (not a keyword that means a value)?
pub fn is_bare(text: &str) -> bool {
    !matches!(text, "true" | "false" | "null" | "step" | "after" | "when")
        && matches!(Token::lexer(text).next(), Some(Ok(Token::Word(w))) if w.len() == text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexes_words_strings_numbers_and_comments() {
        let lexed = lex(r#"step fetch http.get { url: "a\"b" n: -1.5e3 } # done"#);
        let kinds: Vec<Token<'_>> = lexed.tokens.iter().map(|(t, _)| *t).collect();
        assert_eq!(
            kinds,
            [
                Token::Word("step"),
                Token::Word("fetch"),
                Token::Word("http.get"),
                Token::LBrace,
                Token::Word("url"),
                Token::Colon,
                Token::Str(r#""a\"b""#),
                Token::Word("n"),
                Token::Colon,
                Token::Num("-1.5e3"),
                Token::RBrace,
            ]
        );
        assert_eq!(lexed.comments[0].1, "# done");
        assert!(is_bare("make-id") && is_bare("$schema") && !is_bare("2x") && !is_bare("step"));
        assert!(!is_bare("a b") && !is_bare(""));
    }
}
