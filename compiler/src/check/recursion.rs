//! A template that starts itself on every run (E0058): a `workflow.run` or
//! `workflow.map` of the template's own name, in a step that runs whatever
//! happens (no `condition` on it or around it, in no branch, loop body,
//! hook or fallback). Its run tree can only end at `limits.run_depth`
//! (spec/limits.md, "Run trees"), so it is refused where it is written.

use serde_json::Value;

use super::model::{BlockRole, Model, StepIdx};
use super::params::params_of;
use crate::ast::{Document, StepKind};
use crate::diagnostics::codes::E0058;
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::syntax::node::child_pointer;

/// Reports each step that starts the template itself on every run.
pub(super) fn check(doc: &Document, model: &Model<'_>, sink: &mut Diagnostics) {
    let Some(name) = doc.wrapper.as_ref().and_then(|w| w.name.as_ref()) else {
        return;
    };
    let fallbacks: Vec<&str> = model
        .steps
        .iter()
        .filter_map(|info| info.step.on_error.as_ref()?.fallback_step.as_ref())
        .map(|f| f.value.as_str())
        .collect();
    for (s, info) in model.steps.iter().enumerate() {
        let StepKind::Action(action) = &info.step.kind else {
            continue;
        };
        let kind = action.action.value.as_str();
        if !matches!(kind, "workflow.run" | "workflow.map") {
            continue;
        }
        let params = params_of(action.params.as_ref());
        let literal = |key: &str| params.iter().find(|p| p.key == key);
        let Some(given) = literal("template_name") else {
            continue;
        };
        if given.literal().and_then(Value::as_str) != Some(name.value.as_str()) {
            continue;
        }
        // A map over a list known to be empty starts nothing.
        let no_items = literal("items")
            .and_then(|p| p.literal())
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty);
        if no_items || !always_runs(model, s, &fallbacks) {
            continue;
        }
        let pointer = child_pointer(&format!("{}/params", info.step.pointer), "template_name");
        sink.push(
            Diagnostic::error(
                E0058,
                given.value.span,
                format!(
                    "`{}` starts `{}`, this template, on every run: each child starts another, \
                     until the tree is too deep and the run fails (limits.run_depth)",
                    info.step.id.value, name.value
                ),
            )
            .with_help(
                "give the step a `condition` that is false once the work is done, \
                 or start another template",
            )
            .with_pointer(pointer),
        );
    }
}

/// Does step `s` run whatever happens: neither it nor a step around it
/// has a `condition`, and it is in no branch, loop body, hook or fallback?
fn always_runs(model: &Model<'_>, s: StepIdx, fallbacks: &[&str]) -> bool {
    let mut at = Some(s);
    while let Some(i) = at {
        let info = &model.steps[i];
        let in_plain_block = matches!(
            model.blocks[info.block].role,
            BlockRole::Root | BlockRole::Parallel(_)
        );
        if info.step.guard.is_some()
            || !in_plain_block
            || fallbacks.contains(&info.step.id.value.as_str())
        {
            return false;
        }
        at = info.parent;
    }
    true
}
