//! A reasoning step's choice compared with text that is none of its
//! options (`steps.review.choice == 'aprove'`): the comparison is never
//! true, and the step it guards never runs (E0061). The options are named,
//! and the closest is the fix.

use cel::common::ast::operators::{EQUALS, IN, NOT_EQUALS};
use cel::common::ast::{Expr as CelExpr, IdedExpr, LiteralValue};

use super::cel::step_of;
use super::model::Model;
use crate::ast::{Expr, StepKind};
use crate::diagnostics::codes::E0061;
use crate::diagnostics::{Diagnostic, Diagnostics, Fix, PatchOp, did_you_mean};

/// Reports each text `expr` compares a reasoning step's `choice` with
/// that is not one of the step's options.
pub fn check(expr: &Expr, src: &str, pointer: &str, model: &Model<'_>, sink: &mut Diagnostics) {
    let Ok(ast) = cel::parser::PrattParser::default().parse(&expr.source) else {
        return;
    };
    let mut compared = Vec::new();
    comparisons(&ast, &mut compared);
    for (step, text) in compared {
        let Some(info) = model.step(&step) else {
            continue;
        };
        let StepKind::Reasoning(reasoning) = &info.step.kind else {
            continue;
        };
        let options: Vec<&str> = reasoning
            .options
            .iter()
            .map(|o| o.id.value.as_str())
            .collect();
        if options.is_empty() || options.contains(&text.as_str()) {
            continue;
        }
        sink.push(diagnostic(expr, src, pointer, &step, &text, &options));
    }
}

fn diagnostic(
    expr: &Expr,
    src: &str,
    pointer: &str,
    step: &str,
    text: &str,
    options: &[&str],
) -> Diagnostic {
    // The text as written, quotes and all, in the expression.
    let written = ["'", "\""]
        .iter()
        .find_map(|q| expr.source.find(&format!("{q}{text}{q}")).map(|at| at + 1));
    let span = written.map_or(expr.span, |at| {
        expr.origin.file_span(src, at..at + text.len())
    });
    let mut d = Diagnostic::error(
        E0061,
        span,
        format!(
            "`{text}` is not an option of `{step}`, so this comparison is never true: its options are {}",
            options.join(", ")
        ),
    )
    .with_pointer(pointer);
    if let Some(close) = did_you_mean(text, options) {
        d = d.with_help(format!("did you mean `{close}`?"));
        if let Some(at) = written {
            let mut fixed = expr.source.clone();
            fixed.replace_range(at..at + text.len(), close);
            d = d.with_fix(Fix::replace(
                format!("compare with `{close}`"),
                span,
                close,
                Some(PatchOp::Replace {
                    path: pointer.to_owned(),
                    value: fixed.into(),
                }),
            ));
        }
    }
    d
}

/// The (step, text) pairs `e` compares a step's `choice` with: `==`, `!=`
/// and `in` a list of texts.
fn comparisons(e: &IdedExpr, out: &mut Vec<(String, String)>) {
    match &e.expr {
        CelExpr::Call(call) => {
            match (call.func_name.as_str(), call.args.as_slice()) {
                (EQUALS | NOT_EQUALS, [a, b]) => {
                    for (choice, other) in [(a, b), (b, a)] {
                        if let (Some(step), Some(text)) = (choice_of(choice), text_of(other)) {
                            out.push((step, text));
                        }
                    }
                }
                (IN, [choice, list]) => {
                    if let (Some(step), CelExpr::List(list)) = (choice_of(choice), &list.expr) {
                        for text in list.elements.iter().filter_map(text_of) {
                            out.push((step.clone(), text));
                        }
                    }
                }
                _ => {}
            }
            for arg in call.args.iter().chain(call.target.as_deref()) {
                comparisons(arg, out);
            }
        }
        CelExpr::Select(select) => comparisons(&select.operand, out),
        _ => {}
    }
}

/// `steps.x.choice`: the step.
fn choice_of(e: &IdedExpr) -> Option<String> {
    match &e.expr {
        CelExpr::Select(select) if select.field == "choice" && !select.test => {
            step_of(&select.operand)
        }
        _ => None,
    }
}

fn text_of(e: &IdedExpr) -> Option<String> {
    match &e.expr {
        CelExpr::Literal(LiteralValue::String(text)) => Some(text.inner().to_owned()),
        _ => None,
    }
}
