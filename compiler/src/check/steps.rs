//! Per-step semantic checks that need no other step: reasoning options and
//! fallbacks, loop bounds, retry counts.

use std::collections::HashMap;

use opcode_vm::policy::{LoopMode, Strategy};

use crate::ast::{Step, StepKind};
use crate::diagnostics::codes::{E0045, E0051, W0003, W0006, W0011};
use crate::diagnostics::{Diagnostic, Diagnostics, Fix, PatchOp, did_you_mean};

/// Retries above this are probably a mistake.
const MAX_SENSIBLE_RETRIES: u64 = 10;

/// Checks one step.
pub fn check(step: &Step, sink: &mut Diagnostics) {
    if let Some(retry) = &step.retry
        && retry.max.value > MAX_SENSIBLE_RETRIES
    {
        sink.push(
                Diagnostic::warning(W0006, retry.max.span, format!("{} retries is a lot", retry.max.value))
                    .with_help("retrying more than 10 times usually hides a real failure; consider a circuit breaker or a longer delay")
                    .with_pointer(format!("{}/retry/max", step.pointer)),
            );
    }
    if let Some(on_error) = &step.on_error
        && on_error.strategy.value != Strategy::FallbackStep
        && let Some(fallback) = &on_error.fallback_step
    {
        sink.push(
            Diagnostic::warning(
                crate::diagnostics::codes::W0001,
                fallback.span,
                format!(
                    "`fallback_step` is ignored with strategy `{}`",
                    on_error.strategy.value
                ),
            )
            .with_help("set `\"strategy\": \"fallback_step\"` to use it")
            .with_pointer(format!("{}/on_error/fallback_step", step.pointer)),
        );
    }
    match &step.kind {
        StepKind::Loop(l) => {
            if l.mode.value != LoopMode::ForEach && l.max_iter.is_none() {
                sink.push(
                    Diagnostic::warning(W0003, l.mode.span, format!("this `{}` loop has no `max_iter`", l.mode.value))
                        .with_help("if its condition never changes, it runs until the workflow timeout; add `\"max_iter\": 100`")
                        .with_pointer(format!("{}/config", step.pointer)),
                );
            }
        }
        StepKind::Reasoning(r) => {
            if r.prompt_context.is_none() {
                sink.push(
                    Diagnostic::warning(
                        W0011,
                        step.id.span,
                        format!("reasoning step `{}` has no `prompt_context`", step.id.value),
                    )
                    .with_help("say what the decider is asked; it is shown with the decision")
                    .with_pointer(format!("{}/config", step.pointer)),
                );
            }
            let mut seen: HashMap<&str, crate::source::Span> = HashMap::new();
            for option in &r.options {
                if let Some(first) = seen.insert(&option.id.value, option.id.span) {
                    sink.push(
                        Diagnostic::error(
                            E0051,
                            option.id.span,
                            format!("option `{}` is listed twice", option.id.value),
                        )
                        .with_secondary(first, "first listed here")
                        .with_pointer(format!("{}/config/options", step.pointer)),
                    );
                }
            }
            if let Some(fallback) = &r.fallback {
                let ids: Vec<&str> = r.options.iter().map(|o| o.id.value.as_str()).collect();
                if !ids.is_empty() && !ids.contains(&fallback.value.as_str()) {
                    let pointer = format!("{}/config/fallback", step.pointer);
                    let mut d = Diagnostic::error(
                        E0045,
                        fallback.span,
                        format!("fallback `{}` is not one of the options", fallback.value),
                    )
                    .with_help(format!("options are {}", ids.join(", ")))
                    .with_pointer(pointer.clone());
                    if let Some(close) = did_you_mean(&fallback.value, &ids) {
                        d = d.with_fix(Fix::replace(
                            format!("replace with `{close}`"),
                            fallback.span,
                            format!("\"{close}\""),
                            Some(PatchOp::Replace {
                                path: pointer,
                                value: close.into(),
                            }),
                        ));
                    }
                    sink.push(d);
                }
            }
        }
        StepKind::Action(_)
        | StepKind::Condition(_)
        | StepKind::Parallel(_)
        | StepKind::Wait(_) => {}
    }
}
