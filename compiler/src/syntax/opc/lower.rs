//! `.opc` tree → the JSON node tree the compiler lowers: a step
//! declaration becomes a step object, the step declarations of a block its
//! `steps` array. Spans point into the `.opc` text.

use std::borrow::Cow;

use serde_json::Number;

use super::tree::{Block, FLOW_TYPES, Item, Name, Step, Value, ValueKind};
use crate::diagnostics::codes::{E0004, E0008};
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::source::Span;
use crate::syntax::node::{Member, Node, NodeKind};

/// The object a block stands for.
pub fn block(b: &Block, sink: &mut Diagnostics) -> Node<'static> {
    let mut members = Vec::new();
    let mut steps: Option<(usize, Span, Vec<Node<'static>>)> = None;
    for item in &b.items {
        match item {
            Item::Member(m) => {
                if m.key.text == "steps"
                    && let Some((_, first, _)) = &steps
                {
                    sink.push(twice(m.key.span, *first));
                }
                members.push(Member {
                    key: Cow::Owned(m.key.text.clone()),
                    key_span: m.key.span,
                    value: value(&m.value, sink),
                });
            }
            Item::Step(s) => {
                let node = step(s, sink);
                if let Some((_, _, list)) = &mut steps {
                    list.push(node);
                } else {
                    if let Some(explicit) = members.iter().find(|m| m.key == "steps") {
                        sink.push(twice(explicit.key_span, s.span));
                    }
                    steps = Some((members.len(), s.span, vec![node]));
                }
            }
        }
    }
    if let Some((at, first, list)) = steps {
        let end = list.last().map_or(first, |n| n.span);
        let span = Span::new(first.start as usize, end.end as usize);
        members.insert(
            at,
            Member {
                key: Cow::Borrowed("steps"),
                key_span: first,
                value: Node::new(NodeKind::Array(list), span),
            },
        );
    }
    Node::new(NodeKind::Object(members), b.span)
}

fn twice(at: Span, first: Span) -> Diagnostic {
    Diagnostic::error(
        E0008,
        at,
        "this block has both a `steps` list and `step` declarations",
    )
    .with_secondary(first, "the first `step` declaration")
    .with_help("write the steps one way: `step` declarations, or a `steps: [...]` list")
}

fn value(v: &Value, sink: &mut Diagnostics) -> Node<'static> {
    let kind = match &v.kind {
        ValueKind::Str(raw) => NodeKind::String(Cow::Owned(
            serde_json::from_str::<String>(raw).unwrap_or_default(),
        )),
        ValueKind::Num(text) => number(text, v.span, sink),
        ValueKind::Bool(b) => NodeKind::Bool(*b),
        ValueKind::Null | ValueKind::Error => NodeKind::Null,
        ValueKind::List(items) => NodeKind::Array(items.iter().map(|i| value(i, sink)).collect()),
        ValueKind::Object(b) => return block(b, sink),
        ValueKind::Step(s) => return step(s, sink),
    };
    Node::new(kind, v.span)
}

fn number(text: &str, span: Span, sink: &mut Diagnostics) -> NodeKind<'static> {
    if let Ok(n) = text.parse::<Number>() {
        NodeKind::Number(n)
    } else {
        sink.push(Diagnostic::error(
            E0004,
            span,
            format!("`{text}` is out of range"),
        ));
        NodeKind::Null
    }
}

fn string(name: &Name) -> Node<'static> {
    Node::new(NodeKind::String(Cow::Owned(name.text.clone())), name.span)
}

fn member(key: &'static str, key_span: Span, value: Node<'static>) -> Member<'static> {
    Member {
        key: Cow::Borrowed(key),
        key_span,
        value,
    }
}

/// The step object a declaration stands for: `id`, the head as `type` or
/// `action`, `depends_on`, `condition`, then the body's members.
fn step(s: &Step, sink: &mut Diagnostics) -> Node<'static> {
    let mut members = vec![member("id", s.id.span, string(&s.id))];
    if let Some(head) = &s.head {
        let key = if !head.quoted && FLOW_TYPES.contains(&head.text.as_str()) {
            "type"
        } else {
            "action"
        };
        members.push(member(key, head.span, string(head)));
    }
    if let (Some(first), Some(last)) = (s.after.first(), s.after.last()) {
        let span = Span::new(first.span.start as usize, last.span.end as usize);
        let ids = s.after.iter().map(string).collect();
        members.push(member(
            "depends_on",
            first.span,
            Node::new(NodeKind::Array(ids), span),
        ));
    }
    if let Some(guard) = &s.when {
        members.push(member("condition", guard.span, value(guard, sink)));
    }
    if let Some(body) = &s.body
        && let NodeKind::Object(more) = block(body, sink).kind
    {
        members.extend(more);
    }
    Node::new(NodeKind::Object(members), s.span)
}
