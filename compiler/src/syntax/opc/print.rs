//! JSON → `.opc` tree, and the `.opc` printer: one canonical layout, with
//! the comments of a parsed file put back where they were.

use super::lexer::is_bare;
use super::tree::{Block, FLOW_TYPES, Item, Member, Name, Step, Value, ValueKind};
use crate::source::Span;
use crate::syntax::node::{Node, NodeKind};

/// Widest line the printer puts a list or a small object on.
const WIDTH: usize = 88;

/// The `.opc` tree of a JSON object (the document's root).
pub fn from_node(node: &Node<'_>) -> Block {
    Block {
        items: node.as_object().map(object_items).unwrap_or_default(),
        span: node.span,
    }
}

fn object_items(members: &[crate::syntax::node::Member<'_>]) -> Vec<Item> {
    let mut items = Vec::new();
    for m in members {
        let steps = (m.key == "steps")
            .then(|| m.value.as_array())
            .flatten()
            .filter(|list| !list.is_empty() && list.iter().all(step_like));
        match steps {
            Some(list) => items.extend(list.iter().map(|s| Item::Step(step(s)))),
            None => items.push(Item::Member(Member {
                key: name(&m.key, m.key_span),
                value: value(&m.value),
                span: m.key_span,
            })),
        }
    }
    items
}

fn name(text: &str, span: Span) -> Name {
    Name {
        text: text.to_owned(),
        span,
        quoted: !is_bare(text),
    }
}

fn value(node: &Node<'_>) -> Value {
    let kind = match &node.kind {
        NodeKind::Null => ValueKind::Null,
        NodeKind::Bool(b) => ValueKind::Bool(*b),
        NodeKind::Number(n) => ValueKind::Num(n.to_string()),
        NodeKind::String(s) => ValueKind::Str(serde_json::to_string(s).unwrap_or_default()),
        NodeKind::Array(items) => ValueKind::List(items.iter().map(value).collect()),
        NodeKind::Object(_) if step_like(node) => ValueKind::Step(Box::new(step(node))),
        NodeKind::Object(members) => ValueKind::Object(Block {
            items: object_items(members),
            span: node.span,
        }),
    };
    Value {
        kind,
        span: node.span,
    }
}

/// An object written as a `step` declaration: a string `id`, and an
/// `action` string or a flow `type`.
fn step_like(node: &Node<'_>) -> bool {
    let text = |key| node.get(key).and_then(|m| m.value.as_str());
    text("id").is_some()
        && (text("action").is_some() || text("type").is_some_and(|t| FLOW_TYPES.contains(&t)))
}

fn step(node: &Node<'_>) -> Step {
    let members = node.as_object().unwrap_or_default();
    let text = |key| node.get(key).and_then(|m| m.value.as_str());
    let flow = text("type").filter(|t| FLOW_TYPES.contains(t));
    let head_key = if flow.is_some() { "type" } else { "action" };
    let head = node.get(head_key).and_then(|m| {
        let text = m.value.as_str()?;
        let quoted = head_key == "action" && (!is_bare(text) || FLOW_TYPES.contains(&text));
        Some(Name {
            text: text.to_owned(),
            span: m.value.span,
            quoted,
        })
    });
    let after: Option<Vec<Name>> = node.get("depends_on").and_then(|m| {
        let ids = m.value.as_array().filter(|a| !a.is_empty())?;
        ids.iter()
            .map(|id| id.as_str().map(|t| name(t, id.span)))
            .collect()
    });
    let when = node
        .get("condition")
        .filter(|m| m.value.as_str().is_some())
        .map(|m| value(&m.value));
    let id = node
        .get("id")
        .map(|m| name(m.value.as_str().unwrap_or_default(), m.value.span));
    let sugared = |key: &str| {
        key == "id"
            || key == head_key
            || (key == "depends_on" && after.is_some())
            || (key == "condition" && when.is_some())
    };
    let rest: Vec<_> = members
        .iter()
        .filter(|m| !sugared(&m.key))
        .cloned()
        .collect();
    Step {
        id: id.unwrap_or_else(|| name("", node.span)),
        head,
        after: after.unwrap_or_default(),
        when,
        body: (!rest.is_empty()).then(|| Block {
            items: object_items(&rest),
            span: node.span,
        }),
        span: node.span,
    }
}

/// Prints a document: its items, and the comments of its source.
pub fn document(root: &Block, comments: &[(Span, &str)], src: &str) -> String {
    let mut printer = Printer {
        out: String::new(),
        comments,
        next: 0,
        src,
    };
    printer.items(&root.items, 0);
    printer.flush_comments(usize::MAX, 0);
    while printer.out.ends_with("\n\n") {
        printer.out.pop();
    }
    if !printer.out.ends_with('\n') {
        printer.out.push('\n');
    }
    printer.out
}

struct Printer<'c> {
    out: String,
    comments: &'c [(Span, &'c str)],
    next: usize,
    src: &'c str,
}

