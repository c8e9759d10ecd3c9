//! Lowering values: constants, `${{…}}` references into slots, templates.

use std::collections::HashMap;

use opcode_vm::instr::{ConstId, SlotId, TemplateId};
use opcode_vm::program::{PathSeg, Slot, SlotSource, Template, TextPart};
use serde_json::Value;

use crate::ast::{Reference, Template as AstTemplate, TemplateKind, TextPart as AstTextPart};
use crate::check::model::Model;
use crate::check::references::resolve_step;
use crate::source::{LineIndex, Span};
use crate::syntax::template::Segment;

/// The tables of constants, slots and templates being built.
#[derive(Default)]
pub struct Values {
    /// Constants.
    pub consts: Vec<Value>,
    /// Slots, deduplicated.
    pub slots: Vec<Slot>,
    /// Where each slot's first occurrence is (byte span).
    pub slot_spans: Vec<Span>,
    /// Templates.
    pub templates: Vec<Template>,
    slot_index: HashMap<(String, Vec<PathSeg>), SlotId>,
}

fn segment(s: &Segment) -> PathSeg {
    match s {
        Segment::Key(k) => PathSeg::Key(k.clone()),
        Segment::Index(i) => PathSeg::Index(*i),
    }
}

impl Values {
    /// Adds a constant.
    pub fn constant(&mut self, value: Value) -> ConstId {
        self.consts.push(value);
        (self.consts.len() - 1) as ConstId
    }

    /// Resolves a (checked) reference into a slot.
    pub fn slot(&mut self, r: &Reference, model: &Model<'_>) -> SlotId {
        let segments: Vec<&Segment> = r.segments.iter().map(|s| &s.value).collect();
        let (source, path): (SlotSource, Vec<PathSeg>) =
            match (r.namespace.value.as_str(), segments.as_slice()) {
                ("steps", [Segment::Key(id), rest @ ..]) => {
                    let step = resolve_step(model, id).unwrap_or_default() as u32;
                    let rest = match rest.first() {
                        Some(Segment::Key(k)) if k == "output" => &rest[1..],
                        _ => rest,
                    };
                    (
                        SlotSource::Step { step },
                        rest.iter().map(|s| segment(s)).collect(),
                    )
                }
                ("secrets", [Segment::Key(name), ..]) => {
                    (SlotSource::Secret { name: name.clone() }, Vec::new())
                }
                ("loop", [Segment::Key(k), rest @ ..]) if k == "item" => (
                    SlotSource::LoopItem,
                    rest.iter().map(|s| segment(s)).collect(),
                ),
                ("loop", _) => (SlotSource::LoopIndex, Vec::new()),
                ("workflow", all) => (
                    SlotSource::Workflow,
                    all.iter().map(|s| segment(s)).collect(),
                ),
                ("context", all) => (
                    SlotSource::Context,
                    all.iter().map(|s| segment(s)).collect(),
                ),
                (_, all) => (SlotSource::Inputs, all.iter().map(|s| segment(s)).collect()),
            };
        let key = (format!("{source:?}"), path.clone());
        if let Some(&id) = self.slot_index.get(&key) {
            return id;
        }
        let id = self.slots.len() as SlotId;
        self.slots.push(Slot {
            source,
            path,
            text: r.render(),
        });
        self.slot_spans.push(r.span);
        self.slot_index.insert(key, id);
        id
    }

    /// Lowers an AST template; returns its id.
    pub fn template(&mut self, t: &AstTemplate, model: &Model<'_>) -> TemplateId {
        let node = self.node(t, model);
        self.templates.push(node);
        (self.templates.len() - 1) as TemplateId
    }

    fn node(&mut self, t: &AstTemplate, model: &Model<'_>) -> Template {
        match &t.kind {
            TemplateKind::Literal(v) => Template::Const(self.constant(v.clone())),
            TemplateKind::Ref(r) => Template::Slot(self.slot(r, model)),
            TemplateKind::Text(parts) => Template::Text(
                parts
                    .iter()
                    .map(|p| match p {
                        AstTextPart::Text(t) => TextPart::Text(t.clone()),
                        AstTextPart::Ref(r) => TextPart::Slot(self.slot(r, model)),
                    })
                    .collect(),
            ),
            TemplateKind::Array(items) => {
                Template::Array(items.iter().map(|i| self.node(i, model)).collect())
            }
            TemplateKind::Object(members) => Template::Object(
                members
                    .iter()
                    .map(|(k, v)| (k.value.clone(), self.node(v, model)))
                    .collect(),
            ),
        }
    }

    /// A template that is the constant `{}` (an action without params).
    pub fn empty_object(&mut self) -> TemplateId {
        let c = self.constant(Value::Object(serde_json::Map::new()));
        self.templates.push(Template::Const(c));
        (self.templates.len() - 1) as TemplateId
    }

    /// Source positions of the slots.
    pub fn slot_positions(
        &self,
        src: &str,
        index: &LineIndex,
    ) -> Vec<opcode_vm::program::Position> {
        self.slot_spans
            .iter()
            .map(|span| {
                let lc = index.line_col(src, span.start as usize);
                opcode_vm::program::Position {
                    line: lc.line,
                    column: lc.column,
                }
            })
            .collect()
    }
}
