//! What references name, and whether it exists when they are read.
//!
//! Every `${{…}}` token, every `data_inject` reference and every step or
//! input a CEL expression mentions is resolved here, against the [`Model`]
//! and the [`Guarantees`]: a step must exist and be certain to have finished
//! when the referring code runs; `loop.*`/`iter` need an enclosing loop;
//! `secrets.*` are only resolved inside action parameters. Inputs not
//! declared in `input_schema` are warned about.

use std::collections::BTreeSet;

use opcode_vm::catalog::{Catalog, Ty};
use opcode_vm::policy::ParallelMode;

use super::cel::CelRefs;
use super::graph::{Graph, Guarantees};
use super::model::{BlockRole, Model, StepIdx};
use crate::ast::{Reference, StepKind, Template, TemplateKind, TextPart};
use crate::diagnostics::codes::{E0033, E0034, E0035, E0036, E0037, W0004, W0005};
use crate::diagnostics::{Diagnostic, Diagnostics, Fix, did_you_mean};
use crate::source::Span;
use crate::syntax::lower::value::NAMESPACES;
use crate::syntax::node::child_pointer;
use crate::syntax::template::Segment;

/// The fields of the `workflow` namespace.
pub const WORKFLOW_FIELDS: &[&str] = &[
    "run_id",
    "id",
    "name",
    "template_name",
    "template_version",
    "agent_id",
    "parent_id",
    "session_id",
    "workspace",
    "started_at",
    "error",
];

/// Where a reference is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    /// When step S runs: its params, guard, data_inject, condition expression.
    Step(StepIdx),
    /// A loop's `over`, read when the loop starts.
    LoopOver(StepIdx),
    /// A `while`/`until` loop's `condition`, read around each iteration.
    LoopCondition(StepIdx),
    /// The workflow `output`: after the steps, whichever ran.
    AfterRun,
    /// A step of an `on_complete`/`on_error` hook: after the steps, whichever
    /// ran, and after the hook's own earlier steps.
    Hook(StepIdx),
}

/// Resolves references against the model.
pub struct Resolver<'m, 'a> {
    /// The numbered workflow.
    pub model: &'m Model<'a>,
    /// Its dependencies.
    pub graph: &'m Graph,
    guarantees: Guarantees<'m, 'a>,
    catalog: &'m Catalog,
    /// Input names declared by `input_schema` or `inputs`; `None` when neither exists.
    declared_inputs: Option<BTreeSet<String>>,
    /// JSON types of declared inputs.
    input_types: Vec<(String, Ty)>,
    /// The dependencies a fix already adds (step, target): one fix each.
    dependencies_fixed: BTreeSet<(StepIdx, StepIdx)>,
}

impl<'m, 'a> Resolver<'m, 'a> {
    /// A resolver for one workflow.
    pub fn new(
        model: &'m Model<'a>,
        graph: &'m Graph,
        catalog: &'m Catalog,
        declared_inputs: Option<BTreeSet<String>>,
        input_types: Vec<(String, Ty)>,
    ) -> Resolver<'m, 'a> {
        Resolver {
            model,
            graph,
            guarantees: Guarantees::new(model, graph),
            catalog,
            declared_inputs,
            input_types,
            dependencies_fixed: BTreeSet::new(),
        }
    }

