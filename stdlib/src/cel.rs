//! The CEL engine: implements the VM's [`Host`] with the `cel` crate.
//!
//! Every expression of a Program is compiled once, when the host is built;
//! evaluation converts the variables the expression reads from JSON to CEL
//! values directly (no serializer in between) and the result back. Before
//! each evaluation its cost is bounded ([`budget`]), and a panic in the
//! engine is the step's failure, never the process's.

pub mod budget;
mod source;

use std::collections::HashMap;
use std::sync::Arc;

use cel::objects::{Key, Map as CelMap};
use cel::{Context, Env, Value as Cel};
use opcode_vm::error::ActionError;
use opcode_vm::host::{Host, Vars};

use self::budget::Budget;
use opcode_vm::instr::ExprId;
use opcode_vm::program::Program;
use serde_json::{Map, Number, Value};

/// CEL for one Program.
pub struct CelHost {
    root: Context<'static, 'static>,
    programs: Vec<Result<Compiled, String>>,
    budget: Budget,
}

/// One compiled expression and the namespaces it reads.
struct Compiled {
    program: cel::Program,
    /// Which of [`NAMESPACES`] the expression references; only those are bound.
    reads: [bool; NAMESPACES.len()],
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
                    let refs = program.references();
                    let reads = NAMESPACES.map(|name| refs.has_variable(name));
                    Ok(Compiled { program, reads })
                }
            })
            .collect();
        CelHost {
            root: Context::with_env(env),
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
        let mut ctx = self.root.new_inner_scope();
        bind(&mut ctx, vars, compiled.reads);
        guarded(|| {
            let value = compiled.program.execute(&ctx).map_err(|e| e.to_string())?;
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

/// Binds the workflow variables the expression reads into a CEL context.
fn bind(ctx: &mut Context<'_, '_>, vars: &Vars<'_>, reads: [bool; NAMESPACES.len()]) {
    for (name, _) in NAMESPACES.iter().zip(reads).filter(|(_, read)| *read) {
        ctx.add_variable_from_value(*name, namespace(name, vars));
    }
}

/// One namespace of `vars` as a CEL value.
fn namespace(name: &str, vars: &Vars<'_>) -> Cel {
    match name {
        "inputs" => to_cel(vars.inputs),
        "steps" => {
            let steps = vars
                .steps
                .iter()
                .map(|(id, value)| (Key::String(Arc::new((*id).to_owned())), to_cel(value)))
                .collect::<HashMap<Key, Cel>>();
            Cel::Map(CelMap {
                map: Arc::new(steps),
            })
        }
        "workflow" => to_cel(vars.workflow),
        "context" => to_cel(vars.context),
        _ => {
            let mut m: HashMap<Key, Cel> = HashMap::with_capacity(2);
            if let Some((item, index)) = vars.iter {
                m.insert(Key::String(Arc::new("item".into())), to_cel(item));
                m.insert(
                    Key::String(Arc::new("index".into())),
                    Cel::Int(i64::from(index)),
                );
            }
            Cel::Map(CelMap { map: Arc::new(m) })
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
    opcode_vm::limits::check_cel(source).map_err(|limit| {
        opcode_vm::limits::exceeded(
            "cel_nesting",
            source.len() as u64,
            opcode_vm::limits::CEL_NESTING as u64,
            format!("the expression {limit}"),
        )
    })?;
    let compiled = source::compiled(source).map_err(expression_error)?;
    let empty = Value::Object(Map::new());
    let mut narrowed = Value::Null;
    let value_of = |name: &str| match scope.get(name) {
        Some(Value::Null) | None if name == "iter" => &empty,
        Some(value) => value,
        None => &Value::Null,
    };
    let steps = source::narrowed(value_of("steps"), compiled.steps.as_deref(), &mut narrowed);
    let read = |name: &str| -> &Value {
        match name {
            "steps" => steps,
            "data" => data,
            other => value_of(other),
        }
    };
    let roots: HashMap<&str, budget::Root<'_>> = source::VARIABLES
        .iter()
        .zip(&compiled.reads)
        .filter(|(_, reads)| **reads)
        .map(|(name, _)| (*name, budget::Root::Json(read(name))))
        .collect();
    budget::check(compiled.program.expression(), &roots, budget).map_err(over_budget)?;
    let root = Context::with_env(env());
    let mut ctx = root.new_inner_scope();
    for (name, _) in source::VARIABLES
        .iter()
        .zip(&compiled.reads)
        .filter(|(_, reads)| **reads)
    {
        ctx.add_variable_from_value(*name, to_cel(read(name)));
    }
    guarded(|| {
        let value = compiled.program.execute(&ctx).map_err(|e| e.to_string())?;
        to_json(&value)
    })
    .and_then(|result| result)
    .map_err(expression_error)
}

/// JSON → CEL. Integers stay integers; other numbers become doubles.
pub fn to_cel(value: &Value) -> Cel {
    match value {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Cel::Int(i),
            (None, Some(u)) => Cel::UInt(u),
            _ => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(items) => Cel::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(map) => {
            let mut m: HashMap<Key, Cel> = HashMap::with_capacity(map.len());
            for (k, v) in map {
                m.insert(Key::String(Arc::new(k.clone())), to_cel(v));
            }
            Cel::Map(CelMap { map: Arc::new(m) })
        }
    }
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
        let v = json!({"a": [1, 2.5, "x", true, null], "b": {"c": -3}});
        assert_eq!(to_json(&to_cel(&v)).unwrap(), v);
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
