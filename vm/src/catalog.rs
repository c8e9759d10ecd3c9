//! Action signatures as data.
//!
//! The stdlib describes every action it implements with an [`ActionSpec`];
//! the compiler checks workflows against a [`Catalog`] of them without
//! depending on the stdlib crate (plugins add specs at run time the same way).
//! Types are deliberately shallow: enough to catch a string where an object
//! is expected, or a number compared with a string, without a type system.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The JSON shape of a parameter or an output field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum Ty {
    /// Anything, including null.
    Any,
    /// JSON `null`.
    Null,
    /// `true` or `false`.
    Bool,
    /// A number without a fractional part.
    Int,
    /// Any JSON number.
    Number,
    /// Any string.
    String,
    /// A string holding a duration such as `30s` or `1h30m`.
    Duration,
    /// One of a fixed set of strings.
    Enum {
        /// The accepted values.
        values: Vec<String>,
    },
    /// An array whose items have the given type.
    Array {
        /// The type of every item.
        items: Box<Ty>,
    },
    /// An object with arbitrary keys whose values have the given type.
    Map {
        /// The type of every value.
        values: Box<Ty>,
    },
    /// An object with known fields.
    Object {
        /// The fields, in a stable order.
        fields: BTreeMap<String, Ty>,
    },
    /// Any of the listed types.
    OneOf {
        /// The alternatives.
        types: Vec<Ty>,
    },
}

impl Ty {
    /// An array of `items`.
    pub fn array(items: Ty) -> Ty {
        Ty::Array {
            items: Box::new(items),
        }
    }

    /// An object mapping any key to `values`.
    pub fn map(values: Ty) -> Ty {
        Ty::Map {
            values: Box::new(values),
        }
    }

    /// An object with the given fields.
    pub fn object<'a>(fields: impl IntoIterator<Item = (&'a str, Ty)>) -> Ty {
        Ty::Object {
            fields: fields
                .into_iter()
                .map(|(name, ty)| (name.to_owned(), ty))
                .collect(),
        }
    }

    /// One of the listed strings.
    pub fn one_of_strings(values: &[&str]) -> Ty {
        Ty::Enum {
            values: values.iter().map(|v| (*v).to_owned()).collect(),
        }
    }

    /// Does a JSON value have this type?
    pub fn accepts(&self, value: &serde_json::Value) -> bool {
        use serde_json::Value as V;
        match (self, value) {
            (Ty::Any, _)
            | (Ty::Null, V::Null)
            | (Ty::Bool, V::Bool(_))
            | (Ty::Number, V::Number(_))
            | (Ty::String | Ty::Duration, V::String(_))
            | (Ty::Object { .. }, V::Object(_)) => true,
            (Ty::Int, V::Number(n)) => n.is_i64() || n.is_u64(),
            (Ty::Enum { values }, V::String(s)) => values.iter().any(|v| v == s),
            (Ty::Array { items }, V::Array(list)) => list.iter().all(|v| items.accepts(v)),
            (Ty::Map { values }, V::Object(map)) => map.values().all(|v| values.accepts(v)),
            (Ty::OneOf { types }, v) => types.iter().any(|t| t.accepts(v)),
            _ => false,
        }
    }

    /// The JSON kind names this type accepts, for messages (`string`, `object`…).
    pub fn describe(&self) -> String {
        match self {
            Ty::Any => "any value".into(),
            Ty::Null => "null".into(),
            Ty::Bool => "boolean".into(),
            Ty::Int => "integer".into(),
            Ty::Number => "number".into(),
            Ty::String => "string".into(),
            Ty::Duration => "duration string".into(),
            Ty::Enum { values } => {
                let quoted: Vec<String> = values.iter().map(|v| format!("\"{v}\"")).collect();
                format!("one of {}", quoted.join(", "))
            }
            Ty::Array { .. } => "array".into(),
            Ty::Map { .. } | Ty::Object { .. } => "object".into(),
            Ty::OneOf { types } => {
                let names: Vec<String> = types.iter().map(Ty::describe).collect();
                names.join(" or ")
            }
        }
    }

    /// The type written out with its structure, for documentation:
    /// `{hash: string, algorithm: string}`, `[string]`, `{string: integer}`.
    pub fn shape(&self) -> String {
        match self {
            Ty::Object { fields } if !fields.is_empty() => {
                let fields: Vec<String> = fields
                    .iter()
                    .map(|(name, ty)| format!("{name}: {}", ty.shape()))
                    .collect();
                format!("{{{}}}", fields.join(", "))
            }
            Ty::Array { items } if **items != Ty::Any => format!("[{}]", items.shape()),
            Ty::Map { values } if **values != Ty::Any => format!("{{string: {}}}", values.shape()),
            Ty::OneOf { types } => {
                let shapes: Vec<String> = types.iter().map(Ty::shape).collect();
                shapes.join(" or ")
            }
            _ => self.describe(),
        }
    }

    /// The type of `.field` on a value of this type, when it is known.
    pub fn field(&self, name: &str) -> Option<&Ty> {
        match self {
            Ty::Object { fields } => fields.get(name),
            Ty::Map { values } => Some(values),
            _ => None,
        }
    }

    /// Is this a scalar type whose values can never equal a value of `other`?
    pub fn disjoint_scalar(&self, other: &Ty) -> bool {
        fn class(ty: &Ty) -> Option<u8> {
            match ty {
                Ty::Bool => Some(0),
                Ty::Int | Ty::Number => Some(1),
                Ty::String | Ty::Duration | Ty::Enum { .. } => Some(2),
                Ty::Null => Some(3),
                _ => None,
            }
        }
        matches!((class(self), class(other)), (Some(a), Some(b)) if a != b)
    }
}

