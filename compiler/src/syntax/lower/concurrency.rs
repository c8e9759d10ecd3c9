//! A workflow's `concurrency` block (spec/flow-control.md, "Admission"):
//! its key may read only what is known when a run starts, before any step.

use super::Lowerer;
use crate::ast::{Concurrency, Reference, Template, TemplateKind};
use crate::check::references::WORKFLOW_FIELDS;
use crate::diagnostics::Diagnostic;
use crate::diagnostics::codes::{E0010, E0017, E0063};
use crate::syntax::node::Node;
use crate::syntax::template::Segment;
use opcode_vm::policy::OnLimit;

const FIELDS: &[&str] = &["key", "limit", "on_limit"];

/// The members of the `workflow` namespace a key may not read: those a
/// run has only once it exists (its id, its workspace) or later.
const WORKFLOW_LATER: &[&str] = &["run_id", "id", "workspace", "started_at", "error"];

impl Lowerer<'_> {
    /// Lowers `concurrency`: `{key?, limit, on_limit?}`.
    pub(crate) fn concurrency(&mut self, node: &Node<'_>, pointer: &str) -> Option<Concurrency> {
        let fields = self.fields(node, pointer, "`concurrency`", FIELDS)?;
        let Some(limit) = self.opt_count(&fields, "limit") else {
            if fields.get("limit").is_none() {
                self.report(
                    Diagnostic::error(E0017, node.span, "`concurrency` needs a `limit`")
                        .with_help(
                            "how many runs of one key may hold a slot at once, e.g. `\"limit\": 1`",
                        )
                        .with_pointer(pointer),
                );
            }
            return None;
        };
        let Some(limit) = u32::try_from(limit.value).ok().filter(|n| *n >= 1) else {
            self.report(
                Diagnostic::error(
                    E0017,
                    limit.span,
                    format!(
                        "`concurrency.limit` must be 1 or more, found {}",
                        limit.value
                    ),
                )
                .with_pointer(fields.pointer_of("limit")),
            );
            return None;
        };
        let on_limit = self
            .opt_enum(&fields, "on_limit", OnLimit::parse, OnLimit::SPELLINGS)
            .map_or(OnLimit::Queue, |o| o.value);
        let key = match fields.get("key") {
            None => None,
            Some(member) => {
                if member.value.as_str().is_none() {
                    self.wrong_type(member, &fields.pointer_of("key"), "a string");
                    return None;
                }
                let key = self.template(&member.value, &fields.pointer_of("key"));
                self.check_key(&key, &fields.pointer_of("key"));
                Some(key)
            }
        };
        Some(Concurrency {
            key,
            limit,
            on_limit,
        })
    }

    /// Reports each reference of `key` to what a starting run does not know.
    fn check_key(&mut self, key: &Template, pointer: &str) {
        for reference in key.references() {
            if known_at_start(reference) {
                continue;
            }
            self.report(
                Diagnostic::error(
                    E0063,
                    reference.span,
                    format!(
                        "a concurrency key is made when the run starts, before any step: \
                         `{}` is not known then",
                        reference.render()
                    ),
                )
                .with_help(
                    "read the run's inputs (`${{inputs.NAME}}`) or what is fixed when it starts \
                     (`${{workflow.template_name}}`, `${{workflow.agent_id}}`); pass a step's \
                     value to a run of its own as an input",
                )
                .with_pointer(pointer),
            );
        }
        if let TemplateKind::Literal(value) = &key.kind
            && !value.is_string()
        {
            self.report(
                Diagnostic::error(E0010, key.span, "`concurrency.key` must be a string")
                    .with_pointer(pointer),
            );
        }
    }
}

/// Does `reference` read what is fixed before a run's steps start?
fn known_at_start(reference: &Reference) -> bool {
    match reference.namespace.value.as_str() {
        "inputs" => true,
        "workflow" => matches!(
            reference.segments.first().map(|s| &s.value),
            Some(Segment::Key(name))
                if WORKFLOW_FIELDS.contains(&name.as_str())
                    && !WORKFLOW_LATER.contains(&name.as_str())
        ),
        _ => false,
    }
}
