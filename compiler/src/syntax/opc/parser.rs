//! The `.opc` parser (chumsky), kept apart because chumsky's types compile
//! slowly: recursion points are boxed. It recovers from errors inside
//! blocks and lists, so one pass reports several mistakes.

use chumsky::error::RichPattern;
use chumsky::input::ValueInput;
use chumsky::prelude::*;

use super::lexer::Token;
use super::tree::{Block, Item, Member, Name, Step, Value, ValueKind};
use crate::source::Span;

/// The error type of the parser.
pub type Error<'s> = Rich<'s, Token<'s>, SimpleSpan>;

/// Our span of a chumsky span, in order: at the end of the input chumsky
/// may join the end's span to an earlier one backwards.
fn span(s: SimpleSpan) -> Span {
    Span::new(s.start.min(s.end), s.start.max(s.end))
}

/// A syntax error, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// Where.
    pub span: Span,
    /// What was found (`None`: the end of the file).
    pub found: Option<String>,
    /// What would have been accepted.
    pub expected: Vec<String>,
}

/// What a parser expected, for people.
fn describe(pattern: &RichPattern<'_, Token<'_>>) -> String {
    match pattern {
        RichPattern::Token(token) => token.to_string(),
        RichPattern::Label(label) => label.to_string(),
        RichPattern::Identifier(word) => format!("`{word}`"),
        RichPattern::EndOfInput => "the end of the file".into(),
        RichPattern::Any | RichPattern::SomethingElse => "something else".into(),
    }
}

/// Parses a whole file: block items up to the end.
pub fn parse(tokens: &[(Token<'_>, SimpleSpan)], len: usize) -> (Option<Block>, Vec<SyntaxError>) {
    let input = tokens.map(SimpleSpan::from(len..len), |(t, s)| (t, s));
    let (root, errors) = document().parse(input).into_output_errors();
    let errors = errors
        .into_iter()
        .map(|e| SyntaxError {
            // An error at the end of the input is at its end.
            span: if e.found().is_none() {
                Span::at(len)
            } else {
                span(*e.span())
            },
            found: e.found().map(ToString::to_string),
            expected: {
                let mut expected: Vec<String> = e.expected().map(describe).collect();
                expected.sort();
                expected.dedup();
                expected
            },
        })
        .collect();
    (root, errors)
}

fn document<'s, I>() -> impl Parser<'s, I, Block, extra::Err<Error<'s>>>
where
    I: ValueInput<'s, Token = Token<'s>, Span = SimpleSpan>,
{
    items().then_ignore(end()).map_with(|items, e| Block {
        items,
        span: span(e.span()),
    })
}

fn items<'s, I>() -> impl Parser<'s, I, Vec<Item>, extra::Err<Error<'s>>> + Clone
where
    I: ValueInput<'s, Token = Token<'s>, Span = SimpleSpan>,
{
    recursive(|items| {
        let name = select! {
            Token::Word(w) => (w.to_owned(), false),
            Token::Str(s) => (serde_json::from_str::<String>(s).unwrap_or_default(), true),
        }
        .map_with(|(text, quoted), e| Name {
            text,
            span: span(e.span()),
            quoted,
        })
        .labelled("a name");

        let block = items
            .clone()
            .delimited_by(just(Token::LBrace), just(Token::RBrace))
            .map_with(|items, e| Block {
                items,
                span: span(e.span()),
            })
            .recover_with(via_parser(nested_delimiters(
                Token::LBrace,
                Token::RBrace,
                [(Token::LBracket, Token::RBracket)],
                |s| Block {
                    items: Vec::new(),
                    span: span(s),
                },
            )))
            .boxed();

        let value = recursive(|value| {
            let scalar = select! {
                Token::Str(s) => ValueKind::Str(s.to_owned()),
                Token::Num(n) => ValueKind::Num(n.to_owned()),
                Token::Word("true") => ValueKind::Bool(true),
                Token::Word("false") => ValueKind::Bool(false),
                Token::Word("null") => ValueKind::Null,
            };
            let list = value
                .then_ignore(just(Token::Comma).or_not())
                .repeated()
                .collect::<Vec<Value>>()
                .delimited_by(just(Token::LBracket), just(Token::RBracket))
                .map(ValueKind::List)
                .recover_with(via_parser(nested_delimiters(
                    Token::LBracket,
                    Token::RBracket,
                    [(Token::LBrace, Token::RBrace)],
                    |_| ValueKind::Error,
                )));
            let step = step(name, block.clone()).map(|s| ValueKind::Step(Box::new(s)));
            choice((scalar, list, block.clone().map(ValueKind::Object), step))
                .map_with(|kind, e| Value {
                    kind,
                    span: span(e.span()),
                })
                .labelled("a value")
                .boxed()
        });

        let nested = block
            .clone()
            .map_with(|b, e| Value {
                kind: ValueKind::Object(b),
                span: span(e.span()),
            })
            .or(value
                .clone()
                .filter(|v: &Value| matches!(v.kind, ValueKind::List(_))));
        let member = name
            .then(just(Token::Colon).ignore_then(value.clone()).or(nested))
            .map_with(|(key, value), e| {
                Item::Member(Member {
                    key,
                    value,
                    span: span(e.span()),
                })
            });
        let step_item = step(name, block).map(Item::Step);
        step_item
            .or(member)
            .then_ignore(just(Token::Comma).or_not())
            .recover_with(skip_then_retry_until(
                any().ignored(),
                one_of([Token::RBrace, Token::RBracket]).ignored().or(end()),
            ))
            .repeated()
            .collect::<Vec<Item>>()
            .boxed()
    })
}

fn step<'s, I, N, B>(name: N, block: B) -> impl Parser<'s, I, Step, extra::Err<Error<'s>>> + Clone
where
    I: ValueInput<'s, Token = Token<'s>, Span = SimpleSpan>,
    N: Parser<'s, I, Name, extra::Err<Error<'s>>> + Clone,
    B: Parser<'s, I, Block, extra::Err<Error<'s>>> + Clone,
{
    let not_member = just(Token::Colon).not().rewind();
    let head = name
        .clone()
        .filter(|n: &Name| n.quoted || !matches!(n.text.as_str(), "after" | "when"))
        .then_ignore(not_member);
    let after = just(Token::Word("after")).ignore_then(
        name.clone()
            .separated_by(just(Token::Comma))
            .at_least(1)
            .collect::<Vec<Name>>(),
    );
    let when = just(Token::Word("when")).ignore_then(
        select! { Token::Str(s) => ValueKind::Str(s.to_owned()) }.map_with(|kind, e| Value {
            kind,
            span: span(e.span()),
        }),
    );
    just(Token::Word("step"))
        .then(not_member)
        .ignore_then(name)
        .then(head.or_not())
        .then(after.or_not())
        .then(when.or_not())
        .then(block.or_not())
        .map_with(|((((id, head), after), when), body), e| Step {
            id,
            head,
            after: after.unwrap_or_default(),
            when,
            body,
            span: span(e.span()),
        })
}