/// One parameter of an action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamSpec {
    /// The key in `params`.
    pub name: String,
    /// The accepted JSON shape.
    pub ty: Ty,
    /// Must the workflow give it?
    pub required: bool,
    /// One line of documentation.
    pub doc: String,
}

/// Where a call of an action may run (spec/events.md, "Immediate actions").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// Outside the round that asked for it, on a worker slot: it may wait
    /// on the world.
    #[default]
    Dispatched,
    /// Inside the round: a computation in this process, bounded by its
    /// input, touching nothing outside but best-effort live output (a log
    /// line, an emitted event, a session notification).
    InRound,
    /// Inside the round when it reads the calling run itself (its
    /// `workflow_id` parameter absent, empty or the run's own id); another
    /// run's is read from the store, so that call is dispatched.
    InRoundForOwnRun,
    /// Inside the round when its `language` parameter is `cel` (CEL is
    /// bounded by a budget); an Expr evaluation, or one whose language is
    /// only known from its text at run time, runs in a process of its own,
    /// so that call is dispatched.
    InRoundForCel,
}

/// A JSON value's kind with its article, for messages (`a string`).
pub fn describe_value(value: &serde_json::Value) -> &'static str {
    use serde_json::Value as V;
    match value {
        V::Null => "null",
        V::Bool(_) => "a boolean",
        V::Number(_) => "a number",
        V::String(_) => "a string",
        V::Array(_) => "an array",
        V::Object(_) => "an object",
    }
}

/// The signature and documentation of one action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionSpec {
    /// The full name, such as `http.get`.
    pub name: String,
    /// One paragraph of documentation.
    pub doc: String,
    /// The parameters, in documentation order.
    pub params: Vec<ParamSpec>,
    /// Are parameters other than `params` accepted silently (`workflow.log`)?
    pub open_params: bool,
    /// The shape of the step output.
    pub output: Ty,
    /// Where its calls may run.
    #[serde(default)]
    pub placement: Placement,
    /// Do its calls only read, changing nothing outside the process? Such a
    /// call starts while the commit of its start is written (spec/events.md,
    /// "Durability").
    #[serde(default)]
    pub reads_only: bool,
}

impl ActionSpec {
    /// Finds a parameter by name.
    pub fn param(&self, name: &str) -> Option<&ParamSpec> {
        self.params.iter().find(|p| p.name == name)
    }

    /// `name(a, b?, …)`: a one-line signature for hovers and messages.
    pub fn signature(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|p| {
                let optional = if p.required { "" } else { "?" };
                format!("{}{optional}: {}", p.name, p.ty.describe())
            })
            .collect();
        format!("{}({})", self.name, params.join(", "))
    }
}

/// A set of actions the compiler checks against.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Catalog {
    actions: BTreeMap<String, ActionSpec>,
}

impl Catalog {
    /// A catalog of the given actions (a later spec with the same name wins).
    pub fn new(actions: impl IntoIterator<Item = ActionSpec>) -> Catalog {
        Catalog {
            actions: actions.into_iter().map(|a| (a.name.clone(), a)).collect(),
        }
    }

    /// Adds or replaces an action.
    pub fn insert(&mut self, spec: ActionSpec) {
        self.actions.insert(spec.name.clone(), spec);
    }

    /// Looks an action up by its full name.
    pub fn get(&self, name: &str) -> Option<&ActionSpec> {
        self.actions.get(name)
    }

    /// Every action, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = &ActionSpec> {
        self.actions.values()
    }

    /// The known action closest to `name` (for "did you mean" help).
    pub fn closest(&self, name: &str) -> Option<&str> {
        self.actions
            .keys()
            .map(|k| (edit_distance(k, name), k))
            .filter(|(d, k)| *d <= 2.max(k.len() / 4))
            .min()
            .map(|(_, k)| k.as_str())
    }
}

/// Levenshtein distance, for suggestions.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(previous + 1).min(row[j] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn types_accept_matching_values() {
        assert!(Ty::Int.accepts(&json!(3)));
        assert!(!Ty::Int.accepts(&json!(3.5)));
        assert!(Ty::array(Ty::String).accepts(&json!(["a", "b"])));
        assert!(!Ty::array(Ty::String).accepts(&json!(["a", 1])));
        assert!(Ty::one_of_strings(&["a"]).accepts(&json!("a")));
        assert!(!Ty::one_of_strings(&["a"]).accepts(&json!("b")));
    }

    #[test]
    fn disjoint_scalars() {
        assert!(Ty::Int.disjoint_scalar(&Ty::String));
        assert!(!Ty::Int.disjoint_scalar(&Ty::Number));
        assert!(!Ty::Any.disjoint_scalar(&Ty::String));
    }

    #[test]
    fn closest_name() {
        let catalog = Catalog::new([ActionSpec {
            name: "http.get".into(),
            doc: String::new(),
            params: vec![],
            open_params: false,
            output: Ty::Any,
            placement: Placement::Dispatched,
            reads_only: false,
        }]);
        assert_eq!(catalog.closest("http.gte"), Some("http.get"));
        assert_eq!(catalog.closest("fs.read"), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
