//! Agent definitions (`<name>.agent.json`, spec/registry.md): read and
//! checked like workflows, every problem a coded diagnostic with its place.
//! Pure: a skill given by `path` is checked as a path here and read by the
//! caller.

mod skills;
pub mod suite;

use opcode_vm::Code;
use serde_json::{Map, Value};

use crate::diagnostics::codes::{E0010, E0011, E0014, E0057, E0064, E0065};
use crate::diagnostics::{Diagnostic, Diagnostics, Fix, PatchOp, did_you_mean};
use crate::source::Span;
use crate::syntax::node::{Member, Node, child_pointer};

pub use self::skills::{MAX_SKILL_BYTES, MAX_SKILLS, Skill, SkillSource};

/// The roles an agent may take (spec/agents.md, "Roles").
pub const ROLES: [&str; 3] = ["scout", "worker", "runner"];

/// What a permission request gets (spec/agents.md, "Permission requests").
pub const PERMISSIONS: [&str; 3] = ["ask", "allow", "deny"];

/// The fields a definition may have.
const FIELDS: [&str; 11] = [
    "name",
    "version",
    "description",
    "role",
    "runs_on",
    "model",
    "variant",
    "skills",
    "mcp",
    "budgets",
    "permissions",
];

/// An agent definition, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDefinition {
    /// Its name: lower-case letters, digits and `-`.
    pub name: String,
    /// Its semantic version.
    pub version: semver::Version,
    /// What it is for.
    pub description: Option<String>,
    /// One of [`ROLES`].
    pub role: String,
    /// The settings entry that runs it (none: the default entry).
    pub runs_on: Option<String>,
    /// The model, passed to the command line.
    pub model: Option<String>,
    /// The model's variant.
    pub variant: Option<String>,
    /// Its skills, in order.
    pub skills: Vec<Skill>,
    /// Its MCP servers by name, each `{command, args, env}` or `{url}`.
    pub mcp: Map<String, Value>,
    /// Model steps it may take.
    pub max_steps: Option<u32>,
    /// Its wall-clock budget, as written (a duration of at least 10 s).
    pub timeout: Option<String>,
    /// One of [`PERMISSIONS`].
    pub permissions: Option<String>,
}

/// Reads the definition in `src`; `None` when it has errors.
pub fn read(src: &str) -> (Option<AgentDefinition>, Diagnostics) {
    let mut sink = Diagnostics::new();
    let definition = crate::syntax::json::parse(src, &mut sink).and_then(|root| {
        let read = Reader {
            sink: &mut sink,
            code: E0064,
            what: "an agent definition",
        }
        .definition(&root);
        read.filter(|_| !sink.has_errors())
    });
    (definition, sink)
}

/// What reading `text` finds when the file `name` is an agent definition
/// (`*.agent.json`) or an eval suite (`*.eval.json`); `None` for another
/// file. Editors and `opcodec check` say these as they say a workflow's.
pub fn diagnose(name: &str, text: &str) -> Option<Diagnostics> {
    if is_definition_file(name) {
        return Some(read(text).1);
    }
    suite::is_suite_file(name).then(|| suite::read(text).1)
}

/// Whether the file `name` holds an agent definition (`*.agent.json`).
pub fn is_definition_file(name: &str) -> bool {
    name.ends_with(".agent.json")
}

/// Whether `name` may name an agent: a lower-case letter, then lower-case
/// letters, digits and `-`, at most 64 in all.
pub fn is_agent_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.len() <= 64
}

/// Reads nodes into a definition, reporting to `sink`.
pub(crate) struct Reader<'d> {
    pub(crate) sink: &'d mut Diagnostics,
    /// The code of unknown and malformed fields.
    pub(crate) code: Code,
    /// What the file holds, in words.
    pub(crate) what: &'static str,
}

