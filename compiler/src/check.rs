//! Semantic checks over the AST.
//!
//! Order: number the steps ([`model`]), validate dependencies and fallbacks
//! ([`graph`]), then walk every step: parse its CEL ([`cel`]), resolve its
//! references ([`references`]), check its action against the catalog
//! ([`actions`]) and its own fields ([`steps`]). Every check reports into the
//! sink and carries on.

pub mod actions;
mod agent_budget;
pub mod agent_ref;
mod branches;
pub mod cel;
pub mod cel_functions;
mod choices;
pub mod expr_lang;
pub mod graph;
pub mod isolation;
pub mod jq;
mod literals;
pub mod model;
mod params;
mod recursion;
pub mod references;
pub mod steps;
mod uninterpolated;

use std::collections::BTreeSet;

use opcode_vm::catalog::{Catalog, Ty};

use self::graph::Graph;
use self::model::{BlockRole, Model, StepIdx};
use self::references::{Resolver, Site};
use crate::ast::{Document, Expr, StepKind};
use crate::diagnostics::Diagnostics;

/// The result of checking: the numbered workflow and its dependencies.
pub struct Checked<'a> {
    /// Steps and blocks, numbered.
    pub model: Model<'a>,
    /// Validated dependencies.
    pub graph: Graph,
}

/// Runs every check on a lowered document.
pub fn check<'a>(
    doc: &'a Document,
    catalog: &Catalog,
    src: &str,
    sink: &mut Diagnostics,
) -> Checked<'a> {
    let model = Model::build(doc, sink);
    let graph = graph::build(&model, src, sink);
    let (declared, types) = declared_inputs(doc);
    let inputs = declared.clone();
    let known = literals::Known {
        model: &model,
        inputs: inputs.as_ref(),
    };
    let mut resolver = Resolver::new(&model, &graph, catalog, declared, types);
    for s in 0..model.steps.len() {
        // A bug in one step's check is that step's diagnostic (E0059); the
        // other steps are still checked.
        let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check_step(s, &known, &mut resolver, catalog, src, sink);
        }));
        if let Err(panic) = checked {
            let step = model.steps[s].step;
            sink.push(crate::diagnostics::internal_error(
                step.id.span,
                &step.pointer,
                panic.as_ref(),
            ));
        }
    }
    recursion::check(doc, &model, sink);
    uninterpolated::check_context(doc, src, sink);
    if let Some(output) = &doc.workflow.output {
        let pointer = format!("{}/output", doc.base_pointer);
        resolver.template(output, Site::AfterRun, false, &pointer, sink);
    }
    Checked { model, graph }
}

