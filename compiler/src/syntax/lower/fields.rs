//! Reading the fields of an object: type checks, unknown-field warnings and
//! the typed getters every lowering function uses.

use super::{Lowerer, child_pointer};
use crate::ast::{Json, Millis, Spanned};
use crate::diagnostics::codes::{E0010, E0014, E0015, E0017, W0001};
use crate::diagnostics::{Diagnostic, Fix, PatchOp, did_you_mean as suggestion};
use crate::duration::parse_millis;
use crate::source::Span;
use crate::syntax::node::{Member, Node, NodeKind};

/// The members of an object being lowered, with its JSON Pointer.
pub(crate) struct Fields<'n, 's> {
    members: &'n [Member<'s>],
    pub(crate) pointer: String,
}

impl<'n, 's> Fields<'n, 's> {
    /// The member named `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&'n Member<'s>> {
        self.members.iter().find(|m| m.key == key)
    }

    /// Where each member is written, key to value, in order.
    pub(crate) fn member_spans(&self) -> Vec<Span> {
        self.members
            .iter()
            .map(|m| Span::new(m.key_span.start as usize, m.value.span.end as usize))
            .collect()
    }

    /// The index of member `key`.
    pub(crate) fn index_of(&self, key: &str) -> Option<usize> {
        self.members.iter().position(|m| m.key == key)
    }

    /// The pointer of member `key`.
    pub(crate) fn pointer_of(&self, key: &str) -> String {
        child_pointer(&self.pointer, key)
    }
}