impl Reader<'_> {
    fn definition(&mut self, root: &Node<'_>) -> Option<AgentDefinition> {
        let Some(members) = root.as_object() else {
            self.wrong_type(root, "", "an object");
            return None;
        };
        for member in members.iter().filter(|m| !FIELDS.contains(&&*m.key)) {
            self.unknown(member, "", "an agent definition", &FIELDS);
        }
        let field = |key: &str| members.iter().find(|m| m.key == key).map(|m| &m.value);
        let text = |reader: &mut Self, key: &str| {
            field(key).and_then(|node| reader.string(node, &child_pointer("", key)))
        };
        let name = self.required(root, field("name"), "name").and_then(|node| {
            let name = self.string(node, "/name")?;
            if is_agent_name(&name) {
                return Some(name);
            }
            let plain = plain_name(&name);
            let mut d = Diagnostic::error(
                E0064,
                node.span,
                format!("`{name}` cannot name an agent"),
            )
            .with_pointer("/name")
            .with_help(
                "a name is lower-case letters, digits and `-`, starting with a letter, at most 64",
            );
            if is_agent_name(&plain) {
                d = d.with_fix(written_as(node.span, "/name", &plain));
            }
            self.sink.push(d);
            None
        });
        let version = self
            .required(root, field("version"), "version")
            .and_then(|node| self.version(node));
        let role = self
            .required(root, field("role"), "role")
            .and_then(|node| self.one_of(node, "/role", &ROLES));
        let permissions =
            field("permissions").and_then(|n| self.one_of(n, "/permissions", &PERMISSIONS));
        let skills = field("skills").map_or_else(Vec::new, |node| self.skills(node));
        let mcp = field("mcp").map_or_else(Map::new, |node| self.mcp(node));
        let (max_steps, timeout) =
            field("budgets").map_or((None, None), |node| self.budgets(node, "/budgets"));
        let description = text(self, "description");
        let runs_on = text(self, "runs_on");
        let model = text(self, "model");
        let variant = text(self, "variant");
        Some(AgentDefinition {
            name: name?,
            version: version?,
            description,
            role: role?,
            runs_on,
            model,
            variant,
            skills,
            mcp,
            max_steps,
            timeout,
            permissions,
        })
    }

    fn version(&mut self, node: &Node<'_>) -> Option<semver::Version> {
        let text = self.string(node, "/version")?;
        match semver::Version::parse(&text) {
            Ok(version) => Some(version),
            Err(e) => {
                let mut d = Diagnostic::error(
                    E0065,
                    node.span,
                    format!("`{text}` is not a semantic version: {e}"),
                )
                .with_pointer("/version")
                .with_help("write MAJOR.MINOR.PATCH, as `1.2.0` (semver.org)");
                if let Some(close) = completed_version(&text) {
                    d = d.with_fix(written_as(node.span, "/version", &close));
                }
                self.sink.push(d);
                None
            }
        }
    }

    fn mcp(&mut self, node: &Node<'_>) -> Map<String, Value> {
        let Some(members) = node.as_object() else {
            self.wrong_type(node, "/mcp", "an object of MCP servers by name");
            return Map::new();
        };
        let mut servers = Map::new();
        for member in members {
            let pointer = child_pointer("/mcp", &member.key);
            if let Some(problem) = mcp_problem(&member.value.to_value()) {
                self.sink.push(
                    Diagnostic::error(
                        E0064,
                        member.value.span,
                        format!("MCP server `{}` {problem}", member.key),
                    )
                    .with_pointer(pointer)
                    .with_help(
                        "a server is {\"command\": \"…\", \"args\": [\"…\"], \"env\": {\"K\": \"v\"}} \
                         or {\"url\": \"https://…\"}",
                    ),
                );
                continue;
            }
            servers.insert(member.key.to_string(), member.value.to_value());
        }
        servers
    }

    /// `budgets`, at `at`.
    fn budgets(&mut self, node: &Node<'_>, at: &str) -> (Option<u32>, Option<String>) {
        const KNOWN: [&str; 2] = ["max_steps", "timeout"];
        let Some(members) = node.as_object() else {
            self.wrong_type(node, at, "an object");
            return (None, None);
        };
        for member in members.iter().filter(|m| !KNOWN.contains(&&*m.key)) {
            self.unknown(member, at, "`budgets`", &KNOWN);
        }
        let field = |key: &str| members.iter().find(|m| m.key == key).map(|m| &m.value);
        let max_steps = field("max_steps").and_then(|node| {
            let steps = node.to_value().as_u64().filter(|n| (4..=256).contains(n));
            if steps.is_none() {
                self.budget(
                    node,
                    &format!("{at}/max_steps"),
                    "`max_steps` is a whole number from 4 to 256",
                );
            }
            steps.and_then(|n| u32::try_from(n).ok())
        });
        let timeout = field("timeout").and_then(|node| {
            let text = self.string(node, &format!("{at}/timeout"))?;
            match crate::duration::parse_millis(&text) {
                Ok(ms) if ms >= 10_000 => Some(text),
                _ => {
                    self.budget(
                        node,
                        &format!("{at}/timeout"),
                        "`timeout` is a duration of at least 10s, as `5m`",
                    );
                    None
                }
            }
        });
        (max_steps, timeout)
    }

    fn budget(&mut self, node: &Node<'_>, pointer: &str, rule: &str) {
        self.sink.push(
            Diagnostic::error(E0057, node.span, format!("{rule}, not {}", node.to_value()))
                .with_pointer(pointer),
        );
    }

    fn one_of(&mut self, node: &Node<'_>, pointer: &str, allowed: &[&str]) -> Option<String> {
        let text = self.string(node, pointer)?;
        if allowed.contains(&text.as_str()) {
            return Some(text);
        }
        let mut d = Diagnostic::error(
            E0014,
            node.span,
            format!("`{text}` is not one of {}", allowed.join(", ")),
        )
        .with_pointer(pointer);
        if let Some(close) = did_you_mean(&text, allowed) {
            d = d.with_fix(written_as(node.span, pointer, close));
        }
        self.sink.push(d);
        None
    }

    fn required<'n, 's>(
        &mut self,
        root: &Node<'s>,
        node: Option<&'n Node<'s>>,
        key: &str,
    ) -> Option<&'n Node<'s>> {
        if node.is_none() {
            self.sink.push(
                Diagnostic::error(
                    E0011,
                    Span::at(root.span.start as usize),
                    format!("{} needs `{key}`", self.what),
                )
                .with_pointer(""),
            );
        }
        node
    }

    pub(crate) fn string(&mut self, node: &Node<'_>, pointer: &str) -> Option<String> {
        let text = node.as_str().map(str::to_owned);
        if text.is_none() {
            self.wrong_type(node, pointer, "a string");
        }
        text
    }

    pub(crate) fn wrong_type(&mut self, node: &Node<'_>, pointer: &str, wanted: &str) {
        self.sink.push(
            Diagnostic::error(
                E0010,
                node.span,
                format!("expected {wanted}, found {}", node.kind_name()),
            )
            .with_pointer(pointer),
        );
    }

    pub(crate) fn unknown(
        &mut self,
        member: &Member<'_>,
        pointer: &str,
        what: &str,
        known: &[&str],
    ) {
        let key_pointer = child_pointer(pointer, &member.key);
        let mut d = Diagnostic::error(
            self.code,
            member.key_span,
            format!("unknown field `{}` in {what}", member.key),
        )
        .with_pointer(key_pointer.clone())
        .with_note(format!("known: {}", known.join(", ")));
        if let Some(close) = did_you_mean(&member.key, known) {
            d = d.with_fix(Fix::rename_key(
                format!("rename to `{close}`"),
                member.key_span,
                &key_pointer,
                close,
            ));
        }
        self.sink.push(d);
    }
}

