//! Reading values: resolving slots, rendering templates, and building CEL
//! variables for a step instance.
//!
//! A reader is a frame (for `loop.*`/`iter`) and loop indices (to find the
//! instance of a step in the reader's iteration: a step nested in `d` loops
//! is read at the first `d` indices).

use std::sync::Arc;

use serde_json::{Map, Value};

use super::Vm;
use super::state::FrameId;
use crate::codes;
use crate::effect::{InstRef, SecretPart, SecretSite};
use crate::error::ActionError;
use crate::host::{Host, Vars};
use crate::instr::{ExprId, StepId, TemplateId};
use crate::plan::Plan;
use crate::program::{PathSeg, Slot, SlotSource, Template, TextPart};
use crate::value::{follow, write_text};

static NULL: Value = Value::Null;

impl Vm {
    /// The output of `step` as seen from loop indices `iters` (null when it has not finished).
    fn step_value(&self, step: StepId, iters: &[u32]) -> &Value {
        let depth = self.plan.program.steps[step as usize].loop_depth as usize;
        let Some(prefix) = iters.get(..depth) else {
            return &NULL;
        };
        let key = InstRef {
            step,
            iters: prefix.to_vec(),
        };
        // Outputs are set when an instance finishes, so an unfinished one reads as null.
        self.inst(&key).map_or(&NULL, |inst| &inst.output)
    }

    /// The innermost loop's item and index for frame `f`.
    fn loop_var(&self, f: FrameId) -> Option<(&Value, u32)> {
        let lf = self.frames.get(f)?.innermost_loop?;
        self.frames[lf]
            .loop_var
            .as_ref()
            .map(|(item, index)| (item, *index))
    }

    /// Resolves a slot read from frame `f` at indices `iters`.
    fn slot_value(&self, slot: &Slot, f: FrameId, iters: &[u32]) -> Result<Value, ActionError> {
        let missing = |at: usize| {
            let shown: String = slot
                .path
                .get(..=at)
                .unwrap_or_default()
                .iter()
                .map(render_segment)
                .collect();
            ActionError::new(
                codes::R0102,
                "INTERPOLATION_ERROR",
                format!(
                    "`${{{{{}}}}}` has no value: `{shown}` is missing",
                    slot.text
                ),
                false,
            )
        };
        let (root, lenient): (&Value, bool) = match &slot.source {
            // A declared input that was not given reads as null; one that
            // is neither declared nor given is missing.
            SlotSource::Inputs => {
                let declared = match slot.path.first() {
                    Some(PathSeg::Key(name)) => self.plan.declared_inputs.contains(name),
                    _ => true,
                };
                (&self.inputs, declared)
            }
            SlotSource::Step { step } => {
                let value = self.step_value(*step, iters);
                // A step that did not run (or gave nothing) reads as null.
                if value.is_null() {
                    return Ok(Value::Null);
                }
                (value, false)
            }
            SlotSource::Context => (&self.context, true),
            SlotSource::Workflow => (&self.workflow, false),
            SlotSource::LoopItem => (self.loop_var(f).map_or(&NULL, |(item, _)| item), false),
            SlotSource::LoopIndex => {
                return Ok(self
                    .loop_var(f)
                    .map_or(Value::Null, |(_, i)| Value::from(i)));
            }
            SlotSource::Secret { .. } => return Ok(Value::Null),
        };
        match follow(root, &slot.path) {
            Ok(v) => Ok(v.clone()),
            // A declared input or a context key that was not given reads as null.
            Err(0) if lenient => Ok(Value::Null),
            Err(0) if matches!(slot.source, SlotSource::Inputs) => {
                let mut error = missing(0);
                error.message = format!(
                    "`${{{{{}}}}}` has no value: the run was not given that input, and the workflow does not declare it (declare it in `input_schema` or `inputs`, or pass it)",
                    slot.text
                );
                Err(error)
            }
            Err(at) => Err(missing(at)),
        }
    }

    /// Renders template `t` for a reader. Secret sites are collected in
    /// `secrets` (where allowed) and left empty in the value.
    pub(super) fn render(
        &self,
        t: TemplateId,
        f: FrameId,
        iters: &[u32],
        secrets: Option<&mut Vec<SecretSite>>,
    ) -> Result<Value, ActionError> {
        let plan = Arc::clone(&self.plan);
        let template = &plan.program.templates[t as usize];
        let mut path = Vec::new();
        let mut sink = secrets;
        self.render_node(&plan, template, f, iters, &mut path, &mut sink)
    }

