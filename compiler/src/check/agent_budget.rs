//! Delegated agents' budgets that cannot be met (E0057, spec/agents.md
//! "Budgets"): `max_steps` outside 4–256, a `timeout` under 10 s, or a
//! step `timeout` shorter than the agent's.

use super::params::Param;
use crate::ast::Step;
use crate::diagnostics::codes::E0057;
use crate::diagnostics::{Diagnostic, Diagnostics, Fix, PatchOp};
use crate::duration::parse_millis;
use crate::syntax::node::child_pointer;

use opcode_vm::limits::{AGENT_MAX_STEPS, AGENT_MIN_STEPS, AGENT_MIN_TIMEOUT_MS, agent_defaults};

/// The steps a budget may give (the last 20%, at least two, are the report's).
const STEPS: std::ops::RangeInclusive<i64> = AGENT_MIN_STEPS..=AGENT_MAX_STEPS;

/// Checks the literal budget of an `agent.*` step.
pub(super) fn check(
    step: &Step,
    action: &str,
    params: &[Param<'_>],
    pointer: &str,
    sink: &mut Diagnostics,
) {
    let literal = |key: &str| {
        params
            .iter()
            .find(|p| p.key == key)
            .and_then(|p| Some((p, p.literal()?)))
    };
    if let Some((given, value)) = literal("max_steps")
        && let Some(steps) = value.as_i64()
        && !STEPS.contains(&steps)
    {
        let fixed = steps.clamp(*STEPS.start(), *STEPS.end());
        let at = child_pointer(pointer, "max_steps");
        sink.push(
            Diagnostic::error(
                E0057,
                given.value.span,
                format!(
                    "`max_steps` {steps} cannot be met: an agent gets 4 to 256 steps, and the last \
                     20% of them (at least two) are for its report"
                ),
            )
            .with_pointer(at.clone())
            .with_fix(Fix::replace(
                format!("set `max_steps` to {fixed}"),
                given.value.span,
                fixed.to_string(),
                Some(PatchOp::Replace {
                    path: at,
                    value: fixed.into(),
                }),
            )),
        );
    }
    let agent_ms = match literal("timeout").and_then(|(p, v)| Some((p, v.as_str()?))) {
        Some((given, text)) => match parse_millis(text) {
            Ok(ms) if ms < AGENT_MIN_TIMEOUT_MS => {
                sink.push(
                    Diagnostic::error(
                        E0057,
                        given.value.span,
                        format!("the agent's `timeout` {text:?} is under 10s: too short to work and report"),
                    )
                    .with_pointer(child_pointer(pointer, "timeout"))
                    .with_fix(Fix::replace(
                        "give it 10s".to_owned(),
                        given.value.span,
                        "\"10s\"".to_owned(),
                        Some(PatchOp::Replace {
                            path: child_pointer(pointer, "timeout"),
                            value: "10s".into(),
                        }),
                    )),
                );
                return;
            }
            Ok(ms) => Some(ms),
            Err(_) => return,
        },
        None if params.iter().any(|p| p.key == "timeout") => return,
        None => agent_defaults(action).map(|(_, ms)| ms),
    };
    if let (Some(agent_ms), Some(step_timeout)) = (agent_ms, &step.timeout)
        && step_timeout.value < agent_ms
    {
        sink.push(
            Diagnostic::error(
                E0057,
                step_timeout.span,
                format!(
                    "the step's `timeout` ({} s) is shorter than its agent's ({} s): the step would \
                     be stopped before the agent could report",
                    step_timeout.value / 1000,
                    agent_ms / 1000
                ),
            )
            .with_help("drop the step's `timeout` (the agent's budget bounds it), or give the agent less `timeout`")
            .with_pointer(format!("{}/timeout", step.pointer)),
        );
    }
}
