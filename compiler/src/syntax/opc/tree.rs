//! The `.opc` syntax tree: what the parser reads and the printer writes.
//! It keeps every span; comments are kept beside it (see [`super::print`]).

use crate::source::Span;

/// `{ … }`, or the whole file.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// Members and step declarations, in order.
    pub items: Vec<Item>,
    /// The braces (or the file).
    pub span: Span,
}

/// One item of a block.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// `key: value`, or `key { … }` / `key [ … ]`.
    Member(Member),
    /// `step …`: an entry of the block's `steps`.
    Step(Step),
}

impl Item {
    /// Where it was written.
    pub fn span(&self) -> Span {
        match self {
            Item::Member(m) => m.span,
            Item::Step(s) => s.span,
        }
    }
}

/// `key: value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    /// The key.
    pub key: Name,
    /// The value.
    pub value: Value,
    /// The whole member.
    pub span: Span,
}

/// A key, step id or action name: a bare word, or a string literal.
#[derive(Debug, Clone, PartialEq)]
pub struct Name {
    /// The text (decoded, for a string literal).
    pub text: String,
    /// Where it was written (quotes included).
    pub span: Span,
    /// Written as a string literal?
    pub quoted: bool,
}

/// A value.
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    /// What it is.
    pub kind: ValueKind,
    /// Where it was written.
    pub span: Span,
}

/// The kinds of value.
#[derive(Debug, Clone, PartialEq)]
pub enum ValueKind {
    /// A string literal, as written (quotes and escapes included).
    Str(String),
    /// A number, as written.
    Num(String),
    /// `true` or `false`.
    Bool(bool),
    /// `null`.
    Null,
    /// `[ … ]`.
    List(Vec<Value>),
    /// `{ … }`.
    Object(Block),
    /// `step …`.
    Step(Box<Step>),
    /// Something the parser could not read (already reported).
    Error,
}

/// `step ID [HEAD] [after ID, …] [when "CEL"] [{ … }]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The step id.
    pub id: Name,
    /// The action (`http.get`, or any string literal) or the flow type
    /// (`condition`, `loop`, `parallel`, `wait`, `reasoning`).
    pub head: Option<Name>,
    /// `depends_on`.
    pub after: Vec<Name>,
    /// The guard (`condition`).
    pub when: Option<Value>,
    /// The other fields.
    pub body: Option<Block>,
    /// The whole declaration.
    pub span: Span,
}

/// The flow step types a step head may name.
pub const FLOW_TYPES: &[&str] = &["condition", "loop", "parallel", "wait", "reasoning"];
