//! An action step's `params` as written: each member's key and value,
//! what the checks of actions read.

use crate::ast::{Template, TemplateKind};
use crate::source::Span;

/// One parameter as written: its key and its value.
pub(super) struct Param<'t> {
    pub(super) key: &'t str,
    pub(super) key_span: Span,
    pub(super) value: &'t Template,
}

impl Param<'_> {
    /// The value when it holds no references.
    pub(super) fn literal(&self) -> Option<&serde_json::Value> {
        match &self.value.kind {
            TemplateKind::Literal(v) => Some(v),
            _ => None,
        }
    }
}

/// The members of `params` (lowered as an object with one template per member).
pub(super) fn params_of(template: Option<&Template>) -> Vec<Param<'_>> {
    match template.map(|t| &t.kind) {
        Some(TemplateKind::Object(members)) => members
            .iter()
            .map(|(k, v)| Param {
                key: &k.value,
                key_span: k.span,
                value: v,
            })
            .collect(),
        _ => Vec::new(),
    }
}
