//! The CEL engine: implements the VM's [`Host`] with the `cel` crate.
//!
//! Every expression of a Program is compiled once, when the host is built;
//! evaluation converts the variables the expression reads from JSON to CEL
//! values directly (no serializer in between) and the result back. Before
//! each evaluation its cost is bounded ([`budget`]), and a panic in the
//! engine is the step's failure, never the process's.

pub mod budget;
mod reads;
mod source;
mod val;
mod words;

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::types::CelInt;
use cel::common::value::Val;
use cel::objects::Key;
use cel::{Context, Env, Value as Cel};
use opcode_vm::error::ActionError;
use opcode_vm::host::{Host, Vars};

use self::budget::Budget;
use self::reads::Need;
use opcode_vm::instr::ExprId;
use opcode_vm::program::Program;
use serde_json::{Map, Number, Value};

/// CEL for one Program.
pub struct CelHost {
    env: Arc<Env>,
    programs: Vec<Result<Compiled, String>>,
    budget: Budget,
}

/// One compiled expression and what it reads.
struct Compiled {
    program: cel::Program,
    /// What it reads of each of [`NAMESPACES`]; only that is bound.
    needs: [Option<Need>; NAMESPACES.len()],
}

/// The variables a workflow expression can read, in binding order.
const NAMESPACES: [&str; 5] = ["inputs", "steps", "workflow", "context", "iter"];

impl std::fmt::Debug for CelHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CelHost")
            .field("expressions", &self.programs.len())
            .finish_non_exhaustive()
    }
}

/// The environment: CEL's standard library plus the string extensions
/// (`upperAscii`, `substring`, `split`…). Built once: building it declares
/// every overload, which cost more than most evaluations.
pub fn env() -> Arc<Env> {
    static ENV: std::sync::OnceLock<Arc<Env>> = std::sync::OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        // The extension's names are fixed and do not clash with the stdlib.
        let _ = env.add_extension(cel::extensions::strings);
        Arc::new(env)
    })
    .clone()
}

impl CelHost {
    /// Compiles every expression of `program`; each evaluation stays
    /// within the default [`Budget`].
    pub fn new(program: &Program) -> CelHost {
        CelHost::with_budget(program, Budget::default())
    }

    /// Compiles every expression of `program`; each evaluation stays within `budget`.
    pub fn with_budget(program: &Program, budget: Budget) -> CelHost {
        let env = env();
        let programs = program
            .exprs
            .iter()
            .map(|e| {
                if e.source.is_empty() {
                    Err("no expression".to_owned())
                } else {
                    // A stored program may predate the compiler's bounds.
                    opcode_vm::limits::check_cel(&e.source)
                        .map_err(|limit| format!("the expression {limit}"))?;
                    let program = guarded(|| env.compile(&e.source).map_err(|err| err.to_string()))
                        .and_then(|compiled| compiled)?;
                    let needs = reads::of(program.expression(), NAMESPACES);
                    Ok(Compiled { program, needs })
                }
            })
            .collect();
        CelHost {
            env,
            programs,
            budget,
        }
    }
}

impl Host for CelHost {
    fn eval(&self, expr: ExprId, vars: &Vars<'_>) -> Result<Value, ActionError> {
        let compiled = match self.programs.get(expr as usize) {
            Some(Ok(c)) => c,
            Some(Err(e)) => return Err(expression_error(e.clone())),
            None => return Err(expression_error(format!("no expression {expr}"))),
        };
        budget::check(
            compiled.program.expression(),
            &budget::roots(vars),
            self.budget,
        )
        .map_err(over_budget)?;
        let mut ctx = Context::with_env(self.env.clone());
        bind(&mut ctx, vars, &compiled.needs);
        guarded(|| {
            let value = compiled
                .program
                .execute(&ctx)
                .map_err(|e| words::plain(&e))?;
            to_json(&value)
        })
        .and_then(|result| result)
        .map_err(expression_error)
    }
}

/// R0103 for an evaluation that failed.
fn expression_error(message: String) -> ActionError {
    ActionError::new(opcode_vm::codes::R0103, "EXECUTION_ERROR", message, false)
}