/// The fix that writes `text` (a JSON string) at `span`, the value at
/// `pointer`.
fn written_as(span: Span, pointer: &str, text: &str) -> Fix {
    Fix::replace(
        format!("write `{text}`"),
        span,
        Value::from(text).to_string(),
        Some(PatchOp::Replace {
            path: pointer.to_owned(),
            value: Value::from(text),
        }),
    )
}

/// What is wrong with an MCP server entry, if anything.
fn mcp_problem(server: &Value) -> Option<&'static str> {
    let Some(fields) = server.as_object() else {
        return Some("is not an object");
    };
    let strings = |v: &Value| v.as_array().is_some_and(|a| a.iter().all(Value::is_string));
    let string_map = |v: &Value| {
        v.as_object()
            .is_some_and(|m| m.values().all(Value::is_string))
    };
    match (fields.get("command"), fields.get("url")) {
        (Some(_), Some(_)) => Some("has both `command` and `url`"),
        (None, None) => Some("has neither `command` nor `url`"),
        (None, Some(url)) => {
            let web = url
                .as_str()
                .is_some_and(|u| u.starts_with("https://") || u.starts_with("http://"));
            if !web {
                Some("has a `url` that is not http:// or https://")
            } else if fields.keys().any(|k| k != "url") {
                Some("has fields besides `url`")
            } else {
                None
            }
        }
        (Some(command), None) => {
            if command.as_str().is_none_or(str::is_empty) {
                Some("has a `command` that is not a program name")
            } else if fields.get("args").is_some_and(|a| !strings(a)) {
                Some("has `args` that are not a list of strings")
            } else if fields.get("env").is_some_and(|e| !string_map(e)) {
                Some("has an `env` that is not an object of strings")
            } else if fields
                .keys()
                .any(|k| !matches!(k.as_str(), "command" | "args" | "env"))
            {
                Some("has fields besides `command`, `args` and `env`")
            } else {
                None
            }
        }
    }
}

/// `name` lower-cased with runs of other characters as `-`.
fn plain_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.trim().chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_owned()
}

/// `1` or `1.2` completed to `1.0.0` or `1.2.0`; a leading `v` dropped.
fn completed_version(text: &str) -> Option<String> {
    let bare = text.trim().trim_start_matches(['v', 'V']);
    let parts: Vec<&str> = bare.split('.').collect();
    let numbers = parts
        .iter()
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if !numbers || parts.len() > 3 {
        return None;
    }
    let mut full: Vec<&str> = parts;
    full.resize(3, "0");
    let close = full.join(".");
    semver::Version::parse(&close).ok().map(|_| close)
}

#[cfg(test)]
mod tests;
