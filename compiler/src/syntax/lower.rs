//! Lowering the JSON tree into the workflow AST.
//!
//! This is where structure and field types are checked: every field of the
//! wrapper, the definition, each step and each type-specific `config` block,
//! nested to any depth. Problems are reported and lowering goes on with a
//! best-effort value, so one run finds every structural problem. Unknown
//! fields are warnings (opcode silently dropped them), with a rename fix when
//! a known field is one typo away.

mod concurrency;
mod fields;
pub mod step;
pub(crate) mod value;

use self::fields::Fields;
use crate::ast::{Block, Document, Spanned, Workflow, Wrapper};
use crate::diagnostics::codes::{E0010, E0011, E0012, E0014};
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::source::Span;
use crate::syntax::node::{Node, NodeKind, child_pointer};

/// Lowers a parsed JSON document (bare definition or opcode wrapper).
pub fn lower_document(src: &str, root: &Node<'_>, sink: &mut Diagnostics) -> Option<Document> {
    let mut lowerer = Lowerer { src, sink };
    lowerer.document(root)
}

/// State shared by the lowering functions: the source and the sink.
pub(crate) struct Lowerer<'a> {
    pub(crate) src: &'a str,
    pub(crate) sink: &'a mut Diagnostics,
}

const WRAPPER_FIELDS: &[&str] = &[
    "$schema",
    "name",
    "description",
    "category",
    "features",
    "version",
    "input_schema",
    "output_schema",
    "triggers",
    "expose",
    "priority",
    "definition",
];

const DEFINITION_FIELDS: &[&str] = &[
    "$schema",
    "steps",
    "inputs",
    "context",
    "timeout",
    "on_timeout",
    "on_complete",
    "on_error",
    "output",
    "metadata",
    "concurrency",
];

