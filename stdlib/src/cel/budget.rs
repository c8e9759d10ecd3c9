//! What one CEL evaluation may cost, worked out before it runs
//! (spec/limits.md). CEL has no loops but comprehensions over finite lists
//! and no recursion, so every evaluation ends; but a comprehension inside
//! another over the same data, or a `replace` inside a `replace`, can take
//! hours and gigabytes. The estimate walks the expression once with the
//! sizes of the values it reads (exact where it reads a path into them,
//! an upper bound elsewhere) and bounds the work and the largest value it
//! may build; an expression past either bound is not evaluated.

use std::collections::HashMap;
use std::hash::BuildHasher;

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr, LiteralValue, operators};
use opcode_vm::host::Vars;
use serde_json::Value;

/// The bounds of one evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Most units of work (about a nanosecond to ten each).
    pub cost: u64,
    /// Most bytes of any value built.
    pub memory: u64,
}

impl Default for Budget {
    fn default() -> Budget {
        Budget {
            cost: 10_000_000,
            memory: 64 << 20,
        }
    }
}

/// Why an evaluation would go past its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverBudget {
    /// `cost` or `memory`.
    pub limit: &'static str,
    /// The estimate.
    pub value: u64,
    /// The bound.
    pub max: u64,
}

impl std::fmt::Display for OverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.limit {
            "memory" => write!(
                f,
                "the expression could build a value of {} bytes, over the {}-byte limit",
                self.value, self.max
            ),
            _ => write!(
                f,
                "the expression could take {} units of work, over the limit of {}",
                self.value, self.max
            ),
        }
    }
}

