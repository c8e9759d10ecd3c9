//! `${{…}}` where it is never interpolated (E0062): a wait step's `signal`,
//! a decision's option ids, `fallback` and `target_agent`, and the
//! workflow's initial `context`. They are read as written, so the text
//! would stay literal (a wait for a signal named `${{inputs.sig}}` times
//! out); said at the field, with what to do instead.

use serde_json::Value;

use crate::ast::{Document, Json, Spanned, Step, StepKind};
use crate::diagnostics::codes::E0062;
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::source::Span;
use crate::syntax::node::child_pointer;

/// The fields of `step` that hold `${{`.
pub fn check_step(step: &Step, sink: &mut Diagnostics) {
    let config = format!("{}/config", step.pointer);
    match &step.kind {
        StepKind::Wait(wait) => {
            if let Some(signal) = &wait.signal {
                field(
                    signal,
                    &format!("{config}/signal"),
                    "`signal`",
                    "a wait step waits for the signal named as written: name it here, and pass values in the signal's payload",
                    sink,
                );
            }
        }
        StepKind::Reasoning(reasoning) => {
            for (i, option) in reasoning.options.iter().enumerate() {
                field(
                    &option.id,
                    &format!("{config}/options/{i}/id"),
                    "an option `id`",
                    "option ids are the answers a decider gives: write them out (values belong in `description` or `data_inject`)",
                    sink,
                );
            }
            if let Some(fallback) = &reasoning.fallback {
                field(
                    fallback,
                    &format!("{config}/fallback"),
                    "`fallback`",
                    "the fallback must name one of the options as written",
                    sink,
                );
            }
            if let Some(target) = &reasoning.target_agent {
                field(
                    target,
                    &format!("{config}/target_agent"),
                    "`target_agent`",
                    "name the agent as written",
                    sink,
                );
            }
        }
        _ => {}
    }
}

/// The strings of the workflow's initial `context` that hold `${{`.
pub fn check_context(doc: &Document, src: &str, sink: &mut Diagnostics) {
    let Some(context) = &doc.workflow.context else {
        return;
    };
    let pointer = format!("{}/context", doc.base_pointer);
    strings(context, &context.value, &pointer, src, sink);
}

fn strings(context: &Json, value: &Value, pointer: &str, src: &str, sink: &mut Diagnostics) {
    match value {
        Value::String(text) if text.contains("${{") => {
            let quoted = Value::from(text.as_str()).to_string();
            let span = src
                .get(context.span.start as usize..context.span.end as usize)
                .and_then(|inside| inside.find(&quoted))
                .map_or(context.span, |at| {
                    let start = context.span.start as usize + at;
                    Span::new(start, start + quoted.len())
                });
            sink.push(diagnostic(span, pointer, "the initial `context`", "the definition's `context` is read as written: set values from inputs or steps with a `workflow.context` step, whose params are interpolated"));
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                strings(context, item, &format!("{pointer}/{i}"), src, sink);
            }
        }
        Value::Object(members) => {
            for (key, member) in members {
                strings(context, member, &child_pointer(pointer, key), src, sink);
            }
        }
        _ => {}
    }
}

fn field(value: &Spanned<String>, pointer: &str, what: &str, help: &str, sink: &mut Diagnostics) {
    if value.value.contains("${{") {
        sink.push(diagnostic(value.span, pointer, what, help));
    }
}

fn diagnostic(span: Span, pointer: &str, what: &str, help: &str) -> Diagnostic {
    Diagnostic::error(
        E0062,
        span,
        format!("{what} is never interpolated: `${{{{…}}}}` here stays this exact text"),
    )
    .with_help(help)
    .with_pointer(pointer)
}