impl Lowerer<'_> {
    fn report(&mut self, diagnostic: Diagnostic) {
        self.sink.push(diagnostic);
    }

    fn document(&mut self, root: &Node<'_>) -> Option<Document> {
        let NodeKind::Object(_) = &root.kind else {
            self.report(
                Diagnostic::error(
                    E0010,
                    root.span,
                    format!("a workflow must be a JSON object, found {}", root.kind_name()),
                )
                .with_help("write `{\"steps\": [...]}`, or opcode's wrapper `{\"name\": ..., \"definition\": {...}}`")
                .with_pointer(""),
            );
            return None;
        };
        if root.get("definition").is_some() {
            let fields = self.fields(root, "", "workflow wrapper", WRAPPER_FIELDS)?;
            let wrapper = self.wrapper(&fields);
            let definition = &fields.get("definition")?.value;
            let workflow = self.workflow(definition, "/definition")?;
            return Some(Document {
                wrapper: Some(wrapper),
                workflow,
                base_pointer: "/definition".into(),
            });
        }
        if root.get("steps").is_none() {
            self.report(
                Diagnostic::error(
                    E0011,
                    // The opening brace; an empty `.opc` text has none.
                    Span::new(root.span.start as usize, (root.span.start + 1).min(root.span.end) as usize),
                    "missing field `steps`",
                )
                    .with_help("a workflow is an object with a `steps` array, or opcode's wrapper with a `definition` object")
                    .with_pointer(""),
            );
            return None;
        }
        let workflow = self.workflow(root, "")?;
        Some(Document {
            wrapper: None,
            workflow,
            base_pointer: String::new(),
        })
    }

    fn wrapper(&mut self, fields: &Fields<'_, '_>) -> Wrapper {
        Wrapper {
            name: self.opt_string(fields, "name"),
            description: self.opt_string(fields, "description"),
            category: self.opt_string(fields, "category"),
            features: self.opt_typed(fields, "features", "array"),
            input_schema: self.opt_typed(fields, "input_schema", "object"),
            output_schema: self.opt_typed(fields, "output_schema", "object"),
            triggers: fields
                .get("triggers")
                .map(|m| Spanned::new(m.value.to_value(), m.value.span)),
            expose: self.opt_bool(fields, "expose"),
            priority: self.priority(fields),
        }
    }

    /// The template's priority: 0 (first) to 9 (last).
    fn priority(&mut self, fields: &Fields<'_, '_>) -> Option<Spanned<u64>> {
        let priority = self.opt_count(fields, "priority")?;
        let last = u64::from(opcode_vm::limits::PRIORITY_LAST);
        if priority.value > last {
            self.report(
                Diagnostic::error(
                    E0014,
                    priority.span,
                    format!(
                        "`priority` runs from 0 (first) to {last} (last), found {}",
                        priority.value
                    ),
                )
                .with_help("runs of a lower number get worker slots first; the default is 5")
                .with_pointer(fields.pointer_of("priority")),
            );
            return None;
        }
        Some(priority)
    }

    fn workflow(&mut self, node: &Node<'_>, pointer: &str) -> Option<Workflow> {
        let fields = self.fields(node, pointer, "workflow definition", DEFINITION_FIELDS)?;
        let steps = if let Some(member) = fields.get("steps") {
            self.block(&member.value, &fields.pointer_of("steps"), "steps", true)
        } else {
            self.report(
                Diagnostic::error(E0011, node.span, "missing field `steps`")
                    .with_help("add `\"steps\": [ ... ]`")
                    .with_pointer(pointer),
            );
            empty_block(node.span, &fields.pointer_of("steps"))
        };
        if let Some(member) = fields.get("inputs") {
            self.refuse_references(&member.value, &fields.pointer_of("inputs"));
        }
        let on_complete = fields
            .get("on_complete")
            .and_then(|m| self.hook(&m.value, &fields.pointer_of("on_complete")));
        let on_error = fields
            .get("on_error")
            .and_then(|m| self.hook(&m.value, &fields.pointer_of("on_error")));
        Some(Workflow {
            span: node.span,
            steps,
            inputs: self.opt_typed(&fields, "inputs", "object"),
            context: self.opt_typed(&fields, "context", "object"),
            timeout: self.opt_duration(&fields, "timeout"),
            on_timeout: self.opt_enum(
                &fields,
                "on_timeout",
                opcode_vm::policy::OnTimeout::parse,
                opcode_vm::policy::OnTimeout::SPELLINGS,
            ),
            on_complete,
            on_error,
            output: fields
                .get("output")
                .map(|m| self.template(&m.value, &fields.pointer_of("output"))),
            metadata: self.opt_typed(&fields, "metadata", "object"),
            concurrency: fields
                .get("concurrency")
                .and_then(|m| self.concurrency(&m.value, &fields.pointer_of("concurrency"))),
        })
    }

    /// A workflow hook: one step object (an array of one step is accepted too).
    fn hook(&mut self, node: &Node<'_>, pointer: &str) -> Option<Box<crate::ast::Step>> {
        if let Some(items) = node.as_array() {
            if let [only] = items {
                return self.step(only, &format!("{pointer}/0")).map(Box::new);
            }
            self.report(
                Diagnostic::error(E0010, node.span, "a workflow hook is one step")
                    .with_help("use a `parallel` or `condition` step to run several steps")
                    .with_pointer(pointer),
            );
            return None;
        }
        self.step(node, pointer).map(Box::new)
    }

    /// Lowers an array of steps. `required` blocks must not be empty.
    pub(crate) fn block(
        &mut self,
        node: &Node<'_>,
        pointer: &str,
        what: &str,
        required: bool,
    ) -> Block {
        let Some(items) = node.as_array() else {
            self.report(
                Diagnostic::error(
                    E0010,
                    node.span,
                    format!(
                        "`{what}` must be an array of steps, found {}",
                        node.kind_name()
                    ),
                )
                .with_pointer(pointer),
            );
            return empty_block(node.span, pointer);
        };
        if items.is_empty() && required {
            self.report(
                Diagnostic::error(E0012, node.span, format!("`{what}` has no steps"))
                    .with_help("add at least one step")
                    .with_pointer(pointer),
            );
        }
        let steps = items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| self.step(item, &format!("{pointer}/{i}")))
            .collect();
        Block {
            steps,
            span: node.span,
            pointer: pointer.to_owned(),
        }
    }
}

fn empty_block(span: Span, pointer: &str) -> Block {
    Block {
        steps: Vec::new(),
        span,
        pointer: pointer.to_owned(),
    }
}
