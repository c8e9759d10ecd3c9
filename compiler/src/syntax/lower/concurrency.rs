//! Flow control blocks (spec/flow-control.md): a workflow's `concurrency`
//! ("Admission") and a step's `rate_limit` ("Rate limits"). Their keys may
//! read only what is known when a run starts, before any step.

use super::Lowerer;
use crate::ast::{Concurrency, RateLimit, Reference, Template, TemplateKind};
use crate::check::references::WORKFLOW_FIELDS;
use crate::diagnostics::Diagnostic;
use crate::diagnostics::codes::{E0010, E0017, E0063};
use crate::syntax::lower::fields::Fields;
use crate::syntax::node::Node;
use crate::syntax::template::Segment;
use opcode_vm::policy::OnLimit;

const FIELDS: &[&str] = &["key", "limit", "on_limit"];
const RATE_FIELDS: &[&str] = &["key", "limit", "per"];

/// The members of the `workflow` namespace a key may not read: those a
/// run has only once it exists (its id, its workspace) or later.
const WORKFLOW_LATER: &[&str] = &["run_id", "id", "workspace", "started_at", "error"];

impl Lowerer<'_> {
    /// Lowers `concurrency`: `{key?, limit, on_limit?}`.
    pub(crate) fn concurrency(&mut self, node: &Node<'_>, pointer: &str) -> Option<Concurrency> {
        let fields = self.fields(node, pointer, "`concurrency`", FIELDS)?;
        let limit = self.limit(&fields, node, "concurrency", "runs of one key at once")?;
        let on_limit = self
            .opt_enum(&fields, "on_limit", OnLimit::parse, OnLimit::SPELLINGS)
            .map_or(OnLimit::Queue, |o| o.value);
        let key = self.key(&fields);
        Some(Concurrency {
            key,
            limit,
            on_limit,
        })
    }

    /// Lowers `rate_limit`: `{key?, limit, per}`.
    pub(crate) fn rate_limit(&mut self, node: &Node<'_>, pointer: &str) -> Option<RateLimit> {
        let fields = self.fields(node, pointer, "`rate_limit`", RATE_FIELDS)?;
        let limit = self.limit(&fields, node, "rate_limit", "calls a window")?;
        let Some(per) = self.opt_duration(&fields, "per") else {
            if fields.get("per").is_none() {
                self.report(
                    Diagnostic::error(E0017, node.span, "`rate_limit` needs a window, `per`")
                        .with_help(
                            "the window its `limit` calls may start in, e.g. `\"per\": \"1m\"`",
                        )
                        .with_pointer(pointer),
                );
            }
            return None;
        };
        if per.value < 1000 {
            self.report(
                Diagnostic::error(E0017, per.span, "`rate_limit.per` must be a second or more")
                    .with_pointer(fields.pointer_of("per")),
            );
            return None;
        }
        let key = self.key(&fields);
        Some(RateLimit {
            key,
            limit,
            per: per.value,
        })
    }

    /// A block's `limit`: an integer of 1 or more (`what` says of what).
    fn limit(
        &mut self,
        fields: &Fields<'_, '_>,
        node: &Node<'_>,
        block: &str,
        what: &str,
    ) -> Option<u32> {
        let Some(limit) = self.opt_count(fields, "limit") else {
            if fields.get("limit").is_none() {
                self.report(
                    Diagnostic::error(E0017, node.span, format!("`{block}` needs a `limit`"))
                        .with_help(format!("how many {what}, e.g. `\"limit\": 1`"))
                        .with_pointer(&fields.pointer),
                );
            }
            return None;
        };
        let Some(count) = u32::try_from(limit.value).ok().filter(|n| *n >= 1) else {
            self.report(
                Diagnostic::error(
                    E0017,
                    limit.span,
                    format!("`{block}.limit` must be 1 or more, found {}", limit.value),
                )
                .with_pointer(fields.pointer_of("limit")),
            );
            return None;
        };
        Some(count)
    }

    /// A block's `key`, a string whose references are checked (one that is
    /// not a string is reported, and none is kept).
    fn key(&mut self, fields: &Fields<'_, '_>) -> Option<Template> {
        let member = fields.get("key")?;
        if member.value.as_str().is_none() {
            self.wrong_type(member, &fields.pointer_of("key"), "a string");
            return None;
        }
        let key = self.template(&member.value, &fields.pointer_of("key"));
        self.check_key(&key, &fields.pointer_of("key"));
        Some(key)
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
                        "a flow-control key is made when the run starts, before any step: \
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