impl Lowerer<'_> {
    /// Checks that `node` is an object and warns about unknown keys.
    pub(crate) fn fields<'n, 's>(
        &mut self,
        node: &'n Node<'s>,
        pointer: &str,
        what: &str,
        known: &[&str],
    ) -> Option<Fields<'n, 's>> {
        let Some(members) = node.as_object() else {
            self.report(
                Diagnostic::error(
                    E0010,
                    node.span,
                    format!("{what} must be an object, found {}", node.kind_name()),
                )
                .with_pointer(pointer),
            );
            return None;
        };
        for member in members {
            if !known.contains(&&*member.key) {
                self.unknown_field(member, pointer, what, known);
            }
        }
        Some(Fields {
            members,
            pointer: pointer.to_owned(),
        })
    }

    pub(crate) fn unknown_field(
        &mut self,
        member: &Member<'_>,
        pointer: &str,
        what: &str,
        known: &[&str],
    ) {
        let key_pointer = child_pointer(pointer, &member.key);
        let mut diagnostic = Diagnostic::warning(
            W0001,
            member.key_span,
            format!("unknown field `{}` in {what} is ignored", member.key),
        )
        .with_pointer(key_pointer.clone());
        // `fallback` for `fallback_step`: the one known field it begins.
        let begun = || {
            let mut begun = known
                .iter()
                .copied()
                .filter(|k| k.starts_with(&*member.key));
            begun.next().filter(|_| begun.next().is_none())
        };
        if let Some(close) = suggestion(&member.key, known).or_else(begun) {
            diagnostic = diagnostic
                .with_help(format!("did you mean `{close}`?"))
                .with_fix(Fix {
                    message: format!("rename to `{close}`"),
                    edits: vec![crate::diagnostics::TextEdit {
                        span: member.key_span,
                        replacement: format!("\"{close}\""),
                    }],
                    patch: vec![
                        PatchOp::Remove { path: key_pointer },
                        PatchOp::Add {
                            path: child_pointer(pointer, close),
                            value: member.value.to_value(),
                        },
                    ],
                });
        } else {
            let mut names: Vec<&str> = known.iter().copied().filter(|k| *k != "$schema").collect();
            names.sort_unstable();
            diagnostic = diagnostic.with_help(format!("known fields: {}", names.join(", ")));
        }
        self.report(diagnostic);
    }

    /// Reports that member `key` has the wrong type.
    pub(crate) fn wrong_type(&mut self, member: &Member<'_>, pointer: &str, expected: &str) {
        let mut d = Diagnostic::error(
            E0010,
            member.value.span,
            format!(
                "`{}` must be {expected}, found {}",
                member.key,
                member.value.kind_name()
            ),
        )
        .with_pointer(pointer);
        if let Some(meant) = retyped(&member.value.to_value(), expected) {
            d = d.with_fix(Fix::replace(
                format!("write `{meant}`"),
                member.value.span,
                meant.to_string(),
                Some(PatchOp::Replace {
                    path: pointer.to_owned(),
                    value: meant,
                }),
            ));
        }
        self.report(d);
    }

    /// An optional string field.
    pub(crate) fn opt_string(
        &mut self,
        fields: &Fields<'_, '_>,
        key: &str,
    ) -> Option<Spanned<String>> {
        let member = fields.get(key)?;
        if let Some(s) = member.value.as_str() {
            return Some(Spanned::new(s.to_owned(), member.value.span));
        }
        self.wrong_type(member, &fields.pointer_of(key), "a string");
        None
    }

    /// An optional field of a given JSON kind (`object` or `array`), as a plain value.
    pub(crate) fn opt_typed(
        &mut self,
        fields: &Fields<'_, '_>,
        key: &str,
        kind: &str,
    ) -> Option<Json> {
        let member = fields.get(key)?;
        if member.value.kind_name() == kind {
            return Some(Spanned::new(member.value.to_value(), member.value.span));
        }
        let article = if kind == "object" {
            "an object"
        } else {
            "an array"
        };
        self.wrong_type(member, &fields.pointer_of(key), article);
        None
    }

    /// An optional boolean.
    pub(crate) fn opt_bool(&mut self, fields: &Fields<'_, '_>, key: &str) -> Option<bool> {
        let member = fields.get(key)?;
        if let NodeKind::Bool(b) = member.value.kind {
            return Some(b);
        }
        self.wrong_type(member, &fields.pointer_of(key), "true or false");
        None
    }

    /// An optional non-negative integer.
    pub(crate) fn opt_count(&mut self, fields: &Fields<'_, '_>, key: &str) -> Option<Spanned<u64>> {
        let member = fields.get(key)?;
        if let NodeKind::Number(n) = &member.value.kind {
            if let Some(count) = n.as_u64() {
                return Some(Spanned::new(count, member.value.span));
            }
            self.report(
                Diagnostic::error(
                    E0017,
                    member.value.span,
                    format!("`{key}` must be a non-negative integer, found {n}"),
                )
                .with_pointer(fields.pointer_of(key)),
            );
            return None;
        }
        self.wrong_type(member, &fields.pointer_of(key), "a non-negative integer");
        None
    }

    /// An optional duration string (`30s`, `1h30m`).
    pub(crate) fn opt_duration(
        &mut self,
        fields: &Fields<'_, '_>,
        key: &str,
    ) -> Option<Spanned<Millis>> {
        let member = fields.get(key)?;
        let Some(text) = member.value.as_str() else {
            self.wrong_type(
                member,
                &fields.pointer_of(key),
                "a duration string such as \"30s\"",
            );
            return None;
        };
        match parse_millis(text) {
            Ok(ms) => Some(Spanned::new(ms, member.value.span)),
            Err(why) => {
                let pointer = fields.pointer_of(key);
                let mut d =
                    Diagnostic::error(E0015, member.value.span, format!("invalid duration: {why}"))
                        .with_help("durations look like `500ms`, `30s`, `5m`, `1h30m`")
                        .with_pointer(pointer.clone());
                if let Some(fix) = crate::duration::fix(text, member.value.span, &pointer) {
                    d = d.with_fix(fix);
                }
                self.report(d);
                None
            }
        }
    }

    /// An optional string from a fixed set.
    pub(crate) fn opt_enum<T>(
        &mut self,
        fields: &Fields<'_, '_>,
        key: &str,
        parse: fn(&str) -> Option<T>,
        spellings: &[&str],
    ) -> Option<Spanned<T>> {
        let member = fields.get(key)?;
        let Some(text) = member.value.as_str() else {
            self.wrong_type(member, &fields.pointer_of(key), "a string");
            return None;
        };
        if let Some(value) = parse(text) {
            return Some(Spanned::new(value, member.value.span));
        }
        let quoted: Vec<String> = spellings.iter().map(|s| format!("`{s}`")).collect();
        let mut diagnostic = Diagnostic::error(
            E0014,
            member.value.span,
            format!(
                "`{key}` must be one of {}, found `{text}`",
                quoted.join(", ")
            ),
        )
        .with_pointer(fields.pointer_of(key));
        if let Some(close) = suggestion(text, spellings) {
            diagnostic = diagnostic
                .with_help(format!("did you mean `{close}`?"))
                .with_fix(Fix::replace(
                    format!("replace with `{close}`"),
                    member.value.span,
                    format!("\"{close}\""),
                    Some(PatchOp::Replace {
                        path: fields.pointer_of(key),
                        value: serde_json::Value::String(close.to_owned()),
                    }),
                ));
        }
        self.report(diagnostic);
        None
    }
}

/// `value` as the kind `expected` names, when one reading is likely: a
/// count or a boolean in quotes unquoted, a number or boolean where text is
/// wanted quoted. A bare number where a duration is wanted gets no fix: its
/// unit cannot be told (a retry `delay` of 1000 is most likely
/// milliseconds, a `timeout` of 30 seconds).
fn retyped(value: &serde_json::Value, expected: &str) -> Option<serde_json::Value> {
    use serde_json::Value;
    match value {
        Value::String(s) if expected.contains("integer") => {
            s.trim().parse::<u64>().ok().map(Value::from)
        }
        Value::String(s) if expected == "true or false" => {
            s.trim().parse::<bool>().ok().map(Value::Bool)
        }
        Value::Number(_) | Value::Bool(_) if expected == "a string" => {
            Some(Value::String(value.to_string()))
        }
        // A list or number written as JSON where CEL text is wanted: its
        // JSON text is the CEL literal (`[1, 2]`, `{"a": 1}`, `3`).
        Value::Array(_) | Value::Object(_) | Value::Number(_)
            if expected == "a CEL expression string" =>
        {
            Some(Value::String(value.to_string()))
        }
        _ => None,
    }
}