    /// Checks every reference in a template.
    pub fn template(
        &mut self,
        template: &Template,
        site: Site,
        secrets_allowed: bool,
        pointer: &str,
        sink: &mut Diagnostics,
    ) {
        match &template.kind {
            TemplateKind::Literal(_) => {}
            TemplateKind::Ref(r) => self.reference(r, site, secrets_allowed, pointer, sink),
            TemplateKind::Text(parts) => {
                for part in parts {
                    if let TextPart::Ref(r) = part {
                        self.reference(r, site, secrets_allowed, pointer, sink);
                    }
                }
            }
            TemplateKind::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.template(item, site, secrets_allowed, &format!("{pointer}/{i}"), sink);
                }
            }
            TemplateKind::Object(members) => {
                for (key, value) in members {
                    self.template(
                        value,
                        site,
                        secrets_allowed,
                        &child_pointer(pointer, &key.value),
                        sink,
                    );
                }
            }
        }
    }

    /// Checks one reference.
    pub fn reference(
        &mut self,
        r: &Reference,
        site: Site,
        secrets_allowed: bool,
        pointer: &str,
        sink: &mut Diagnostics,
    ) {
        let ns = r.namespace.value.as_str();
        match ns {
            "steps" => {
                let Some(first) = r.segments.first() else {
                    sink.push(
                        Diagnostic::error(E0037, r.span, "expected `steps.<id>`")
                            .with_help("name a step: `steps.fetch.output.body`")
                            .with_pointer(pointer),
                    );
                    return;
                };
                let Segment::Key(id) = &first.value else {
                    sink.push(
                        Diagnostic::error(E0037, first.span, "a step id is a name, not an index")
                            .with_pointer(pointer),
                    );
                    return;
                };
                let reference_span = r.namespace.span.join(first.span);
                if let Some(target) = self.step_id(id, reference_span, "steps", pointer, sink) {
                    self.step_access(target, site, reference_span, pointer, sink);
                    self.output_path(target, &r.segments[1..], pointer, sink);
                }
            }
            "inputs" => {
                if let Some(Segment::Key(name)) = r.segments.first().map(|s| &s.value) {
                    // `inputs.name`, the part a fix rewrites.
                    let span = r.namespace.span.join(r.segments[0].span);
                    self.input(name, span, "interpolation", pointer, sink);
                }
            }
            "workflow" => match r.segments.first().map(|s| &s.value) {
                Some(Segment::Key(field)) if WORKFLOW_FIELDS.contains(&field.as_str()) => {}
                Some(_) => {
                    let span = r.segments[0].span;
                    let mut d = Diagnostic::error(E0037, span, "unknown field of `workflow`")
                        .with_help(format!("`workflow` has {}", WORKFLOW_FIELDS.join(", ")))
                        .with_pointer(pointer);
                    if let Some(Segment::Key(field)) = r.segments.first().map(|s| &s.value)
                        && let Some(close) = did_you_mean(field, WORKFLOW_FIELDS)
                    {
                        d = d.with_fix(Fix::replace(
                            format!("replace with `{close}`"),
                            span,
                            format!(".{close}"),
                            None,
                        ));
                    }
                    sink.push(d);
                }
                None => sink.push(
                    Diagnostic::error(E0037, r.span, "expected `workflow.<field>`")
                        .with_help(format!("`workflow` has {}", WORKFLOW_FIELDS.join(", ")))
                        .with_pointer(pointer),
                ),
            },
            "context" => {}
            "secrets" => {
                if r.segments.len() != 1 || !matches!(r.segments[0].value, Segment::Key(_)) {
                    sink.push(
                        Diagnostic::error(E0037, r.span, "expected `secrets.<NAME>`")
                            .with_help("a secret is a string; it has no fields")
                            .with_pointer(pointer),
                    );
                } else if !secrets_allowed {
                    sink.push(
                        Diagnostic::error(E0037, r.span, "secrets can only be used in the `params` of an action that uses them")
                            .with_help("secret values are resolved when an action is dispatched and are never stored; they cannot flow into outputs, decisions, expressions or `workflow.context`, which keeps its data")
                            .with_pointer(pointer),
                    );
                }
            }
            "loop" => {
                self.loop_access(site, r.span, "loop", pointer, sink);
                match r.segments.first().map(|s| &s.value) {
                    Some(Segment::Key(k)) if k == "item" || k == "index" => {
                        if k == "index" && r.segments.len() > 1 {
                            sink.push(
                                Diagnostic::error(
                                    E0037,
                                    r.segments[1].span,
                                    "`loop.index` is a number; it has no fields",
                                )
                                .with_pointer(pointer),
                            );
                        }
                    }
                    _ => sink.push(
                        Diagnostic::error(E0037, r.span, "expected `loop.item` or `loop.index`")
                            .with_help(
                                "`loop` names the innermost loop only; to read an outer loop's item in an inner loop, \
                                 give the inner loop pairs in its `over`, where `iter.item` is still the outer item \
                                 (`iter.item.parts.map(p, {\"outer\": iter.item, \"part\": p})`), then read \
                                 `loop.item.outer` and `loop.item.part`",
                            )
                            .with_pointer(pointer),
                    ),
                }
            }
            other => {
                let mut d = Diagnostic::error(
                    E0033,
                    r.namespace.span,
                    format!("unknown namespace `{other}`"),
                )
                .with_help(format!(
                    "references start with one of {}",
                    NAMESPACES.join(", ")
                ))
                .with_pointer(pointer);
                if let Some(close) = did_you_mean(other, NAMESPACES) {
                    d = d.with_fix(Fix::replace(
                        format!("replace with `{close}`"),
                        r.namespace.span,
                        close,
                        None,
                    ));
                } else if other == "env" {
                    d = d.with_help(
                        "there is no `env` namespace: pass values as inputs, or as secrets",
                    );
                }
                sink.push(d);
            }
        }
    }

    /// Checks the references of a parsed CEL expression.
    pub fn cel(&mut self, refs: &CelRefs, site: Site, pointer: &str, sink: &mut Diagnostics) {
        for (id, span) in &refs.steps {
            if let Some(target) = self.step_id(id, *span, "cel", pointer, sink) {
                self.step_access(target, site, *span, pointer, sink);
            }
        }
        sink.extend(super::cel::unknown_functions(refs, pointer));
        sink.extend(super::cel::unknown_variables(refs, pointer));
        for (id, field, span) in &refs.step_fields {
            if let (Some(&target), Some(span)) = (self.model.by_id.get(id.as_str()), span) {
                self.cel_field(target, field, *span, pointer, sink);
            }
        }
        for (name, span) in &refs.inputs {
            self.input(name, *span, "cel", pointer, sink);
        }
        if let Some(span) = refs.iter {
            self.loop_access(site, span, "iter", pointer, sink);
        }
        if let Some(span) = refs.secrets {
            sink.push(super::cel::secrets_refused(span, pointer));
        }
    }

    /// Resolves a step id (plain, or opcode's namespaced `parent.branch.child`).
    fn step_id(
        &self,
        id: &str,
        span: Span,
        style: &str,
        pointer: &str,
        sink: &mut Diagnostics,
    ) -> Option<StepIdx> {
        if let Some(&target) = self.model.by_id.get(id) {
            return Some(target);
        }
        if let Some(target) = self.namespaced(id) {
            let plain = self.model.steps[target].step.id.value.clone();
            let replacement = if style == "cel" {
                format!("steps['{plain}']")
            } else {
                format!("steps.{plain}")
            };
            sink.push(
                Diagnostic::warning(W0005, span, format!("`{id}` is opcode's namespaced id of step `{plain}`"))
                    .with_help("step ids are unique in the whole workflow: refer to nested steps by their own id")
                    .with_fix(Fix::replace(format!("replace with `{replacement}`"), span, replacement, None))
                    .with_pointer(pointer),
            );
            return Some(target);
        }
        let ids: Vec<&str> = self.model.by_id.keys().copied().collect();
        let mut d =
            Diagnostic::error(E0034, span, format!("no step has id `{id}`")).with_pointer(pointer);
        if let Some(close) = did_you_mean(id, &ids) {
            let replacement = if style == "cel" {
                format!("steps['{close}']")
            } else {
                format!("steps.{close}")
            };
            d = d
                .with_help(format!("did you mean `{close}`?"))
                .with_fix(Fix::replace(
                    format!("replace with `{replacement}`"),
                    span,
                    replacement,
                    None,
                ));
        }
        sink.push(d);
        None
    }

    fn namespaced(&self, id: &str) -> Option<StepIdx> {
        namespaced(self.model, id)
    }

    /// Is step `target` certain to be finished at `site`? Reports why not.
    fn step_access(
        &mut self,
        target: StepIdx,
        site: Site,
        span: Span,
        pointer: &str,
        sink: &mut Diagnostics,
    ) {
        let ok = match site {
            Site::Step(s) | Site::LoopOver(s) => self.guarantees.finished_before(s, target),
            Site::LoopCondition(l) => {
                self.guarantees.finished_before(l, target) || self.in_body_of(target, l)
            }
            Site::AfterRun => !self.in_any_loop(target),
            Site::Hook(s) => {
                self.guarantees.finished_before(s, target)
                    || (!self.in_any_loop(target) && !self.in_same_hook(s, target))
            }
        };
        if ok {
            return;
        }
        let id = &self.model.steps[target].step.id.value;
        let (reader, reader_idx) = match site {
            Site::Step(s) | Site::LoopOver(s) | Site::LoopCondition(s) | Site::Hook(s) => {
                (format!("`{}`", self.model.steps[s].step.id.value), Some(s))
            }
            Site::AfterRun => ("the workflow output and hooks".to_owned(), None),
        };
        let mut d = Diagnostic::error(
            E0035,
            span,
            format!("step `{id}` may not have finished when {reader} runs"),
        )
        .with_secondary(self.model.steps[target].step.id.span, "defined here")
        .with_pointer(pointer);
        d = match self.why_not_finished(target, reader_idx) {
            Reason::InLoop(l) => d.with_help(format!(
                "`{id}` runs once per iteration of loop `{}`; read the loop's output instead: `steps.{}.output.results`",
                self.model.steps[l].step.id.value, self.model.steps[l].step.id.value
            )),
            Reason::Encloses => d.with_help(format!("`{id}` contains this step, so it is still running")),
            Reason::Itself => d.with_help("a step cannot read its own output"),
            Reason::InBranch(c) => d.with_help(format!(
                "`{id}` is inside a branch of `{}` that may not be taken; read `steps.{}.output` instead",
                self.model.steps[c].step.id.value, self.model.steps[c].step.id.value
            )),
            Reason::InRace(p) => d.with_help(format!(
                "`{id}` is inside `{}`, a race whose losing branches are cancelled",
                self.model.steps[p].step.id.value
            )),
            Reason::Fallback => d.with_help(format!("`{id}` only runs as a fallback")),
            Reason::Later => d.with_help(format!("`{id}` comes later in the same list; move it earlier")),
            Reason::NotDependency(s, on) => {
                let step = self.model.steps[s].step;
                let named = &self.model.steps[on].step.id.value;
                let mut d = d.with_help(format!("add `{named}` to the `depends_on` of `{}`", step.id.value));
                // Several reads need one dependency, not one each.
                if self.dependencies_fixed.insert((s, on))
                    && let Some(fix) = self.add_dependency_fix(s, on)
                {
                    d = d.with_fix(fix);
                }
                d
            }
        };
        sink.push(d);
    }

    /// Are both steps in the same workflow hook?
    fn in_same_hook(&self, a: StepIdx, b: StepIdx) -> bool {
        let top = |s: StepIdx| self.model.path_of(s).first().copied();
        top(a) == top(b)
    }

    fn in_any_loop(&self, target: StepIdx) -> bool {
        !self.model.steps[target].loops.is_empty()
    }

    /// Is `target` inside loop `l`'s body, and not inside a deeper loop?
    fn in_body_of(&self, target: StepIdx, l: StepIdx) -> bool {
        self.model.steps[target].loops.last() == Some(&l)
    }

    fn why_not_finished(&self, target: StepIdx, reader: Option<StepIdx>) -> Reason {
        let reader_loops = reader
            .map(|r| self.model.steps[r].loops.clone())
            .unwrap_or_default();
        if let Some(&l) = self.model.steps[target]
            .loops
            .iter()
            .find(|l| !reader_loops.contains(l))
        {
            return Reason::InLoop(l);
        }
        if let Some(r) = reader {
            if r == target {
                return Reason::Itself;
            }
            if self.model.is_inside(r, target) {
                return Reason::Encloses;
            }
        }
        if self.graph.is_fallback_only(target) {
            return Reason::Fallback;
        }
        // The closest enclosing flow step of `target` that does not enclose the reader.
        let mut current = self.model.steps[target].parent;
        while let Some(p) = current {
            if reader.is_some_and(|r| self.model.is_inside(r, p)) {
                break;
            }
            match &self.model.steps[p].step.kind {
                StepKind::Condition(_) => return Reason::InBranch(p),
                StepKind::Parallel(par) if par.mode.value == ParallelMode::Race => {
                    return Reason::InRace(p);
                }
                _ => {}
            }
            current = self.model.steps[p].parent;
        }
        let Some(r) = reader else {
            return Reason::NotDependency(target, target);
        };
        // The ancestor of the reader that is a sibling of the target.
        let target_block = self.model.steps[target].block;
        let mut sibling = r;
        while self.model.steps[sibling].block != target_block {
            match self.model.steps[sibling].parent {
                Some(p) => sibling = p,
                // The target is inside a flow step: the reader depends on
                // the ancestor of the target that is in the reader's block.
                None => return Reason::NotDependency(r, self.ancestor_in(target, r)),
            }
        }
        if self.model.blocks[target_block].role != BlockRole::Root {
            return Reason::Later;
        }
        Reason::NotDependency(sibling, target)
    }

    /// The ancestor of `target` (or itself) in the block of `reader`.
    fn ancestor_in(&self, target: StepIdx, reader: StepIdx) -> StepIdx {
        let block = self.model.steps[reader].block;
        let mut at = target;
        while self.model.steps[at].block != block {
            match self.model.steps[at].parent {
                Some(p) => at = p,
                None => return target,
            }
        }
        at
    }

    /// A fix adding `target` to step `s`'s `depends_on`.
    fn add_dependency_fix(&self, s: StepIdx, target: StepIdx) -> Option<Fix> {
        let step = self.model.steps[s].step;
        let target_id = &self.model.steps[target].step.id.value;
        let edit_span = match step.depends_on.last() {
            Some(last) => Span::at(last.span.end as usize),
            None => Span::at(step.span.start as usize + 1),
        };
        let replacement = if step.depends_on.is_empty() {
            format!("\"depends_on\": [\"{target_id}\"], ")
        } else {
            format!(", \"{target_id}\"")
        };
        if step.depends_on.is_empty() && self.model.steps[s].step.id.value.is_empty() {
            return None;
        }
        Some(Fix {
            message: format!("add `{target_id}` to `depends_on`"),
            edits: vec![crate::diagnostics::TextEdit {
                span: edit_span,
                replacement,
            }],
            // RFC 6902 appends to an array that exists; else the array is added.
            patch: vec![if step.depends_on.is_empty() {
                crate::diagnostics::PatchOp::Add {
                    path: format!("{}/depends_on", step.pointer),
                    value: serde_json::json!([target_id]),
                }
            } else {
                crate::diagnostics::PatchOp::Add {
                    path: format!("{}/depends_on/-", step.pointer),
                    value: target_id.clone().into(),
                }
            }],
        })
    }

    fn loop_access(
        &self,
        site: Site,
        span: Span,
        spelling: &str,
        pointer: &str,
        sink: &mut Diagnostics,
    ) {
        let in_loop = match site {
            Site::Step(s) | Site::LoopOver(s) | Site::Hook(s) => {
                !self.model.steps[s].loops.is_empty()
            }
            Site::LoopCondition(_) => true,
            Site::AfterRun => false,
        };
        if !in_loop {
            sink.push(
                Diagnostic::error(E0036, span, format!("`{spelling}` is only defined inside a loop body"))
                    .with_help("`loop.item`/`loop.index` (and `iter.item`/`iter.index` in CEL) name the current iteration of the innermost loop")
                    .with_pointer(pointer),
            );
        }
    }

    /// Warns about `inputs.<name>` (at `span`, written in `style`:
    /// `interpolation` or `cel`) when inputs are declared and it is not.
    fn input(&self, name: &str, span: Span, style: &str, pointer: &str, sink: &mut Diagnostics) {
        let Some(declared) = &self.declared_inputs else {
            return;
        };
        if declared.contains(name) {
            return;
        }
        let names: Vec<&str> = declared.iter().map(String::as_str).collect();
        let mut d = Diagnostic::warning(
            W0004,
            span,
            format!("input `{name}` is not declared (in `input_schema` or `inputs`)"),
        )
        .with_pointer(pointer)
        .with_note("a run that does not pass it fails here with R0102; a declared input that is not passed reads as null");
        d = match did_you_mean(name, &names) {
            Some(close) => {
                let plain = close.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                let replacement = if style == "cel" && !plain {
                    format!("inputs['{close}']")
                } else {
                    format!("inputs.{close}")
                };
                d.with_help(format!("did you mean `{close}`?"))
                    .with_fix(Fix::replace(
                        format!("replace with `{replacement}`"),
                        span,
                        replacement,
                        None,
                    ))
            }
            None => d.with_help(
                "declare it under `input_schema.properties` (or give it a default in `inputs`)",
            ),
        };
        sink.push(d);
    }

    /// Checks `.output.field` against the action's declared output shape.
    fn output_path(
        &self,
        target: StepIdx,
        rest: &[crate::ast::Spanned<Segment>],
        pointer: &str,
        sink: &mut Diagnostics,
    ) {
        let rest = match rest.first().map(|s| &s.value) {
            Some(Segment::Key(k)) if k == "output" => &rest[1..],
            _ => rest,
        };
        let Some(first) = rest.first() else { return };
        let Segment::Key(field) = &first.value else {
            return;
        };
        let Some(names) = self.missing_field(target, field) else {
            return;
        };
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let step = self.model.steps[target].step;
        let mut d = Diagnostic::error(
            E0037,
            first.span,
            format!(
                "the output of `{}` ({}) has no field `{field}`",
                step.id.value,
                self.describe_step(target)
            ),
        )
        .with_help(format!("its fields are {}", names.join(", ")))
        .with_pointer(pointer);
        if let Some(close) = did_you_mean(field, &names) {
            d = d.with_fix(Fix::replace(
                format!("replace with `{close}`"),
                first.span,
                format!(".{close}"),
                None,
            ));
        } else if names.contains(&"winner") && names.contains(&"output") {
            // A race's output wraps its winner's: the field is read inside.
            d = d
                .with_help(format!(
                    "the winning branch's output is `.output.output` (`.output.winner` names the branch): read `.output.output.{field}`"
                ))
                .with_fix(Fix::replace(
                    format!("read `{field}` from the winner's output"),
                    first.span,
                    format!(".output.{field}"),
                    None,
                ));
        }
        sink.push(d);
    }

    /// Checks the field a CEL expression reads from a step's output (written
    /// `.field` at `span`) against the output's declared shape. In CEL
    /// `steps.x` is the output itself: interpolation's `.output` is named.
    fn cel_field(
        &self,
        target: StepIdx,
        field: &str,
        span: Span,
        pointer: &str,
        sink: &mut Diagnostics,
    ) {
        let Some(names) = self.missing_field(target, field) else {
            return;
        };
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let id = &self.model.steps[target].step.id.value;
        let d = if field == "output" {
            Diagnostic::error(
                E0037,
                span,
                format!("in CEL, `steps.{id}` is the output itself: it has no field `output`"),
            )
            .with_help(
                "`${{steps.x.output.f}}` is interpolation's spelling; CEL writes `steps.x.f`",
            )
            .with_fix(Fix::replace("remove `.output`", span, "", None))
        } else {
            let mut d = Diagnostic::error(
                E0037,
                span,
                format!(
                    "the output of `{id}` ({}) has no field `{field}`",
                    self.describe_step(target)
                ),
            )
            .with_help(format!("its fields are {}", names.join(", ")));
            if let Some(close) = did_you_mean(field, &names) {
                d = d.with_fix(Fix::replace(
                    format!("replace with `{close}`"),
                    span,
                    format!(".{close}"),
                    None,
                ));
            }
            d
        };
        sink.push(d.with_pointer(pointer));
    }

    /// The field names of `target`'s output when it surely lacks `field`
    /// (`None` when it has it, or when its shape is not known).
    fn missing_field(&self, target: StepIdx, field: &str) -> Option<Vec<String>> {
        let alternatives = match self.output_type(target)? {
            Ty::OneOf { types } => types,
            other => vec![other],
        };
        let mut names = Vec::new();
        for alternative in &alternatives {
            let Ty::Object { fields } = alternative else {
                return None;
            };
            if fields.contains_key(field) {
                return None;
            }
            names.extend(fields.keys().cloned());
        }
        names.sort_unstable();
        names.dedup();
        Some(names)
    }

    fn describe_step(&self, s: StepIdx) -> String {
        match &self.model.steps[s].step.kind {
            StepKind::Action(a) => a.action.value.clone(),
            other => format!("a {} step", other.type_name()),
        }
    }

    /// The declared shape of a step's output (either shape when it has a fallback).
    pub fn output_type(&self, s: StepIdx) -> Option<Ty> {
        let own = self.own_output_type(s)?;
        match self.graph.fallback[s] {
            Some(f) => Some(Ty::OneOf {
                types: vec![own, self.own_output_type(f)?],
            }),
            None => Some(own),
        }
    }

    fn own_output_type(&self, s: StepIdx) -> Option<Ty> {
        let step = self.model.steps[s].step;
        Some(match &step.kind {
            StepKind::Action(a) => self.catalog.get(&a.action.value)?.output.clone(),
            StepKind::Reasoning(_) => Ty::object([
                ("choice", Ty::String),
                ("reasoning", Ty::String),
                ("data", Ty::Any),
                ("resolved_by", Ty::String),
            ]),
            StepKind::Condition(_) => Ty::object([
                ("branch", Ty::String),
                ("output", Ty::Any),
                ("skipped", Ty::Bool),
            ]),
            StepKind::Loop(_) => Ty::object([
                ("iterations", Ty::Int),
                ("results", Ty::array(Ty::Any)),
                ("truncated", Ty::Bool),
            ]),
            StepKind::Parallel(_) => Ty::object([
                ("mode", Ty::String),
                ("branches", Ty::array(Ty::Any)),
                ("winner", Ty::Int),
                ("output", Ty::Any),
            ]),
            StepKind::Wait(_) => Ty::object([
                ("waited", Ty::Int),
                ("signal", Ty::String),
                ("payload", Ty::Any),
                ("timed_out", Ty::Bool),
            ]),
        })
    }

    /// The type of the value a reference names, when it is known.
    pub fn reference_type(&self, r: &Reference) -> Option<Ty> {
        let segments: Vec<&Segment> = r.segments.iter().map(|s| &s.value).collect();
        match (r.namespace.value.as_str(), segments.as_slice()) {
            ("steps", [Segment::Key(id), rest @ ..]) => {
                let target = *self.model.by_id.get(id.as_str())?;
                let rest = match rest.first() {
                    Some(Segment::Key(k)) if k == "output" => &rest[1..],
                    _ => rest,
                };
                let mut ty = self.output_type(target)?;
                for segment in rest {
                    ty = match (segment, &ty) {
                        (_, Ty::OneOf { .. }) => return None,
                        (Segment::Key(k), _) => ty.field(k)?.clone(),
                        (Segment::Index(_), Ty::Array { items }) => (**items).clone(),
                        _ => return None,
                    };
                }
                Some(ty)
            }
            ("inputs", [Segment::Key(name)]) => self
                .input_types
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| t.clone()),
            ("loop", [Segment::Key(k)]) if k == "index" => Some(Ty::Int),
            ("secrets", [_]) => Some(Ty::String),
            ("workflow", [Segment::Key(k)]) if k != "error" => Some(Ty::String),
            _ => None,
        }
    }
}

/// `parent.branch.child` (opcode's id for nested steps) → the child, if the chain fits.
fn namespaced(model: &Model<'_>, id: &str) -> Option<StepIdx> {
    let parts: Vec<&str> = id.split('.').collect();
    if parts.len() < 3 {
        return None;
    }
    let target = *model.by_id.get(parts.last()?)?;
    let outer = *model.by_id.get(parts.first()?)?;
    model.is_inside(target, outer).then_some(target)
}

/// The step a reference's id names: a plain id, or opcode's namespaced one.
pub fn resolve_step(model: &Model<'_>, id: &str) -> Option<StepIdx> {
    model
        .by_id
        .get(id)
        .copied()
        .or_else(|| namespaced(model, id))
}

enum Reason {
    InLoop(StepIdx),
    Encloses,
    Itself,
    InBranch(StepIdx),
    InRace(StepIdx),
    Fallback,
    Later,
    /// The step (first) lacks a dependency on the other (the target, or its
    /// ancestor in the step's block).
    NotDependency(StepIdx, StepIdx),
}