    fn render_node(
        &self,
        plan: &Plan,
        t: &Template,
        f: FrameId,
        iters: &[u32],
        path: &mut Vec<PathSeg>,
        secrets: &mut Option<&mut Vec<SecretSite>>,
    ) -> Result<Value, ActionError> {
        let program = &plan.program;
        Ok(match t {
            Template::Const(c) => program.consts[*c as usize].clone(),
            Template::Slot(s) => {
                let slot = &program.slots[*s as usize];
                if let SlotSource::Secret { name } = &slot.source {
                    if let Some(sites) = secrets.as_deref_mut() {
                        sites.push(SecretSite {
                            path: path.clone(),
                            parts: vec![SecretPart::Secret(name.clone())],
                        });
                    }
                    Value::String(String::new())
                } else {
                    if let Some(sites) = secrets.as_deref_mut() {
                        for (rest, parts) in self.passed_secrets(slot) {
                            let mut at = path.clone();
                            at.extend_from_slice(rest);
                            sites.push(SecretSite {
                                path: at,
                                parts: parts.to_vec(),
                            });
                        }
                    }
                    self.slot_value(slot, f, iters)?
                }
            }
            Template::Text(parts) => {
                let mut text = String::new();
                let mut secret_parts: Vec<SecretPart> = Vec::new();
                let mut has_secret = false;
                for part in parts {
                    match part {
                        TextPart::Text(t) => {
                            text.push_str(t);
                            secret_parts.push(SecretPart::Text(t.clone()));
                        }
                        TextPart::Slot(s) => {
                            let slot = &program.slots[*s as usize];
                            if let SlotSource::Secret { name } = &slot.source {
                                has_secret = true;
                                secret_parts.push(SecretPart::Secret(name.clone()));
                            } else {
                                let value = self.slot_value(slot, f, iters)?;
                                let passed = self.passed_secrets(slot);
                                if passed.is_empty() {
                                    let mut piece = String::new();
                                    write_text(&mut piece, &value);
                                    text.push_str(&piece);
                                    secret_parts.push(SecretPart::Text(piece));
                                } else {
                                    has_secret = true;
                                    for part in text_with_passed_secrets(&value, &passed) {
                                        if let SecretPart::Text(t) = &part {
                                            text.push_str(t);
                                        }
                                        secret_parts.push(part);
                                    }
                                }
                            }
                        }
                    }
                }
                if has_secret && let Some(sites) = secrets.as_deref_mut() {
                    sites.push(SecretSite {
                        path: path.clone(),
                        parts: secret_parts,
                    });
                }
                Value::String(text)
            }
            Template::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    path.push(PathSeg::Index(i as u64));
                    out.push(self.render_node(plan, item, f, iters, path, secrets)?);
                    path.pop();
                }
                Value::Array(out)
            }
            Template::Object(members) => {
                let mut out = Map::with_capacity(members.len());
                for (key, value) in members {
                    path.push(PathSeg::Key(key.clone()));
                    out.insert(
                        key.clone(),
                        self.render_node(plan, value, f, iters, path, secrets)?,
                    );
                    path.pop();
                }
                Value::Object(out)
            }
        })
    }

    /// The secrets a parent passed in the inputs that `slot` reads: the path
    /// of each below the slot's value, and its parts.
    fn passed_secrets(&self, slot: &Slot) -> Vec<(&[PathSeg], &[SecretPart])> {
        if self.input_secrets.is_empty() || !matches!(slot.source, SlotSource::Inputs) {
            return Vec::new();
        }
        self.input_secrets
            .iter()
            .filter_map(|site| {
                let rest = site.path.strip_prefix(slot.path.as_slice())?;
                Some((rest, site.parts.as_slice()))
            })
            .collect()
    }

    /// Renders the run's `output` template (after the steps).
    pub(super) fn render_output(&self, t: TemplateId) -> Result<Value, ActionError> {
        self.render(t, 0, &[], None)
    }

    /// Evaluates expression `expr` for instance `key`. For a loop's own
    /// `while`/`until` condition, `loop_index` is the iteration concerned:
    /// `iter` is bound to it and body steps are read at the latest
    /// finished iteration.
    pub(super) fn eval(
        &self,
        expr: ExprId,
        key: &InstRef,
        loop_index: Option<u32>,
        host: &dyn Host,
    ) -> Result<Value, ActionError> {
        let f = self.inst(key).map_or(0, |i| i.frame);
        let mut iters = key.iters.clone();
        let mut iter = self.loop_var(f);
        let item_of_loop;
        if let Some(index) = loop_index {
            item_of_loop = self.loop_item(key, index);
            iter = Some((&item_of_loop, index));
            // `until` reads the iteration just finished; `while` the one before the coming one.
            let finished = self.inst(key).and_then(|i| match i.flow.as_deref() {
                Some(super::state::Flow::Loop(state)) => state.results.len().checked_sub(1),
                _ => None,
            });
            if let Some(latest) = finished {
                iters.push(latest as u32);
            }
        }
        let e = &self.plan.program.exprs[expr as usize];
        let steps: Vec<(&str, &Value)> = if e.all_steps {
            (0..self.plan.program.steps.len() as u32)
                .map(|s| (self.plan.id(s), self.step_value(s, &iters)))
                .collect()
        } else {
            e.steps
                .iter()
                .map(|r| (r.name.as_str(), self.step_value(r.step, &iters)))
                .collect()
        };
        let vars = Vars {
            inputs: &self.inputs,
            steps: &steps,
            workflow: &self.workflow,
            context: &self.context,
            iter,
        };
        host.eval(expr, &vars)
    }

    /// The item of iteration `index` of loop `key` (null for `while`/`until`).
    fn loop_item(&self, key: &InstRef, index: u32) -> Value {
        match self.inst(key).and_then(|i| i.flow.as_deref()) {
            Some(super::state::Flow::Loop(state)) => state
                .items
                .as_ref()
                .and_then(|items| items.get(index as usize))
                .cloned()
                .unwrap_or(Value::Null),
            _ => Value::Null,
        }
    }

    /// The CEL variables as one JSON object, for actions that evaluate
    /// expressions themselves (`expr.eval`).
    pub(super) fn scope_value(&self, expr: ExprId, f: FrameId, iters: &[u32]) -> Value {
        let e = &self.plan.program.exprs[expr as usize];
        let mut steps = Map::new();
        if e.all_steps {
            for s in 0..self.plan.program.steps.len() as u32 {
                steps.insert(
                    self.plan.id(s).to_owned(),
                    self.step_value(s, iters).clone(),
                );
            }
        } else {
            for r in &e.steps {
                steps.insert(r.name.clone(), self.step_value(r.step, iters).clone());
            }
        }
        // Only what the expression reads: the rest would be copied for nothing.
        let reads = e.reads;
        let mut scope = Map::new();
        if reads.inputs {
            scope.insert("inputs".into(), self.inputs.clone());
        }
        scope.insert("steps".into(), Value::Object(steps));
        if reads.workflow {
            scope.insert("workflow".into(), self.workflow.clone());
        }
        if reads.context {
            scope.insert("context".into(), self.context.clone());
        }
        if reads.iter {
            let iter = self.loop_var(f).map_or(Value::Null, |(item, index)| {
                let mut m = Map::new();
                m.insert("item".into(), item.clone());
                m.insert("index".into(), index.into());
                Value::Object(m)
            });
            scope.insert("iter".into(), iter);
        }
        Value::Object(scope)
    }
}

