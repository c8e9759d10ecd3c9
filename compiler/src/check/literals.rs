//! Silent literals: a parameter whose whole text is a reference the
//! workflow could mean (`"steps.fetch.body.items"`, `"inputs.user"`)
//! without `${{…}}` is sent as that text, not as the value (W0012). The fix
//! wraps it, as interpolation spells it.

use std::collections::BTreeSet;

use serde_json::Value;

use super::model::Model;
use crate::ast::{Template, TemplateKind};
use crate::diagnostics::codes::W0012;
use crate::diagnostics::{Diagnostic, Diagnostics, Fix, PatchOp};
use crate::source::Span;
use crate::syntax::node::child_pointer;

/// What a parameter's text is checked against: the steps (the model) and
/// the declared inputs (`None`: the workflow declares none, any name goes).
pub struct Known<'m, 'a> {
    /// The workflow's steps.
    pub model: &'m Model<'a>,
    /// The declared inputs.
    pub inputs: Option<&'m BTreeSet<String>>,
}

/// Reports each string in `params` (at `pointer`) that is exactly a
/// reference to a step or input of the workflow.
pub fn check(
    params: &Template,
    pointer: &str,
    src: &str,
    known: &Known<'_, '_>,
    sink: &mut Diagnostics,
) {
    match &params.kind {
        TemplateKind::Literal(value) => literal(value, params.span, pointer, src, known, sink),
        TemplateKind::Object(members) => {
            for (key, member) in members {
                let pointer = child_pointer(pointer, &key.value);
                check(member, &pointer, src, known, sink);
            }
        }
        TemplateKind::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                check(item, &format!("{pointer}/{i}"), src, known, sink);
            }
        }
        TemplateKind::Ref(_) | TemplateKind::Text(_) => {}
    }
}

fn literal(
    value: &Value,
    span: Span,
    pointer: &str,
    src: &str,
    known: &Known<'_, '_>,
    sink: &mut Diagnostics,
) {
    match value {
        Value::String(text) => {
            if let Some(reference) = meant(text, known) {
                sink.push(diagnostic(text, &reference, span, pointer, src));
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                literal(item, span, &format!("{pointer}/{i}"), src, known, sink);
            }
        }
        Value::Object(members) => {
            for (key, member) in members {
                literal(member, span, &child_pointer(pointer, key), src, known, sink);
            }
        }
        _ => {}
    }
}

/// The interpolation `text` most likely means, if it is exactly a
/// reference to one of the workflow's steps (`steps.x…`, `.output`
/// supplied) or inputs (`inputs.x…`).
fn meant(text: &str, known: &Known<'_, '_>) -> Option<String> {
    let path = |rest: &str| {
        rest.split('.').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-'))
        })
    };
    if let Some(rest) = text.strip_prefix("steps.") {
        let (step, after) = rest
            .split_once('.')
            .map_or((rest, None), |(s, a)| (s, Some(a)));
        if known.model.step(step).is_none() || !path(rest) {
            return None;
        }
        return Some(match after {
            None => format!("steps.{step}.output"),
            Some(after) if after == "output" || after.starts_with("output.") => text.to_owned(),
            Some(after) => format!("steps.{step}.output.{after}"),
        });
    }
    let rest = text.strip_prefix("inputs.")?;
    let name = rest.split('.').next()?;
    let declared = known.inputs.is_none_or(|inputs| inputs.contains(name));
    (declared && path(rest)).then(|| text.to_owned())
}

fn diagnostic(text: &str, reference: &str, within: Span, pointer: &str, src: &str) -> Diagnostic {
    let wrapped = format!("${{{{{reference}}}}}");
    let quoted = Value::from(text).to_string();
    let written = src
        .get(within.start as usize..within.end as usize)
        .and_then(|inside| inside.find(&quoted))
        .map(|at| {
            let start = within.start as usize + at;
            Span::new(start, start + quoted.len())
        });
    let d = Diagnostic::warning(
        W0012,
        written.unwrap_or(within),
        format!("`{text}` is sent as this text, not as the value it names"),
    )
    .with_help(format!("to pass the value, write `{wrapped}`"))
    .with_pointer(pointer);
    let patch = PatchOp::Replace {
        path: pointer.to_owned(),
        value: Value::from(wrapped.clone()),
    };
    match written {
        Some(span) => d.with_fix(Fix::replace(
            format!("pass the value: `{wrapped}`"),
            span,
            Value::from(wrapped.clone()).to_string(),
            Some(patch),
        )),
        None => d,
    }
}
