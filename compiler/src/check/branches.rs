//! A condition whose expression gives `true` or `false` takes the branch
//! named `"true"` or `"false"` (the value as text): a branch named
//! otherwise (`yes`, `no`) is never taken (E0060), and the run skips the
//! step without a word. Where the names say yes and no, the fix renames
//! them.

use cel::common::ast::operators::{
    EQUALS, GREATER, GREATER_EQUALS, IN, LESS, LESS_EQUALS, LOGICAL_AND, LOGICAL_NOT, LOGICAL_OR,
    NOT_EQUALS,
};
use cel::common::ast::{Expr as CelExpr, IdedExpr, LiteralValue};

use crate::ast::{ConditionStep, Step};
use crate::diagnostics::codes::E0060;
use crate::diagnostics::{Diagnostic, Diagnostics, Fix};
use crate::syntax::node::child_pointer;

/// Names that say yes, and no.
const YES: &[&str] = &[
    "yes", "y", "ok", "pass", "passed", "success", "on", "approve", "approved", "valid", "then",
];
const NO: &[&str] = &[
    "no", "n", "fail", "failed", "failure", "off", "reject", "rejected", "invalid", "else",
];

/// Reports the branches of `condition` never taken because its expression
/// gives a boolean.
pub fn check(step: &Step, condition: &ConditionStep, sink: &mut Diagnostics) {
    let Ok(ast) = cel::parser::PrattParser::default().parse(&condition.expression.source) else {
        return;
    };
    if !gives_a_boolean(&ast) {
        return;
    }
    let never: Vec<_> = condition
        .branches
        .iter()
        .filter(|(key, _)| !matches!(key.value.as_str(), "true" | "false"))
        .collect();
    let Some((first, _)) = never.first() else {
        return;
    };
    let branches = format!("{}/config/branches", step.pointer);
    let names: Vec<String> = never
        .iter()
        .map(|(k, _)| format!("`{}`", k.value))
        .collect();
    let mut diagnostic = Diagnostic::error(
        E0060,
        first.span,
        match names.as_slice() {
            [one] => format!("the expression gives true or false, so branch {one} is never taken"),
            many => format!(
                "the expression gives true or false, so branches {} are never taken",
                many.join(" and ")
            ),
        },
    )
    .with_help("name the branches \"true\" and \"false\" (the value as text)")
    .with_pointer(child_pointer(&branches, &first.value));
    for (key, _) in never.iter().skip(1) {
        diagnostic = diagnostic.with_secondary(key.span, "never taken either");
    }
    if let Some(fix) = renames(&never, condition, &branches) {
        diagnostic = diagnostic.with_fix(fix);
    }
    sink.push(diagnostic);
}

/// The fix renaming each branch that says yes to `"true"` and each that
/// says no to `"false"`, when every one does and no name is taken twice.
fn renames(
    never: &[&(crate::ast::Spanned<String>, crate::ast::Block)],
    condition: &ConditionStep,
    branches: &str,
) -> Option<Fix> {
    let mut taken: Vec<&str> = condition
        .branches
        .iter()
        .map(|(k, _)| k.value.as_str())
        .filter(|k| matches!(*k, "true" | "false"))
        .collect();
    let mut fix: Option<Fix> = None;
    for (key, _) in never {
        let word = key.value.to_ascii_lowercase();
        let to = if YES.contains(&word.as_str()) {
            "true"
        } else if NO.contains(&word.as_str()) {
            "false"
        } else {
            return None;
        };
        if taken.contains(&to) {
            return None;
        }
        taken.push(to);
        let one = Fix::rename_key("", key.span, &child_pointer(branches, &key.value), to);
        fix = Some(match fix {
            None => one,
            Some(mut all) => {
                all.edits.extend(one.edits);
                all.patch.extend(one.patch);
                all
            }
        });
    }
    fix.map(|mut fix| {
        "name the branches by the value: \"true\" and \"false\"".clone_into(&mut fix.message);
        fix
    })
}

/// Does the expression's value have to be a boolean?
fn gives_a_boolean(e: &IdedExpr) -> bool {
    match &e.expr {
        CelExpr::Literal(LiteralValue::Boolean(_)) => true,
        CelExpr::Select(select) => select.test,
        CelExpr::Call(call) => {
            [
                EQUALS,
                NOT_EQUALS,
                LESS,
                LESS_EQUALS,
                GREATER,
                GREATER_EQUALS,
                LOGICAL_AND,
                LOGICAL_OR,
                LOGICAL_NOT,
                IN,
            ]
            .contains(&call.func_name.as_str())
                || (call.target.is_some()
                    && matches!(
                        call.func_name.as_str(),
                        "startsWith" | "endsWith" | "contains" | "matches"
                    ))
        }
        _ => false,
    }
}
