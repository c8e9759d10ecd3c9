//! `agent.*` steps naming an agent (spec/registry.md, "Steps naming a
//! release"): a literal `agent` must be a settings entry or a published
//! release (E0068), and a release's role must be the step's action
//! (E0070). The compiler knows no settings nor registry, so the daemon
//! passes them in as an [`AgentLookup`].

use super::params::params_of;
use crate::ast::{Document, Step, StepKind, TemplateKind};
use crate::diagnostics::codes::{E0068, E0070};
use crate::diagnostics::{Diagnostic, Diagnostics, Fix, PatchOp};
use crate::source::Span;
use crate::syntax::node::child_pointer;
use crate::{AgentLookup, AgentRef};

/// One step's literal `agent`: the step, its role, the text and where it
/// is written.
struct Named<'d> {
    step: &'d Step,
    action: Span,
    role: &'d str,
    reference: &'d str,
    span: Span,
}

/// Reports every literal `agent` that names nothing known, or a release
/// of another role.
pub fn check(doc: &Document, agents: &dyn AgentLookup, sink: &mut Diagnostics) {
    for named in named(doc) {
        let pointer = child_pointer(&format!("{}/params", named.step.pointer), "agent");
        match agents.lookup(named.reference) {
            AgentRef::Release { pinned, role } if role != named.role => {
                let action = format!("agent.{role}");
                sink.push(
                    Diagnostic::error(
                        E0070,
                        named.span,
                        format!(
                            "step `{}`: `{pinned}` is a {role} agent; `agent.{}` runs a {}",
                            named.step.id.value, named.role, named.role
                        ),
                    )
                    .with_help(format!(
                        "a release runs in the sandbox of its role: use `{action}`, or name a {} agent",
                        named.role
                    ))
                    .with_pointer(pointer)
                    .with_fix(Fix::replace(
                        format!("run it as `{action}`"),
                        named.action,
                        serde_json::Value::String(action.clone()).to_string(),
                        Some(PatchOp::Replace {
                            path: format!("{}/action", named.step.pointer),
                            value: action.into(),
                        }),
                    )),
                );
            }
            AgentRef::Entry | AgentRef::Release { .. } => {}
            AgentRef::Unknown {
                message,
                closest,
                help,
            } => {
                let mut diagnostic = Diagnostic::error(
                    E0068,
                    named.span,
                    format!("step `{}`: {message}", named.step.id.value),
                )
                .with_help(help)
                .with_pointer(pointer.clone());
                if let Some(closest) = closest {
                    diagnostic = diagnostic.with_fix(Fix::replace(
                        format!("name `{closest}`"),
                        named.span,
                        serde_json::Value::String(closest.clone()).to_string(),
                        Some(PatchOp::Replace {
                            path: pointer,
                            value: closest.into(),
                        }),
                    ));
                }
                sink.push(diagnostic);
            }
        }
    }
}

/// Where each literal `agent` naming a release otherwise than exactly is
/// written, and the release it names (`name@version`), in source order.
pub fn pins(doc: &Document, agents: &dyn AgentLookup) -> Vec<(Span, String)> {
    let mut out: Vec<(Span, String)> = named(doc)
        .filter_map(|named| match agents.lookup(named.reference) {
            AgentRef::Release { pinned, role }
                if role == named.role && pinned != named.reference =>
            {
                Some((named.span, pinned))
            }
            _ => None,
        })
        .collect();
    out.sort_by_key(|(span, _)| span.start);
    out
}

/// Every `agent.scout|worker|runner` step whose `agent` is a string with
/// no reference in it.
fn named(doc: &Document) -> impl Iterator<Item = Named<'_>> {
    doc.workflow.all_steps().into_iter().filter_map(|step| {
        let StepKind::Action(action) = &step.kind else {
            return None;
        };
        let role = action.action.value.strip_prefix("agent.")?;
        if !matches!(role, "scout" | "worker" | "runner") {
            return None;
        }
        let param = params_of(action.params.as_ref())
            .into_iter()
            .find(|p| p.key == "agent")?;
        let TemplateKind::Literal(serde_json::Value::String(reference)) = &param.value.kind else {
            return None;
        };
        Some(Named {
            step,
            action: action.action.span,
            role,
            reference: reference.as_str(),
            span: param.value.span,
        })
    })
}
