//! What editors navigate by: every step (its id, kind, action, where its
//! params are), every place a step id is used (`depends_on`, `${{steps.…}}`,
//! `steps.…` in CEL, `fallback_step`), and every `${{…}}` reference.

use crate::ast::{Block, Document, Expr, Reference, Step, StepKind, Template};
use crate::source::Span;
use crate::syntax::template::Segment;

/// One step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepEntry {
    /// Its id.
    pub id: String,
    /// Where the id is written.
    pub id_span: Span,
    /// The whole step.
    pub span: Span,
    /// `action`, `condition`, `loop`…
    pub kind: &'static str,
    /// The action and where it is written.
    pub action: Option<(String, Span)>,
    /// The `params` object.
    pub params: Option<Span>,
    /// Ids of the enclosing steps, outermost first.
    pub parents: Vec<String>,
}

/// The index of a document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Index {
    /// Every step, in source order (hooks included).
    pub steps: Vec<StepEntry>,
    /// Every use of a step id: the id and where it is written.
    pub uses: Vec<(String, Span)>,
    /// Every `${{…}}` reference.
    pub references: Vec<Reference>,
}

impl Index {
    /// Indexes `doc`, read from `src`.
    pub fn new(doc: &Document, src: &str) -> Index {
        let mut index = Index::default();
        let w = &doc.workflow;
        index.block(&w.steps, &[], src);
        for hook in [&w.on_complete, &w.on_error].into_iter().flatten() {
            index.add(hook, &[], src);
        }
        if let Some(output) = &w.output {
            index.template(output, src);
        }
        index.steps.sort_by_key(|s| s.span.start);
        index.uses.sort_by_key(|(_, span)| span.start);
        index
    }

    /// The step whose id is `id`.
    pub fn step(&self, id: &str) -> Option<&StepEntry> {
        self.steps.iter().find(|s| s.id == id)
    }

    /// The step id defined or used at byte `offset`.
    pub fn id_at(&self, offset: usize) -> Option<&str> {
        let inside = |span: &Span| (span.start as usize) <= offset && offset <= span.end as usize;
        self.steps
            .iter()
            .find(|s| inside(&s.id_span))
            .map(|s| s.id.as_str())
            .or_else(|| {
                self.uses
                    .iter()
                    .find(|(_, span)| inside(span))
                    .map(|(id, _)| id.as_str())
            })
    }

    /// The innermost step containing byte `offset`.
    pub fn step_at(&self, offset: usize) -> Option<&StepEntry> {
        self.steps
            .iter()
            .filter(|s| (s.span.start as usize) <= offset && offset < s.span.end as usize)
            .min_by_key(|s| s.span.len())
    }

    /// The reference whose `${{…}}` contains byte `offset`.
    pub fn reference_at(&self, offset: usize) -> Option<&Reference> {
        self.references
            .iter()
            .find(|r| (r.span.start as usize) <= offset && offset <= r.span.end as usize)
    }

    fn block(&mut self, block: &Block, parents: &[String], src: &str) {
        for step in &block.steps {
            self.add(step, parents, src);
        }
    }

    fn add(&mut self, step: &Step, parents: &[String], src: &str) {
        let (action, params) = match &step.kind {
            StepKind::Action(a) => (
                Some((a.action.value.clone(), a.action.span)),
                a.params.as_ref().map(|p| p.span),
            ),
            _ => (None, None),
        };
        self.steps.push(StepEntry {
            id: step.id.value.clone(),
            id_span: name_span(step.id.span, src),
            span: step.span,
            kind: step.kind.type_name(),
            action,
            params,
            parents: parents.to_vec(),
        });
        for dep in &step.depends_on {
            self.uses
                .push((dep.value.clone(), name_span(dep.span, src)));
        }
        if let Some(fallback) = step
            .on_error
            .as_ref()
            .and_then(|e| e.fallback_step.as_ref())
        {
            self.uses
                .push((fallback.value.clone(), name_span(fallback.span, src)));
        }
        if let Some(guard) = &step.guard {
            self.expr(guard, src);
        }
        match &step.kind {
            StepKind::Action(a) => {
                if let Some(params) = &a.params {
                    self.template(params, src);
                }
            }
            StepKind::Condition(c) => self.expr(&c.expression, src),
            StepKind::Loop(l) => {
                for e in [&l.over, &l.condition].into_iter().flatten() {
                    self.expr(e, src);
                }
            }
            StepKind::Reasoning(r) => {
                for (_, t) in &r.data_inject {
                    self.template(t, src);
                }
                for (_, t) in r.texts() {
                    self.template(t, src);
                }
            }
            StepKind::Parallel(_) | StepKind::Wait(_) => {}
        }
        let mut inner = parents.to_vec();
        inner.push(step.id.value.clone());
        for (_, block) in step.children() {
            self.block(block, &inner, src);
        }
    }