/// The variables of an evaluation, as the estimate reads them.
#[derive(Clone, Copy)]
pub enum Root<'v> {
    /// A JSON value.
    Json(&'v Value),
    /// The `steps` map.
    Steps(&'v [(&'v str, &'v Value)]),
    /// `iter`: the item and index.
    Iter(Option<(&'v Value, u32)>),
}

/// The roots of [`Vars`].
pub fn roots<'v>(vars: &'v Vars<'v>) -> HashMap<&'static str, Root<'v>> {
    HashMap::from([
        ("inputs", Root::Json(vars.inputs)),
        ("steps", Root::Steps(vars.steps)),
        ("workflow", Root::Json(vars.workflow)),
        ("context", Root::Json(vars.context)),
        ("iter", Root::Iter(vars.iter)),
    ])
}

/// Checks that evaluating `expr` with `roots` stays within `budget`.
pub fn check<S: BuildHasher>(
    expr: &IdedExpr,
    roots: &HashMap<&str, Root<'_>, S>,
    budget: Budget,
) -> Result<(), OverBudget> {
    let mut estimate = Estimate {
        roots,
        bound: Vec::new(),
        largest: 0,
    };
    let found = estimate.of(expr);
    let largest = estimate.largest.max(found.size);
    if found.cost > budget.cost {
        return Err(OverBudget {
            limit: "cost",
            value: found.cost,
            max: budget.cost,
        });
    }
    if largest > budget.memory {
        return Err(OverBudget {
            limit: "memory",
            value: largest,
            max: budget.memory,
        });
    }
    Ok(())
}

/// Bytes one element of a list or map costs besides its contents.
const SLOT: u64 = 16;

/// An upper bound of a sub-expression's value and work.
#[derive(Debug, Clone, Copy, Default)]
struct Est {
    /// Bytes of the value.
    size: u64,
    /// Elements (of a list, map or string).
    len: u64,
    /// Bytes of its largest element.
    elem: u64,
    /// Work to compute it.
    cost: u64,
}

impl Est {
    fn scalar(cost: u64) -> Est {
        Est {
            size: 8,
            len: 0,
            elem: 0,
            cost,
        }
    }
}

/// A sub-expression's estimate, and the value it names when it is a path
/// into the variables. A path's value is weighed only when it is used (a
/// path through a large value to a small part of it costs the part).
#[derive(Clone, Copy)]
struct Found<'v> {
    /// The estimate; of a path, only its cost until [`Found::settled`].
    est: Est,
    value: Option<Concrete<'v>>,
}

impl Found<'_> {
    /// A path to `value` reached at `cost`.
    fn path(value: Concrete<'_>, cost: u64) -> Found<'_> {
        Found {
            est: Est {
                cost,
                ..Est::default()
            },
            value: Some(value),
        }
    }

    /// The whole estimate, the value weighed if it is a path's.
    fn settled(&self) -> Est {
        let weighed = match self.value {
            None => return self.est,
            Some(Concrete::Json(value)) => weigh(value),
            Some(Concrete::Steps(steps)) => {
                gather(&steps.iter().map(|(_, v)| weigh(v)).collect::<Vec<_>>())
            }
        };
        Est {
            cost: self.est.cost,
            ..weighed
        }
    }
}

#[derive(Clone, Copy)]
enum Concrete<'v> {
    Json(&'v Value),
    Steps(&'v [(&'v str, &'v Value)]),
}

struct Estimate<'r, 'v, S> {
    roots: &'r HashMap<&'r str, Root<'v>, S>,
    /// Comprehension variables in scope, innermost last.
    bound: Vec<(String, Est)>,
    largest: u64,
}

/// The size of a JSON value, and of its largest element.
fn weigh(value: &Value) -> Est {
    fn size(value: &Value) -> u64 {
        match value {
            Value::String(s) => s.len() as u64,
            Value::Array(items) => items.iter().map(|v| SLOT + size(v)).sum(),
            Value::Object(map) => map
                .iter()
                .map(|(k, v)| SLOT + k.len() as u64 + size(v))
                .sum(),
            _ => 8,
        }
    }
    let (len, elem) = match value {
        Value::String(s) => (s.len() as u64, 1),
        Value::Array(items) => (
            items.len() as u64,
            items.iter().map(size).max().unwrap_or(0),
        ),
        Value::Object(map) => (map.len() as u64, map.values().map(size).max().unwrap_or(0)),
        _ => (0, 0),
    };
    let size = size(value);
    Est {
        size,
        len,
        elem,
        cost: 1,
    }
}

impl<'v, S: BuildHasher> Estimate<'_, 'v, S> {
    fn of(&mut self, e: &IdedExpr) -> Est {
        let est = self.found(e).settled();
        self.largest = self.largest.max(est.size);
        est
    }

    fn found(&mut self, e: &IdedExpr) -> Found<'v> {
        let plain = |est| Found { est, value: None };
        match &e.expr {
            Expr::Literal(literal) => plain(match literal {
                LiteralValue::String(s) => Est {
                    size: s.inner().len() as u64,
                    len: s.inner().len() as u64,
                    elem: 1,
                    cost: 1,
                },
                LiteralValue::Bytes(b) => Est {
                    size: b.inner().len() as u64,
                    len: b.inner().len() as u64,
                    elem: 1,
                    cost: 1,
                },
                _ => Est::scalar(1),
            }),
            Expr::Ident(name) => self.ident(name),
            Expr::Select(select) => {
                let operand = self.found(&select.operand);
                Self::member(operand, Some(&select.field), select.test)
            }
            Expr::Call(call) => self.call(&call.func_name, call.target.as_deref(), &call.args),
            Expr::List(list) => {
                let items: Vec<Est> = list.elements.iter().map(|x| self.of(x)).collect();
                plain(gather(&items))
            }
            Expr::Map(map) => {
                let mut items = Vec::new();
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(m) = &entry.expr {
                        items.push(self.of(&m.key));
                        items.push(self.of(&m.value));
                    }
                }
                plain(gather(&items))
            }
            Expr::Struct(strct) => {
                let mut items = Vec::new();
                for entry in &strct.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        items.push(self.of(&f.value));
                    }
                }
                plain(gather(&items))
            }
            Expr::Comprehension(c) => {
                let range = self.of(&c.iter_range);
                let init = self.of(&c.accu_init);
                let element = Est {
                    size: range.elem,
                    len: range.elem,
                    elem: range.elem,
                    cost: 1,
                };
                let mut vars = vec![(c.iter_var.clone(), element)];
                if let Some(second) = &c.iter_var2 {
                    vars.push((second.clone(), element));
                }
                vars.push((c.accu_var.clone(), Est::default()));
                let depth = self.bound.len();
                self.bound.extend(vars);
                let cond = self.of(&c.loop_cond);
                let step = self.of(&c.loop_step);
                self.bound.truncate(depth);
                let n = range.len;
                let grown = Est {
                    size: init.size.saturating_add(n.saturating_mul(step.size)),
                    len: init.len.saturating_add(n),
                    elem: step.size.max(init.elem),
                    cost: 1,
                };
                self.largest = self.largest.max(grown.size);
                self.bound.push((c.accu_var.clone(), grown));
                let result = self.of(&c.result);
                self.bound.truncate(depth);
                let per_item = cond.cost.saturating_add(step.cost).saturating_add(1);
                plain(Est {
                    cost: range
                        .cost
                        .saturating_add(init.cost)
                        .saturating_add(n.saturating_mul(per_item))
                        .saturating_add(result.cost),
                    ..result
                })
            }
            Expr::Unspecified => plain(Est::scalar(1)),
        }
    }

    fn ident(&self, name: &str) -> Found<'v> {
        if let Some((_, est)) = self.bound.iter().rev().find(|(n, _)| n == name) {
            return Found {
                est: *est,
                value: None,
            };
        }
        match self.roots.get(name) {
            Some(Root::Json(value)) => Found::path(Concrete::Json(value), 1),
            Some(Root::Steps(steps)) => Found::path(Concrete::Steps(steps), 1 + steps.len() as u64),
            Some(Root::Iter(iter)) => {
                let item = iter.map_or_else(Est::default, |(item, _)| weigh(item));
                Found {
                    est: Est {
                        size: item.size + 2 * SLOT + 8,
                        len: 2,
                        elem: item.size.max(8),
                        cost: 1,
                    },
                    value: None,
                }
            }
            None => Found {
                est: Est::scalar(1),
                value: None,
            },
        }
    }

    /// `operand.field` (or `operand[key]` with a literal key): the value
    /// itself where the operand is a path into the variables.
    fn member(operand: Found<'v>, field: Option<&str>, test: bool) -> Found<'v> {
        if test {
            return Found {
                est: Est::scalar(operand.est.cost + 1),
                value: None,
            };
        }
        let child = match (operand.value, field) {
            (Some(Concrete::Json(Value::Object(map))), Some(key)) => {
                map.get(key).map(Concrete::Json)
            }
            (Some(Concrete::Json(Value::Array(items))), Some(key)) => key
                .parse::<usize>()
                .ok()
                .and_then(|i| items.get(i))
                .map(Concrete::Json),
            (Some(Concrete::Steps(steps)), Some(key)) => steps
                .iter()
                .find(|(id, _)| *id == key)
                .map(|(_, v)| Concrete::Json(v)),
            _ => None,
        };
        if let Some(child) = child {
            return Found::path(child, operand.est.cost + 1);
        }
        let elem = operand.settled().elem;
        Found {
            est: Est {
                size: elem,
                len: elem,
                elem,
                cost: operand.est.cost + 1,
            },
            value: None,
        }
    }

    fn call(&mut self, name: &str, target: Option<&IdedExpr>, args: &[IdedExpr]) -> Found<'v> {
        if name == operators::INDEX
            && let [operand, key] = args
        {
            let operand = self.found(operand);
            let key_text = match &key.expr {
                Expr::Literal(LiteralValue::String(s)) => Some(s.inner().to_owned()),
                Expr::Literal(LiteralValue::Int(i)) => Some(i.inner().to_string()),
                _ => None,
            };
            let key_cost = self.of(key).cost;
            let mut found = Self::member(operand, key_text.as_deref(), false);
            found.est.cost = found.est.cost.saturating_add(key_cost);
            return found;
        }
        let this = target.map(|t| self.of(t));
        let given: Vec<Est> = args.iter().map(|a| self.of(a)).collect();
        let all: Vec<Est> = this.iter().copied().chain(given.iter().copied()).collect();
        let cost: u64 = all.iter().fold(1u64, |c, e| c.saturating_add(e.cost));
        let sizes: u64 = all.iter().fold(0u64, |s, e| s.saturating_add(e.size));
        let arg = |i: usize| all.get(i).copied().unwrap_or_default();
        let est = match name {
            operators::ADD => Est {
                size: sizes,
                len: all.iter().fold(0, |l, e| l.saturating_add(e.len)),
                elem: all.iter().map(|e| e.elem).max().unwrap_or(0),
                cost: cost.saturating_add(sizes),
            },
            operators::CONDITIONAL => {
                let (a, b) = (arg(1), arg(2));
                Est {
                    cost: arg(0).cost.saturating_add(a.cost.max(b.cost)) + 1,
                    ..if a.size >= b.size { a } else { b }
                }
            }
            operators::IN => Est::scalar(cost.saturating_add(arg(1).size)),
            // `s.replace(old, new)` may put `new` at every character of `s`.
            "replace" => {
                let (s, new) = (arg(0), arg(2));
                let size = s
                    .size
                    .saturating_add(s.len.saturating_add(1).saturating_mul(new.size));
                Est {
                    size,
                    len: size,
                    elem: 1,
                    cost: cost.saturating_add(size),
                }
            }
            "split" => {
                let s = arg(0);
                Est {
                    size: s
                        .size
                        .saturating_mul(2)
                        .saturating_add(SLOT.saturating_mul(s.len + 1)),
                    len: s.len + 1,
                    elem: s.size,
                    cost: cost.saturating_add(s.size),
                }
            }
            "join" => {
                let (list, separator) = (arg(0), arg(1));
                let size = list
                    .size
                    .saturating_add(list.len.saturating_mul(separator.size));
                Est {
                    size,
                    len: size,
                    elem: 1,
                    cost: cost.saturating_add(size),
                }
            }
            "format" => {
                let size = sizes.saturating_mul(2);
                Est {
                    size,
                    len: size,
                    elem: 1,
                    cost: cost.saturating_add(size),
                }
            }
            // Comparisons, logic, arithmetic, tests and conversions: a value
            // no larger than their operands, work linear in them.
            _ => {
                let size = sizes.saturating_mul(2).max(8);
                Est {
                    size,
                    len: size,
                    elem: size,
                    cost: cost.saturating_add(sizes),
                }
            }
        };
        Found { est, value: None }
    }
}

