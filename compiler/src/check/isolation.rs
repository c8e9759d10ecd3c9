//! Steps' `isolation` blocks against the embedding's ceiling (E0052): the
//! compiler knows no settings, so the daemon passes them in as an
//! [`IsolationCheck`].

use crate::ast::Document;
use crate::diagnostics::codes::E0052;
use crate::diagnostics::{Diagnostic, Diagnostics, Fix, PatchOp};
use crate::{IsolationCheck, Widening};

/// Reports every widening of every step's block.
pub fn check(doc: &Document, ceiling: &dyn IsolationCheck, sink: &mut Diagnostics) {
    let template = doc
        .wrapper
        .as_ref()
        .and_then(|w| w.name.as_ref())
        .map(|n| n.value.as_str());
    for step in doc.workflow.all_steps() {
        let Some(block) = &step.isolation else {
            continue;
        };
        for Widening { key, message, help } in ceiling.widenings(template, &block.value) {
            let pointer = if key.is_empty() {
                format!("{}/isolation", step.pointer)
            } else {
                format!("{}/isolation/{key}", step.pointer)
            };
            let shown = if key.is_empty() {
                "isolation".to_owned()
            } else {
                format!("isolation.{key}")
            };
            let fix = Fix {
                message: format!("remove `{shown}`"),
                edits: Vec::new(),
                patch: vec![PatchOp::Remove {
                    path: pointer.clone(),
                }],
            };
            sink.push(
                Diagnostic::error(
                    E0052,
                    block.span,
                    format!("step `{}`: `{shown}`: {message}", step.id.value),
                )
                .with_help(help)
                .with_fix(fix)
                .with_pointer(pointer),
            );
        }
    }
}
