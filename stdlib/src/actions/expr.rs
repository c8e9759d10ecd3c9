//! `expr.eval`: a CEL or an Expr expression (spec/language.md, "Expr").

use opcode_vm::catalog::{ActionSpec, Ty};

use super::spec::action;

/// Signatures.
pub fn specs() -> Vec<ActionSpec> {
    vec![
        action("expr.eval", "Evaluates an expression with the workflow's variables (`steps`, `inputs`, `workflow`, `context`, `iter`) and `data`: CEL, or Expr (opcode's language for `expr.eval`) when `language` says `expr` or the text parses only as Expr.")
            .in_round_for_cel()
            .req("expression", Ty::String, "a CEL or an Expr expression")
            .opt("language", Ty::one_of_strings(&["cel", "expr"]), "`cel` or `expr`; when absent, CEL if the text parses as CEL, else Expr (the compiler writes the answer in)")
            .opt("data", Ty::Any, "extra value, visible as `data`")
            .output(Ty::object([("result", Ty::Any)])),
    ]
}

/// Runs `expr.eval`.
#[cfg(feature = "runtime")]
pub async fn run(
    call: &crate::call::Call,
    helper: Option<&std::path::Path>,
    limits: &crate::limits::Limits,
) -> Result<serde_json::Value, opcode_vm::error::ActionError> {
    use serde_json::Value;
    let expression = call.required("expression")?;
    let null = Value::Null;
    let scope = call.scope.as_ref().unwrap_or(&null);
    let data = call.params.get("data").unwrap_or(&null);
    let expr = match call.params.get("language").and_then(Value::as_str) {
        Some(language) => language == "expr",
        None => !crate::cel::parses(expression),
    };
    let result = if expr {
        let variables = expr_variables(scope, data);
        let mut outputs = crate::evaluator::evaluate(
            crate::evaluator::Language::Expr,
            expression,
            &variables,
            helper,
            limits,
        )
        .await?;
        outputs.pop().unwrap_or(Value::Null)
    } else {
        crate::cel::eval_source(expression, scope, data, limits.cel)?
    };
    Ok(serde_json::json!({"result": result}))
}

/// The variables of an Expr evaluation: the scope's namespaces, `data`,
/// and, as opcode gives them, each input by its own name where no
/// namespace has it.
#[cfg(feature = "runtime")]
fn expr_variables(scope: &serde_json::Value, data: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    let mut variables = scope.as_object().cloned().unwrap_or_default();
    variables
        .entry("iter")
        .and_modify(|iter| {
            if iter.is_null() {
                *iter = Value::Object(serde_json::Map::default());
            }
        })
        .or_insert_with(|| Value::Object(serde_json::Map::default()));
    if let Some(Value::Object(inputs)) = scope.get("inputs") {
        for (name, value) in inputs {
            variables
                .entry(name.clone())
                .or_insert_with(|| value.clone());
        }
    }
    variables.insert("data".into(), data.clone());
    Value::Object(variables)
}