/// R0130 for an evaluation past its budget.
pub fn over_budget(over: budget::OverBudget) -> ActionError {
    let limit = if over.limit == "memory" {
        "cel_memory"
    } else {
        "cel_cost"
    };
    opcode_vm::limits::exceeded(
        limit,
        over.value,
        over.max,
        format!("{over}; it was not evaluated (limits.{limit})"),
    )
}

/// Runs `work`; a panic in it is an error, not the process's end.
pub fn guarded<T>(work: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).map_err(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".to_owned());
        format!("the expression engine failed ({what})")
    })
}

/// Binds what the expression reads of the workflow variables.
fn bind<'v>(ctx: &mut Context<'_, 'v>, vars: &Vars<'v>, needs: &[Option<Need>; NAMESPACES.len()]) {
    for (name, need) in NAMESPACES.iter().zip(needs) {
        if let Some(need) = need {
            ctx.add_variable_as_val(*name, namespace(name, vars, need));
        }
    }
}

/// What `need` reads of one namespace of `vars`, as CEL.
fn namespace<'v>(name: &str, vars: &Vars<'v>, need: &Need) -> Box<dyn Val + 'v> {
    match name {
        "inputs" => val::of(vars.inputs, need),
        "steps" => {
            let steps = vars.steps.iter().filter_map(|(id, value)| match need {
                Need::Whole => Some((*id, val::whole(value))),
                Need::Fields(fields) => fields.get(*id).map(|need| (*id, val::of(value, need))),
            });
            Box::new(val::map_of(steps))
        }
        "workflow" => val::of(vars.workflow, need),
        "context" => val::of(vars.context, need),
        _ => {
            let Some((item, index)) = vars.iter else {
                return Box::new(val::map_of(std::iter::empty()));
            };
            let item_need = match need {
                Need::Whole => Some(&Need::Whole),
                Need::Fields(fields) => fields.get("item"),
            };
            let item = item_need.map(|need| ("item", val::of(item, need)));
            let index: Box<dyn Val + 'v> = Box::new(CelInt::from(i64::from(index)));
            Box::new(val::map_of(item.into_iter().chain([("index", index)])))
        }
    }
}

/// Does `source` parse as CEL? (How `expr.eval` without a `language`
/// tells CEL from Expr: with the parser the compiler uses, so both read
/// the text the same way. A text too large for CEL counts as CEL, to be
/// refused as such.)
pub fn parses(source: &str) -> bool {
    opcode_vm::limits::check_cel(source).is_err()
        || guarded(|| cel::parser::PrattParser::default().parse(source).is_ok()).unwrap_or(true)
}

/// Evaluates a CEL source once with JSON variables (for `expr.eval`),
/// within `budget`.
pub fn eval_source(
    source: &str,
    scope: &Value,
    data: &Value,
    budget: Budget,
) -> Result<Value, ActionError> {
    // A source kept was checked when it was compiled.
    let compiled = if let Some(compiled) = source::cached(source) {
        compiled
    } else {
        opcode_vm::limits::check_cel(source).map_err(|limit| {
            opcode_vm::limits::exceeded(
                "cel_nesting",
                source.len() as u64,
                opcode_vm::limits::CEL_NESTING as u64,
                format!("the expression {limit}"),
            )
        })?;
        source::compile(source).map_err(expression_error)?
    };
    let empty = Value::Object(Map::new());
    let value_of = |name: &str| match (name, scope.get(name)) {
        ("data", _) => data,
        ("iter", Some(Value::Null) | None) => &empty,
        (_, Some(value)) => value,
        (_, None) => &Value::Null,
    };
    // Each variable the expression reads, looked up once.
    let read: Vec<(&str, &Value, &Need)> = source::VARIABLES
        .iter()
        .zip(&compiled.needs)
        .filter_map(|(name, need)| need.as_ref().map(|need| (*name, value_of(name), need)))
        .collect();
    let roots: HashMap<&str, budget::Root<'_>> = read
        .iter()
        .map(|(name, value, _)| (*name, budget::Root::Json(value)))
        .collect();
    budget::check(compiled.program.expression(), &roots, budget).map_err(over_budget)?;
    let mut ctx = Context::with_env(env());
    for (name, value, need) in read {
        ctx.add_variable_as_val(name, val::of(value, need));
    }
    guarded(|| {
        let value = compiled
            .program
            .execute(&ctx)
            .map_err(|e| words::plain(&e))?;
        to_json(&value)
    })
    .and_then(|result| result)
    .map_err(expression_error)
}