impl Printer<'_> {
    fn indent(&mut self, depth: usize) {
        for _ in 0..depth {
            self.out.push_str("  ");
        }
    }

    /// Comments that start before `before`, each on its own line.
    fn flush_comments(&mut self, before: usize, depth: usize) {
        while let Some((span, text)) = self.comments.get(self.next) {
            if span.start as usize >= before {
                break;
            }
            self.indent(depth);
            self.out.push_str(text.trim_end());
            self.out.push('\n');
            self.next += 1;
        }
    }

    /// A comment on the same line as the end of what was just printed.
    fn trailing_comment(&mut self, end: usize) {
        let Some((span, text)) = self.comments.get(self.next) else {
            return;
        };
        let start = span.start as usize;
        let same_line = start >= end && !self.src.get(end..start).unwrap_or("\n").contains('\n');
        if same_line {
            if self.out.ends_with('\n') {
                self.out.pop();
            }
            self.out.push_str("  ");
            self.out.push_str(text.trim_end());
            self.out.push('\n');
            self.next += 1;
        }
    }

    fn has_comment_in(&self, span: Span) -> bool {
        self.comments[self.next..]
            .iter()
            .any(|(c, _)| c.start >= span.start && c.start < span.end)
    }

    fn items(&mut self, items: &[Item], depth: usize) {
        for (i, item) in items.iter().enumerate() {
            let span = item.span();
            self.flush_comments(span.start as usize, depth);
            let before = self.out.len();
            self.indent(depth);
            match item {
                Item::Member(m) => self.member(m, depth),
                Item::Step(s) => self.step(s, depth),
            }
            self.out.push('\n');
            self.trailing_comment(span.end as usize);
            let multi_line = self.out[before..].trim_end().contains('\n');
            let next_is_step = matches!(items.get(i + 1), Some(Item::Step(_)));
            if i + 1 < items.len()
                && (multi_line || (matches!(item, Item::Step(_)) && next_is_step && depth == 0))
            {
                self.out.push('\n');
            }
        }
    }

    fn name(&mut self, name: &Name) {
        if name.quoted || !is_bare(&name.text) {
            self.out
                .push_str(&serde_json::to_string(&name.text).unwrap_or_default());
        } else {
            self.out.push_str(&name.text);
        }
    }

    fn member(&mut self, m: &Member, depth: usize) {
        self.name(&m.key);
        if let ValueKind::Object(b) = &m.value.kind {
            self.out.push(' ');
            self.block(b, depth);
        } else {
            self.out.push_str(": ");
            self.value(&m.value, depth);
        }
    }

    fn step(&mut self, s: &Step, depth: usize) {
        self.out.push_str("step ");
        self.name(&s.id);
        if let Some(head) = &s.head {
            self.out.push(' ');
            if head.quoted || !FLOW_TYPES.contains(&head.text.as_str()) && !is_bare(&head.text) {
                self.out
                    .push_str(&serde_json::to_string(&head.text).unwrap_or_default());
            } else {
                self.out.push_str(&head.text);
            }
        }
        if !s.after.is_empty() {
            self.out.push_str(" after ");
            for (i, id) in s.after.iter().enumerate() {
                if i > 0 {
                    self.out.push_str(", ");
                }
                self.name(id);
            }
        }
        if let Some(guard) = &s.when {
            self.out.push_str(" when ");
            self.value(guard, depth);
        }
        if let Some(body) = &s.body {
            self.out.push(' ');
            self.block(body, depth);
        }
    }

    fn block(&mut self, b: &Block, depth: usize) {
        if b.items.is_empty() && !self.has_comment_in(b.span) {
            self.out.push_str("{}");
            return;
        }
        if let Some(line) = self.inline_block(b) {
            self.out.push_str(&line);
            return;
        }
        self.out.push_str("{\n");
        self.items(&b.items, depth + 1);
        self.flush_comments(b.span.end as usize, depth + 1);
        self.indent(depth);
        self.out.push('}');
    }

    /// `{ a: 1, b: "x" }` for a small block of scalars without comments.
    fn inline_block(&self, b: &Block) -> Option<String> {
        if self.has_comment_in(b.span) {
            return None;
        }
        let mut parts = Vec::new();
        for item in &b.items {
            let Item::Member(m) = item else { return None };
            let scalar = scalar(&m.value)?;
            let mut key = String::new();
            if m.key.quoted || !is_bare(&m.key.text) {
                key = serde_json::to_string(&m.key.text).unwrap_or_default();
            } else {
                key.push_str(&m.key.text);
            }
            parts.push(format!("{key}: {scalar}"));
        }
        let line = format!("{{ {} }}", parts.join(", "));
        (line.len() <= WIDTH / 2 && parts.len() <= 4).then_some(line)
    }

    fn value(&mut self, v: &Value, depth: usize) {
        match &v.kind {
            ValueKind::Object(b) => self.block(b, depth),
            ValueKind::Step(s) => self.step(s, depth),
            ValueKind::List(items) => self.list(items, v.span, depth),
            _ => self.out.push_str(&scalar(v).unwrap_or_default()),
        }
    }

    fn list(&mut self, items: &[Value], span: Span, depth: usize) {
        if items.is_empty() && !self.has_comment_in(span) {
            self.out.push_str("[]");
            return;
        }
        let inline: Option<Vec<String>> = items.iter().map(scalar).collect();
        if let Some(parts) = inline.filter(|_| !self.has_comment_in(span)) {
            let line = format!("[{}]", parts.join(", "));
            if line.len() <= WIDTH {
                self.out.push_str(&line);
                return;
            }
        }
        self.out.push_str("[\n");
        for item in items {
            self.flush_comments(item.span.start as usize, depth + 1);
            self.indent(depth + 1);
            self.value(item, depth + 1);
            self.out.push('\n');
            self.trailing_comment(item.span.end as usize);
        }
        self.flush_comments(span.end as usize, depth + 1);
        self.indent(depth);
        self.out.push(']');
    }
}

/// A scalar as written, or `None` for lists, objects and steps.
fn scalar(v: &Value) -> Option<String> {
    match &v.kind {
        ValueKind::Str(raw) | ValueKind::Num(raw) => Some(raw.clone()),
        ValueKind::Bool(b) => Some(b.to_string()),
        ValueKind::Null | ValueKind::Error => Some("null".into()),
        ValueKind::List(_) | ValueKind::Object(_) | ValueKind::Step(_) => None,
    }
}
