//! The span-keeping JSON tree.
//!
//! The JSON reader produces these nodes before lowering to the workflow AST.
//! Every key and every value keeps its byte span. Strings borrow from the
//! source unless they contain escapes, so reading allocates little.

use std::borrow::Cow;

use serde_json::{Map, Number, Value};

use crate::source::Span;

/// A JSON value with its span.
#[derive(Debug, Clone, PartialEq)]
pub struct Node<'s> {
    /// The value.
    pub kind: NodeKind<'s>,
    /// Where it was written (for strings, including the quotes).
    pub span: Span,
}

/// The kinds of JSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind<'s> {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A number (integers that fit stay integers).
    Number(Number),
    /// A string, unescaped.
    String(Cow<'s, str>),
    /// An array.
    Array(Vec<Node<'s>>),
    /// An object, members in source order.
    Object(Vec<Member<'s>>),
}

/// One `"key": value` member of an object.
#[derive(Debug, Clone, PartialEq)]
pub struct Member<'s> {
    /// The unescaped key.
    pub key: Cow<'s, str>,
    /// The key's span, quotes included.
    pub key_span: Span,
    /// The value.
    pub value: Node<'s>,
}

impl<'s> Node<'s> {
    /// A node (used by the readers and by tests).
    pub fn new(kind: NodeKind<'s>, span: Span) -> Node<'s> {
        Node { kind, span }
    }

    /// The JSON type name, for messages: `object`, `array`, `string`…
    pub fn kind_name(&self) -> &'static str {
        match &self.kind {
            NodeKind::Null => "null",
            NodeKind::Bool(_) => "boolean",
            NodeKind::Number(_) => "number",
            NodeKind::String(_) => "string",
            NodeKind::Array(_) => "array",
            NodeKind::Object(_) => "object",
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            NodeKind::String(s) => Some(s),
            _ => None,
        }
    }

    /// The members, if this is an object.
    pub fn as_object(&self) -> Option<&[Member<'s>]> {
        match &self.kind {
            NodeKind::Object(members) => Some(members),
            _ => None,
        }
    }

    /// The items, if this is an array.
    pub fn as_array(&self) -> Option<&[Node<'s>]> {
        match &self.kind {
            NodeKind::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The member named `key`, if this is an object that has it.
    pub fn get(&self, key: &str) -> Option<&Member<'s>> {
        self.as_object()?.iter().find(|m| m.key == key)
    }

    /// The plain JSON value, spans dropped.
    pub fn to_value(&self) -> Value {
        match &self.kind {
            NodeKind::Null => Value::Null,
            NodeKind::Bool(b) => Value::Bool(*b),
            NodeKind::Number(n) => Value::Number(n.clone()),
            NodeKind::String(s) => Value::String(s.clone().into_owned()),
            NodeKind::Array(items) => Value::Array(items.iter().map(Node::to_value).collect()),
            NodeKind::Object(members) => {
                let mut map = Map::with_capacity(members.len());
                for m in members {
                    map.insert(m.key.clone().into_owned(), m.value.to_value());
                }
                Value::Object(map)
            }
        }
    }
}

/// Escapes one JSON Pointer reference token (RFC 6901).
pub fn pointer_token(token: &str) -> Cow<'_, str> {
    if token.contains(['~', '/']) {
        Cow::Owned(token.replace('~', "~0").replace('/', "~1"))
    } else {
        Cow::Borrowed(token)
    }
}

/// `pointer/key` with the key escaped.
pub(crate) fn child_pointer(pointer: &str, key: &str) -> String {
    let token = pointer_token(key);
    let mut out = String::with_capacity(pointer.len() + 1 + token.len());
    out.push_str(pointer);
    out.push('/');
    out.push_str(&token);
    out
}