/// CEL → JSON. Map keys become strings; object keys are sorted for a stable result.
pub fn to_json(value: &Cel) -> Result<Value, String> {
    Ok(match value {
        Cel::Null => Value::Null,
        Cel::Bool(b) => Value::Bool(*b),
        Cel::Int(i) => Value::from(*i),
        Cel::UInt(u) => Value::from(*u),
        Cel::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
        Cel::String(s) => Value::String(s.to_string()),
        Cel::Bytes(b) => Value::Array(b.iter().map(|x| Value::from(*x)).collect()),
        Cel::List(items) => Value::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        Cel::Map(m) => {
            let mut entries: Vec<(String, Value)> = m
                .map
                .iter()
                .map(|(k, v)| {
                    let key = match k {
                        Key::String(s) => s.to_string(),
                        Key::Int(i) => i.to_string(),
                        Key::Uint(u) => u.to_string(),
                        Key::Bool(b) => b.to_string(),
                    };
                    to_json(v).map(|v| (key, v))
                })
                .collect::<Result<_, _>>()?;
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().collect())
        }
        other => {
            return Err(format!(
                "the expression gave a value JSON cannot hold: {other:?}"
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_values() {
        let v = json!({"a": [1, 2.5, "x", true, null], "b": {"c": -3}, "u": u64::MAX});
        assert_eq!(
            eval_source("data", &json!({}), &v, Budget::default()),
            Ok(v)
        );
    }

    #[test]
    fn reading_part_of_a_value_gives_what_reading_all_of_it_gives() {
        let scope = json!({"steps": {
            "a": {"n": 1, "body": {"ok": true, "items": [1, 2, 3]}},
            "b": {"n": 2}
        }, "inputs": {"env": "prod", "big": "x"}, "iter": {"item": {"k": "v"}, "index": 4}});
        let eval = |source| eval_source(source, &scope, &Value::Null, Budget::default());
        for (source, expected) in [
            ("steps.a.n + steps['b'].n", json!(3)),
            (
                "has(steps.a.body.ok) && !has(steps.a.body.missing)",
                json!(true),
            ),
            (
                "steps.a.body == {'ok': true, 'items': [1, 2, 3]}",
                json!(true),
            ),
            ("size(steps.a.body.items) + size(steps)", json!(5)),
            ("steps['a'].body.items.exists(x, x == 3)", json!(true)),
            ("steps.a.body.items[2] * iter.index", json!(12)),
            ("iter.item.k + inputs.env", json!("vprod")),
            ("'b' in steps && !('c' in steps.a)", json!(true)),
        ] {
            assert_eq!(eval(source), Ok(expected), "{source}");
        }
        assert!(eval("steps.a.missing").is_err());
        assert!(eval("steps.c.n").is_err());
    }

    #[test]
    fn evaluates_with_scope() {
        let scope = json!({"inputs": {"n": 2}, "steps": {"a": {"result": 3}}, "iter": null});
        assert_eq!(
            eval_source(
                "inputs.n * steps['a'].result",
                &scope,
                &Value::Null,
                Budget::default()
            ),
            Ok(json!(6))
        );
        assert_eq!(
            eval_source(
                "data.filter(x, x > 1)",
                &scope,
                &json!([1, 2, 3]),
                Budget::default()
            ),
            Ok(json!([2, 3]))
        );
        assert_eq!(
            eval_source(
                "'abc'.upperAscii()",
                &scope,
                &Value::Null,
                Budget::default()
            ),
            Ok(json!("ABC"))
        );
        assert_eq!(
            eval_source(
                "2.0 == 2 && 1 == 1.0",
                &scope,
                &Value::Null,
                Budget::default()
            ),
            Ok(json!(true))
        );
        assert!(eval_source("inputs.missing.x", &scope, &Value::Null, Budget::default()).is_err());
        let big = json!((0..100_000).collect::<Vec<_>>());
        let over = eval_source(
            "data.map(a, data.map(b, a + b))",
            &scope,
            &big,
            Budget::default(),
        );
        assert_eq!(over.unwrap_err().code, "R0130");
        let deep = vec!["1"; 300].join("+");
        assert_eq!(
            eval_source(&deep, &scope, &Value::Null, Budget::default())
                .unwrap_err()
                .code,
            "R0130"
        );
    }
}