fn check_step(
    s: StepIdx,
    known: &literals::Known<'_, '_>,
    resolver: &mut Resolver<'_, '_>,
    catalog: &Catalog,
    src: &str,
    sink: &mut Diagnostics,
) {
    let model = known.model;
    let step = model.steps[s].step;
    uninterpolated::check_step(step, sink);
    let site = if in_hook(model, s) {
        Site::Hook(s)
    } else {
        Site::Step(s)
    };
    let cel_check = |expr: &Expr,
                     site: Site,
                     field: &str,
                     resolver: &mut Resolver<'_, '_>,
                     sink: &mut Diagnostics| {
        let pointer = format!("{}/{field}", step.pointer);
        match cel::analyze(expr, src, &pointer) {
            Ok(refs) => {
                resolver.cel(&refs, site, &pointer, sink);
                choices::check(expr, src, &pointer, model, sink);
            }
            Err(diagnostic) => sink.push(diagnostic),
        }
    };
    if let Some(guard) = &step.guard {
        cel_check(guard, site, "condition", resolver, sink);
    }
    match &step.kind {
        StepKind::Action(action) => {
            if let Some(params) = &action.params {
                // The context keeps what it is given: a secret would be stored.
                let secrets_allowed = action.action.value != "workflow.context";
                let pointer = format!("{}/params", step.pointer);
                resolver.template(params, site, secrets_allowed, &pointer, sink);
                literals::check(params, &pointer, src, known, sink);
            }
            actions::check(step, action, catalog, resolver, src, sink);
            // `expr.eval`'s expression reads steps and inputs as a guard does.
            if action.action.value == "expr.eval"
                && let Some((expr, dialect)) = actions::expr_eval_expression(action)
            {
                let pointer = format!("{}/params/expression", step.pointer);
                match dialect {
                    expr_lang::Dialect::Cel => {
                        if let Ok(mut refs) = cel::analyze(&expr, src, &pointer) {
                            if let Some(d) =
                                actions::reads_as_expr(action, &expr, &refs, src, &pointer)
                            {
                                sink.push(d);
                                // Its functions are Expr's: not CEL mistakes each.
                                refs.calls.clear();
                            }
                            resolver.cel(&refs, site, &pointer, sink);
                        }
                    }
                    expr_lang::Dialect::Expr => {
                        if let Ok(analysis) = expr_lang::analyze(&expr, src, &pointer) {
                            sink.extend(analysis.diagnostics);
                            resolver.cel(&analysis.refs, site, &pointer, sink);
                        }
                    }
                }
            }
        }
        StepKind::Condition(c) => {
            cel_check(&c.expression, site, "config/expression", resolver, sink);
            branches::check(step, c, sink);
        }
        StepKind::Loop(l) => {
            if let Some(over) = &l.over {
                let over_site = if matches!(site, Site::Hook(_)) {
                    site
                } else {
                    Site::LoopOver(s)
                };
                cel_check(over, over_site, "config/over", resolver, sink);
            }
            if let Some(condition) = &l.condition {
                cel_check(
                    condition,
                    Site::LoopCondition(s),
                    "config/condition",
                    resolver,
                    sink,
                );
            }
        }
        StepKind::Reasoning(r) => {
            for (key, value) in &r.data_inject {
                let pointer = crate::syntax::node::child_pointer(
                    &format!("{}/config/data_inject", step.pointer),
                    &key.value,
                );
                resolver.template(value, site, false, &pointer, sink);
            }
            for (pointer, text) in r.texts() {
                let pointer = format!("{}/config/{pointer}", step.pointer);
                resolver.template(text, site, false, &pointer, sink);
            }
        }
        StepKind::Parallel(_) | StepKind::Wait(_) => {}
    }
    steps::check(step, sink);
}

/// Is the step part of an `on_complete`/`on_error` hook?
fn in_hook(model: &Model<'_>, s: StepIdx) -> bool {
    let mut top = s;
    while let Some(parent) = model.steps[top].parent {
        top = parent;
    }
    matches!(
        model.blocks[model.steps[top].block].role,
        BlockRole::OnComplete | BlockRole::OnError
    )
}

/// Input names from `input_schema.properties` and the definition's `inputs`,
/// with the JSON types the schema gives them.
fn declared_inputs(doc: &Document) -> (Option<BTreeSet<String>>, Vec<(String, Ty)>) {
    let schema = doc.wrapper.as_ref().and_then(|w| w.input_schema.as_ref());
    let defaults = doc.workflow.inputs.as_ref();
    if schema.is_none() && defaults.is_none() {
        return (None, Vec::new());
    }
    let mut names = BTreeSet::new();
    let mut types = Vec::new();
    if let Some(properties) = schema
        .and_then(|s| s.value.get("properties"))
        .and_then(serde_json::Value::as_object)
    {
        for (name, property) in properties {
            names.insert(name.clone());
            if let Some(ty) = schema_type(property) {
                types.push((name.clone(), ty));
            }
        }
    }
    if let Some(members) = defaults.and_then(|d| d.value.as_object()) {
        names.extend(members.keys().cloned());
    }
    (Some(names), types)
}

/// The [`Ty`] of a JSON Schema with a single `type`.
fn schema_type(schema: &serde_json::Value) -> Option<Ty> {
    Some(match schema.get("type")?.as_str()? {
        "string" => Ty::String,
        "integer" => Ty::Int,
        "number" => Ty::Number,
        "boolean" => Ty::Bool,
        "array" => Ty::array(Ty::Any),
        "object" => Ty::map(Ty::Any),
        "null" => Ty::Null,
        _ => return None,
    })
}