/// A list or map of `items`.
fn gather(items: &[Est]) -> Est {
    Est {
        size: items
            .iter()
            .fold(0u64, |s, e| s.saturating_add(e.size).saturating_add(SLOT)),
        len: items.len() as u64,
        elem: items.iter().map(|e| e.size).max().unwrap_or(0),
        cost: items.iter().fold(1u64, |c, e| c.saturating_add(e.cost)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check_with(source: &str, data: &Value) -> Result<(), OverBudget> {
        let program = cel::Program::compile(source).unwrap();
        let roots = HashMap::from([("data", Root::Json(data)), ("inputs", Root::Json(data))]);
        check(program.expression(), &roots, Budget::default())
    }

    #[test]
    fn ordinary_expressions_fit() {
        let data = json!((0..10_000).collect::<Vec<_>>());
        for source in [
            "data.filter(x, x % 2 == 0).size() > 10",
            "data.map(x, x * 2)",
            "data.exists(x, x == 42) && inputs.size() > 0",
            "'a'.replace('a', 'b') + string(size(data))",
        ] {
            assert_eq!(check_with(source, &data), Ok(()), "{source}");
        }
    }

    #[test]
    fn nested_comprehensions_and_growing_replaces_do_not() {
        let data = json!((0..100_000).collect::<Vec<_>>());
        let pairs = check_with("data.map(a, data.map(b, [a, b]))", &data).unwrap_err();
        assert!(pairs.value > Budget::default().cost, "{pairs}");
        let ten = json!((0..10).collect::<Vec<_>>());
        let nested = "ten.map(a, ten.map(b, ten.map(c, ten.map(d, ten.map(e, ten.map(f, ten.map(g, ten.map(h, 1))))))))";
        let program = cel::Program::compile(nested).unwrap();
        let roots = HashMap::from([("ten", Root::Json(&ten))]);
        assert!(check(program.expression(), &roots, Budget::default()).is_err());
        let doubling = "'ab'.replace('', 'ab'.replace('', 'ab'.replace('', 'ab'.replace('', 'ab'.replace('', 'abababababababab')))))";
        assert!(check_with(doubling, &Value::Null).is_ok(), "small enough");
        let growing = (0..12).fold("'abcdefgh'".to_owned(), |s, _| {
            format!("{s}.replace('', {s})")
        });
        let over = check_with(&growing, &Value::Null).unwrap_err();
        assert!(over.value > over.max, "{over}");
    }
}
