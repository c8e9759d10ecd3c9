//! Lowering values that carry code: templates (`${{…}}`), CEL expressions and
//! `data_inject` references. Only the syntax is checked here; what a
//! reference names is resolved later, in `check::references`.

use super::Lowerer;
use super::fields::Fields;
use crate::ast::{Expr, Reference, Spanned, Template, TemplateKind, TextOrigin, TextPart};
use crate::diagnostics::codes::{E0032, E0037, W0008};
use crate::diagnostics::{Diagnostic, Fix};
use crate::syntax::node::{Node, NodeKind};
use crate::syntax::template::{self, Piece, RawReference};

/// The namespaces a reference may start with.
pub const NAMESPACES: &[&str] = &["steps", "inputs", "workflow", "context", "secrets", "loop"];

impl Lowerer<'_> {
    /// Lowers an object whose members each keep their own span (action
    /// `params`), even when nothing in it is interpolated.
    pub(crate) fn object_template(&mut self, node: &Node<'_>, pointer: &str) -> Template {
        let NodeKind::Object(members) = &node.kind else {
            return self.template(node, pointer);
        };
        let members = members
            .iter()
            .map(|m| {
                let child = super::child_pointer(pointer, &m.key);
                (
                    Spanned::new(m.key.clone().into_owned(), m.key_span),
                    self.template(&m.value, &child),
                )
            })
            .collect();
        Template {
            span: node.span,
            kind: TemplateKind::Object(members),
        }
    }

    /// Lowers a JSON value that may contain `${{…}}` tokens.
    pub(crate) fn template(&mut self, node: &Node<'_>, pointer: &str) -> Template {
        let kind = match &node.kind {
            NodeKind::String(s) if !template::is_plain(s) => {
                self.string_template(s, TextOrigin::json_string(node.span, s), pointer)
            }
            NodeKind::Array(items) if contains_tokens(node) => TemplateKind::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.template(item, &format!("{pointer}/{i}")))
                    .collect(),
            ),
            NodeKind::Object(_) if contains_tokens(node) => {
                return self.object_template(node, pointer);
            }
            _ => TemplateKind::Literal(node.to_value()),
        };
        let kind = match kind {
            // A string whose tokens were malformed is kept as literal text.
            TemplateKind::Text(parts) if parts.is_empty() => TemplateKind::Literal(node.to_value()),
            other => other,
        };
        Template {
            span: node.span,
            kind,
        }
    }

    /// Splits one string into text and references.
    fn string_template(&mut self, s: &str, origin: TextOrigin, pointer: &str) -> TemplateKind {
        let pieces = match template::parse_template(s) {
            Ok(pieces) => pieces,
            Err(e) => {
                let mut diagnostic =
                    Diagnostic::error(E0032, origin.file_span(self.src, e.span.clone()), e.message)
                        .with_pointer(pointer);
                if let Some(help) = e.help {
                    diagnostic = diagnostic.with_help(help);
                }
                if let Some((at, text)) = e.insert {
                    let span = origin.file_span(self.src, at..at);
                    diagnostic = diagnostic.with_fix(Fix::replace(
                        format!("insert `{text}`"),
                        span,
                        text,
                        None,
                    ));
                }
                self.report(diagnostic);
                return TemplateKind::Text(Vec::new());
            }
        };
        match pieces.as_slice() {
            [Piece::Ref(r, token)] => TemplateKind::Ref(self.reference(r, token.clone(), origin)),
            _ => TemplateKind::Text(
                pieces
                    .into_iter()
                    .map(|piece| match piece {
                        Piece::Text(t) => TextPart::Text(t),
                        Piece::Ref(r, token) => TextPart::Ref(self.reference(&r, token, origin)),
                    })
                    .collect(),
            ),
        }
    }

    /// Maps a raw reference's string offsets to file spans.
    fn reference(
        &self,
        raw: &RawReference,
        token: std::ops::Range<usize>,
        origin: TextOrigin,
    ) -> Reference {
        Reference {
            span: origin.file_span(self.src, token),
            namespace: Spanned::new(
                raw.namespace.clone(),
                origin.file_span(self.src, raw.namespace_span.clone()),
            ),
            segments: raw
                .segments
                .iter()
                .map(|(segment, span)| {
                    Spanned::new(segment.clone(), origin.file_span(self.src, span.clone()))
                })
                .collect(),
        }
    }

    /// A required CEL expression field (`condition`, `expression`, `over`…).
    pub(crate) fn opt_expr(&mut self, fields: &Fields<'_, '_>, key: &str) -> Option<Expr> {
        let member = fields.get(key)?;
        match &member.value.kind {
            NodeKind::String(source) => Some(Expr {
                source: source.clone().into_owned(),
                span: member.value.span,
                origin: TextOrigin::json_string(member.value.span, source),
            }),
            // A literal boolean guard is accepted and treated as the CEL constant.
            NodeKind::Bool(b) => Some(Expr {
                source: b.to_string(),
                span: member.value.span,
                origin: TextOrigin::Verbatim(member.value.span.start),
            }),
            _ => {
                self.wrong_type(member, &fields.pointer_of(key), "a CEL expression string");
                None
            }
        }
    }

    /// Refuses `${{…}}` in the definition's `inputs` (E0037): they are
    /// default values, stored with each run, never interpolated, so a
    /// reference there would stay literal text; a secret would be stored.
    pub(crate) fn refuse_references(&mut self, node: &Node<'_>, pointer: &str) {
        match &node.kind {
            NodeKind::Object(members) => {
                for m in members {
                    self.refuse_references(&m.value, &super::child_pointer(pointer, &m.key));
                }
                return;
            }
            NodeKind::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.refuse_references(item, &format!("{pointer}/{i}"));
                }
                return;
            }
            _ => {}
        }
        let template = self.template(node, pointer);
        for r in template.references() {
            let secret = r.namespace.value == "secrets";
            let (message, help) = if secret {
                (
                    "a secret cannot be an input's default".to_owned(),
                    format!(
                        "inputs are stored with every run, and secrets never are: write `${{{{{}}}}}` in the `params` of the action that needs it, where it is resolved at dispatch and redacted",
                        r.render()
                    ),
                )
            } else {
                (
                    format!("`${{{{{}}}}}` is not read in `inputs`", r.render()),
                    "input defaults are plain values: compute the value in a step, or write `$${{` to keep the text".to_owned(),
                )
            };
            self.report(
                Diagnostic::error(E0037, r.span, message)
                    .with_help(help)
                    .with_pointer(pointer),
            );
        }
    }

    /// The text field `key` as a template, when it is a string that reads
    /// values (`${{…}}`); `None` for plain text (or a field that is not
    /// text, reported where the field is read).
    pub(crate) fn text_template(&mut self, fields: &Fields<'_, '_>, key: &str) -> Option<Template> {
        let member = fields.get(key)?;
        member.value.as_str()?;
        let template = self.template(&member.value, &fields.pointer_of(key));
        (!matches!(template.kind, TemplateKind::Literal(_))).then_some(template)
    }

    /// A `data_inject` value: a bare reference, a template, or a literal.
    pub(crate) fn data_inject_value(&mut self, node: &Node<'_>, pointer: &str) -> Template {
        let NodeKind::String(s) = &node.kind else {
            return self.template(node, pointer);
        };
        if !template::is_plain(s) {
            return self.template(node, pointer);
        }
        let origin = TextOrigin::json_string(node.span, s);
        match template::parse_reference(s) {
            Ok(raw) if NAMESPACES.contains(&raw.namespace.as_str()) => {
                let whole = 0..s.len();
                Template {
                    span: node.span,
                    kind: TemplateKind::Ref(self.reference(&raw, whole, origin)),
                }
            }
            _ => {
                self.report(
                    Diagnostic::warning(
                        W0008,
                        node.span,
                        "this `data_inject` value is not a reference; it is shown as literal text",
                    )
                    .with_help(
                        "references start with `steps.`, `inputs.`, `loop.`, `workflow.` or `context.`; \
                         write `${{…}}` to mix text and references",
                    )
                    .with_pointer(pointer),
                );
                Template {
                    span: node.span,
                    kind: TemplateKind::Literal(node.to_value()),
                }
            }
        }
    }
}

/// Does any string inside `node` contain `${{`?
fn contains_tokens(node: &Node<'_>) -> bool {
    match &node.kind {
        NodeKind::String(s) => !template::is_plain(s),
        NodeKind::Array(items) => items.iter().any(contains_tokens),
        NodeKind::Object(members) => members.iter().any(|m| contains_tokens(&m.value)),
        _ => false,
    }
}