    fn template(&mut self, template: &Template, src: &str) {
        for r in template.references() {
            if r.namespace.value == "steps"
                && let Some(first) = r.segments.first()
                && let Segment::Key(id) = &first.value
            {
                self.uses.push((id.clone(), name_span(first.span, src)));
            }
            self.references.push(r.clone());
        }
    }

    /// `steps.ID` and `steps['ID']` in a CEL expression.
    fn expr(&mut self, expr: &Expr, src: &str) {
        let text = expr.source.as_str();
        let mut from = 0;
        while let Some(found) = text[from..].find("steps") {
            let at = from + found;
            from = at + 5;
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.') {
                continue;
            }
            let rest = &text[from..];
            let (start, len) = if let Some(name) = rest.strip_prefix('.') {
                (
                    from + 1,
                    name.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
                        .unwrap_or(name.len()),
                )
            } else if let Some(quoted) =
                rest.strip_prefix("['").or_else(|| rest.strip_prefix("[\""))
            {
                (from + 2, quoted.find(['\'', '"']).unwrap_or(0))
            } else {
                continue;
            };
            if len > 0 {
                let span = expr.origin.file_span(src, start..start + len);
                self.uses.push((text[start..start + len].to_owned(), span));
            }
        }
    }
}

/// The span of a name without its quotes, leading `.` or `['…']`.
fn name_span(span: Span, src: &str) -> Span {
    let text = src.get(span.range()).unwrap_or_default();
    let (start, end) = (span.start as usize, span.end as usize);
    if text.len() >= 2 && (text.starts_with('"') || text.starts_with('\'')) {
        Span::new(start + 1, end - 1)
    } else if text.len() >= 4 && text.starts_with('[') {
        Span::new(start + 2, end - 2)
    } else if text.starts_with('.') {
        Span::new(start + 1, end)
    } else {
        span
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Compiler;
    use crate::diagnostics::Diagnostics;

    #[test]
    fn finds_steps_and_every_use_of_their_ids() {
        let src = r#"{"steps": [
            {"id": "a", "action": "crypto.uuid"},
            {"id": "b", "action": "workflow.log", "depends_on": ["a"], "condition": "steps.a.uuid != ''",
             "params": {"message": "${{steps.a.output.uuid}}"}},
            {"id": "l", "type": "loop", "config": {"over": "[1]", "body": [
                {"id": "inner", "action": "expr.eval", "params": {"expression": "steps['a'].uuid"}}]}}]}"#;
        let doc = Compiler::new().parse(src, &mut Diagnostics::new()).unwrap();
        let index = Index::new(&doc, src);
        let ids: Vec<&str> = index.steps.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "l", "inner"]);
        assert_eq!(index.step("inner").unwrap().parents, ["l"]);
        let uses_of_a: Vec<&str> = index
            .uses
            .iter()
            .filter(|(id, _)| id == "a")
            .map(|(_, span)| &src[span.range()])
            .collect();
        assert_eq!(
            uses_of_a,
            ["a", "a", "a"],
            "depends_on, the guard, the template"
        );
        let at = src.find("steps.a.output").unwrap() + 7;
        assert_eq!(index.id_at(at), Some("a"));
        assert_eq!(index.reference_at(at).unwrap().namespace.value, "steps");
    }
}
