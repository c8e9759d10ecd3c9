//! What a CEL expression reads of its variables (issue 24, item 3): found
//! once from the compiled expression, so that an evaluation converts only
//! those parts. A path of literal names (`steps.fetch.status`,
//! `steps['b-c'].body`) reads the value at its end whole; any other use of
//! a variable (`size(steps)`, `steps[inputs.key]`, a comprehension over
//! it) reads all of it. The result may keep more than is read, never less.

use std::collections::BTreeMap;

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr, LiteralValue, operators};

/// The part of a value an expression reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// All of it.
    Whole,
    /// Only these members of an object (what each of them needs).
    Fields(BTreeMap<String, Need>),
}

impl Need {
    /// The union of what `self` and a read of `path` need.
    fn add(&mut self, path: &[&str]) {
        let Some((first, rest)) = path.split_first() else {
            *self = Need::Whole;
            return;
        };
        if let Need::Fields(fields) = self {
            fields
                .entry((*first).to_owned())
                .or_insert_with(|| Need::Fields(BTreeMap::new()))
                .add(rest);
        }
    }
}

/// What `expr` reads of each of `variables` (`None`: nothing).
pub fn of<const N: usize>(expr: &IdedExpr, variables: [&str; N]) -> [Option<Need>; N] {
    let mut found = Found {
        variables: &variables,
        needs: std::array::from_fn(|_| None),
    };
    found.walk(expr);
    found.needs
}

struct Found<'a, const N: usize> {
    variables: &'a [&'a str; N],
    needs: [Option<Need>; N],
}

impl<const N: usize> Found<'_, N> {
    /// Notes a read of `path` in variable `name`, if it is one of ours.
    fn read(&mut self, name: &str, path: &[&str]) {
        let Some(at) = self.variables.iter().position(|v| *v == name) else {
            return;
        };
        self.needs[at]
            .get_or_insert_with(|| Need::Fields(BTreeMap::new()))
            .add(path);
    }

    fn walk(&mut self, e: &IdedExpr) {
        if let Some((root, mut path)) = literal_path(e) {
            path.reverse();
            return self.read(root, &path);
        }
        match &e.expr {
            Expr::Ident(name) => self.read(name, &[]),
            Expr::Select(select) => self.walk(&select.operand),
            Expr::Call(call) => {
                if let Some(target) = &call.target {
                    self.walk(target);
                }
                for arg in &call.args {
                    self.walk(arg);
                }
            }
            Expr::List(list) => list.elements.iter().for_each(|x| self.walk(x)),
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(m) = &entry.expr {
                        self.walk(&m.key);
                        self.walk(&m.value);
                    }
                }
            }
            Expr::Struct(strct) => {
                for entry in &strct.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        self.walk(&f.value);
                    }
                }
            }
            // A comprehension's own variables may shadow ours: a use of
            // such a name counts as a read of ours, which keeps more than
            // needed, never less.
            Expr::Comprehension(c) => {
                for part in [
                    &c.iter_range,
                    &c.accu_init,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ] {
                    self.walk(part);
                }
            }
            Expr::Literal(_) | Expr::Unspecified => {}
        }
    }
}

/// `e` as a variable and a path of literal member names into it (innermost
/// name last), when it is one: `a.b`, `a['b']`, `has(a.b)`.
fn literal_path(e: &IdedExpr) -> Option<(&str, Vec<&str>)> {
    let (operand, name) = match &e.expr {
        Expr::Ident(name) => return Some((name, Vec::new())),
        Expr::Select(select) => (&*select.operand, select.field.as_str()),
        Expr::Call(call) if call.func_name == operators::INDEX && call.target.is_none() => {
            match call.args.as_slice() {
                [operand, key] => match &key.expr {
                    Expr::Literal(LiteralValue::String(s)) => (operand, s.inner()),
                    _ => return None,
                },
                _ => return None,
            }
        }
        _ => return None,
    };
    let (root, mut path) = literal_path(operand)?;
    path.insert(0, name);
    Some((root, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needs(source: &str) -> [Option<Need>; 2] {
        let program = crate::cel::env().compile(source).expect("compiles");
        of(program.expression(), ["steps", "inputs"])
    }

    fn fields<const K: usize>(entries: [(&str, Need); K]) -> Need {
        Need::Fields(
            entries
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
        )
    }

    #[test]
    fn a_literal_path_reads_only_the_value_at_its_end() {
        let [steps, inputs] = needs("steps.fetch.status == 200 && steps['b-c'].body.ok");
        assert_eq!(
            steps,
            Some(fields([
                ("b-c", fields([("body", fields([("ok", Need::Whole)]))])),
                ("fetch", fields([("status", Need::Whole)])),
            ]))
        );
        assert_eq!(inputs, None);
        let [steps, _] = needs("has(steps.a.b) && steps.a.b.c > 1");
        assert_eq!(steps, Some(fields([("a", fields([("b", Need::Whole)]))])));
    }

    #[test]
    fn any_other_use_reads_everything_under_it() {
        assert_eq!(needs("size(steps) > 0")[0], Some(Need::Whole));
        assert_eq!(needs("steps[inputs.key].x")[0], Some(Need::Whole));
        assert_eq!(
            needs("steps[inputs.key].x")[1],
            Some(fields([("key", Need::Whole)]))
        );
        assert_eq!(
            needs("steps.a[0] == 1")[0],
            Some(fields([("a", Need::Whole)]))
        );
        assert_eq!(
            needs("steps.a.size() + steps.a.n")[0],
            Some(fields([("a", Need::Whole)]))
        );
        assert_eq!(
            needs("steps.all(k, k != '')")[0],
            Some(Need::Whole),
            "a comprehension over it"
        );
        assert_eq!(
            needs("[1].map(steps, steps + 1)")[0],
            Some(Need::Whole),
            "a shadowing name keeps everything"
        );
        assert_eq!(needs("3"), [None, None]);
    }
}