/// `value` as text inside a string template, where it holds secrets a
/// parent passed at `passed`: the text in parts, the secrets named (a
/// string value is the secret's own parts; inside JSON text, escaped).
fn text_with_passed_secrets(
    value: &Value,
    passed: &[(&[PathSeg], &[SecretPart])],
) -> Vec<SecretPart> {
    if let Some((_, parts)) = passed.iter().find(|(rest, _)| rest.is_empty()) {
        return parts.to_vec();
    }
    // Mark each secret's string, render the JSON, then split at the marks.
    let mark = |i: usize| format!("\u{0}{i}\u{0}");
    let mut marked = value.clone();
    for (i, (rest, _)) in passed.iter().enumerate() {
        if let Some(slot) = crate::value::follow_mut(&mut marked, rest) {
            *slot = Value::String(mark(i));
        }
    }
    let mut text = String::new();
    write_text(&mut text, &marked);
    let mut parts = Vec::new();
    let mut rest = text.as_str();
    while let Some(start) = rest.find("\\u0000") {
        let after = &rest[start + 6..];
        let Some(end) = after.find("\\u0000") else {
            break;
        };
        let Ok(i) = after[..end].parse::<usize>() else {
            break;
        };
        parts.push(SecretPart::Text(rest[..start].to_owned()));
        for part in passed.get(i).map_or(&[][..], |(_, p)| p) {
            parts.push(match part {
                SecretPart::Text(t) => SecretPart::Text(escaped(t)),
                SecretPart::Secret(name) | SecretPart::Escaped(name) => {
                    SecretPart::Escaped(name.clone())
                }
            });
        }
        rest = &after[end + 6..];
    }
    parts.push(SecretPart::Text(rest.to_owned()));
    parts
}

/// `text` JSON-escaped, without the quotes.
fn escaped(text: &str) -> String {
    let quoted = Value::String(text.to_owned()).to_string();
    quoted[1..quoted.len() - 1].to_owned()
}

fn render_segment(segment: &PathSeg) -> String {
    match segment {
        PathSeg::Key(k) => format!(".{k}"),
        PathSeg::Index(i) => format!("[{i}]"),
    }
}
