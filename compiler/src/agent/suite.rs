//! Agent eval suites (`<name>.eval.json`, spec/agent-evals.md): cases
//! with a prompt, a workspace fixture, budgets and post-conditions, read
//! with every problem a coded diagnostic at its place (E0071, and the
//! shared E0010/E0011/E0014/E0057).

use std::collections::BTreeMap;

use super::Reader;
use crate::diagnostics::codes::{E0011, E0071};
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::source::Span;
use crate::syntax::node::{Node, child_pointer};

/// The fields of a suite, a case, its workspace and its expectations.
const SUITE: [&str; 2] = ["agent", "cases"];
const CASE: [&str; 5] = ["name", "prompt", "workspace", "budgets", "expect"];
const WORKSPACE: [&str; 2] = ["files", "git"];
const EXPECT: [&str; 11] = [
    "status",
    "exit_code",
    "output_contains",
    "output_lacks",
    "tools_called",
    "tools_not_called",
    "commands_ran",
    "files_exist",
    "files_absent",
    "file_contains",
    "files_changed",
];

/// How a case's agent call may end.
pub const STATUSES: [&str; 4] = ["completed", "timeout", "step_limit", "failed"];
/// How a file may change.
pub const CHANGES: [&str; 3] = ["added", "modified", "deleted"];

/// A suite, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suite {
    /// The agent it tests (the definition's `name`).
    pub agent: String,
    /// Its cases, in order.
    pub cases: Vec<Case>,
}

/// One case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// Its name, unique in the suite.
    pub name: String,
    /// The task.
    pub prompt: String,
    /// The workspace's files before the call, by relative path.
    pub files: BTreeMap<String, String>,
    /// Whether the workspace is a Git repository with the files committed.
    pub git: bool,
    /// Model steps, over the definition's.
    pub max_steps: Option<u32>,
    /// The wall-clock budget, over the definition's.
    pub timeout: Option<String>,
    /// What must hold after the call.
    pub expect: Expect,
}

/// A case's post-conditions; each one absent holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expect {
    /// One of [`STATUSES`].
    pub status: Option<String>,
    /// The agent's exit code.
    pub exit_code: Option<i64>,
    /// Texts its summary contains.
    pub output_contains: Vec<String>,
    /// Texts its summary does not contain.
    pub output_lacks: Vec<String>,
    /// Tools it called.
    pub tools_called: Vec<String>,
    /// Tools it did not call.
    pub tools_not_called: Vec<String>,
    /// Texts each found in one command it ran.
    pub commands_ran: Vec<String>,
    /// Workspace files that exist after.
    pub files_exist: Vec<String>,
    /// Workspace files that do not.
    pub files_absent: Vec<String>,
    /// Workspace files and a text each contains.
    pub file_contains: BTreeMap<String, String>,
    /// Exactly the files that changed, `(path, change)`, when given.
    pub files_changed: Option<Vec<(String, String)>>,
}

/// Reads the suite in `src`; `None` when it has errors.
pub fn read(src: &str) -> (Option<Suite>, Diagnostics) {
    let mut sink = Diagnostics::new();
    let suite = crate::syntax::json::parse(src, &mut sink).and_then(|root| {
        let mut reader = Reader {
            sink: &mut sink,
            code: E0071,
            what: "an eval suite",
        };
        let read = reader.suite(&root);
        read.filter(|_| !sink.has_errors())
    });
    (suite, sink)
}

/// Whether the file `name` holds an eval suite (`*.eval.json`).
pub fn is_suite_file(name: &str) -> bool {
    name.ends_with(".eval.json")
}

/// The members of an object node, or `None` (reported) when it is not one.
type Members<'n, 's> = &'n [crate::syntax::node::Member<'s>];

impl Reader<'_> {
    fn suite(&mut self, root: &Node<'_>) -> Option<Suite> {
        let members = self.object(root, "", "an eval suite", &SUITE)?;
        let agent = self
            .needed(root, members, "agent", "")
            .and_then(|n| self.string(n, "/agent"));
        let cases = self.needed(root, members, "cases", "").and_then(|node| {
            let Some(items) = node.as_array() else {
                self.wrong_type(node, "/cases", "an array");
                return None;
            };
            if items.is_empty() {
                self.malformed(node.span, "/cases", "a suite needs at least one case");
            }
            let mut cases = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let at = format!("/cases/{i}");
                let case = self.case(item, &at);
                if let Some(case) = &case
                    && cases.iter().flatten().any(|c: &Case| c.name == case.name)
                {
                    let span = item
                        .as_object()
                        .and_then(|m| m.iter().find(|m| m.key == "name"))
                        .map_or(item.span, |m| m.value.span);
                    let name = &case.name;
                    self.malformed(
                        span,
                        &format!("{at}/name"),
                        &format!("two cases are named `{name}`"),
                    );
                }
                cases.push(case);
            }
            cases.into_iter().collect::<Option<Vec<Case>>>()
        });
        let cases = cases?;
        Some(Suite {
            agent: agent?,
            cases,
        })
    }

    fn case(&mut self, node: &Node<'_>, at: &str) -> Option<Case> {
        let members = self.object(node, at, "a case", &CASE)?;
        let field = |key: &str| members.iter().find(|m| m.key == key).map(|m| &m.value);
        let name = self
            .needed(node, members, "name", at)
            .and_then(|n| self.string(n, &child_pointer(at, "name")));
        let prompt = self
            .needed(node, members, "prompt", at)
            .and_then(|n| self.string(n, &child_pointer(at, "prompt")));
        let workspace = match field("workspace") {
            Some(n) => self.workspace(n, &child_pointer(at, "workspace")),
            None => Some((BTreeMap::new(), false)),
        };
        let (max_steps, timeout) = field("budgets").map_or((None, None), |n| {
            self.budgets(n, &child_pointer(at, "budgets"))
        });
        let expect = match field("expect") {
            Some(n) => self.expect(n, &child_pointer(at, "expect")),
            None => Some(Expect::default()),
        };
        let ((files, git), expect) = (workspace?, expect?);
        Some(Case {
            name: name?,
            prompt: prompt?,
            files,
            git,
            max_steps,
            timeout,
            expect,
        })
    }

    fn workspace(&mut self, node: &Node<'_>, at: &str) -> Option<(BTreeMap<String, String>, bool)> {
        let members = self.object(node, at, "`workspace`", &WORKSPACE)?;
        let field = |key: &str| members.iter().find(|m| m.key == key).map(|m| &m.value);
        let files = match field("files") {
            Some(n) => self.texts_by_path(n, &child_pointer(at, "files")),
            None => Some(BTreeMap::new()),
        };
        let git = match field("git") {
            Some(n) => {
                let git = n.to_value().as_bool();
                if git.is_none() {
                    self.wrong_type(n, &child_pointer(at, "git"), "true or false");
                }
                git
            }
            None => Some(false),
        };
        Some((files?, git?))
    }

    fn expect(&mut self, node: &Node<'_>, at: &str) -> Option<Expect> {
        let members = self.object(node, at, "`expect`", &EXPECT)?;
        let mut expect = Expect::default();
        let mut fine = true;
        for member in members.iter().filter(|m| EXPECT.contains(&&*m.key)) {
            let pointer = child_pointer(at, &member.key);
            let value = &member.value;
            match &*member.key {
                "status" => expect.status = self.one_of(value, &pointer, &STATUSES),
                "exit_code" => {
                    expect.exit_code = value.to_value().as_i64();
                    if expect.exit_code.is_none() {
                        self.wrong_type(value, &pointer, "a whole number");
                    }
                }
                "file_contains" => match self.texts_by_path(value, &pointer) {
                    Some(texts) => expect.file_contains = texts,
                    None => fine = false,
                },
                "files_changed" => expect.files_changed = self.changes(value, &pointer),
                key => {
                    let paths = matches!(key, "files_exist" | "files_absent");
                    let Some(list) = self.strings(value, &pointer, paths) else {
                        fine = false;
                        continue;
                    };
                    let slot = match key {
                        "output_contains" => &mut expect.output_contains,
                        "output_lacks" => &mut expect.output_lacks,
                        "tools_called" => &mut expect.tools_called,
                        "tools_not_called" => &mut expect.tools_not_called,
                        "commands_ran" => &mut expect.commands_ran,
                        "files_exist" => &mut expect.files_exist,
                        _ => &mut expect.files_absent,
                    };
                    *slot = list;
                }
            }
        }
        fine.then_some(expect)
    }

    /// `[{path, change}]`.
    fn changes(&mut self, node: &Node<'_>, at: &str) -> Option<Vec<(String, String)>> {
        let Some(items) = node.as_array() else {
            self.wrong_type(node, at, "an array");
            return None;
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let here = format!("{at}/{i}");
            let members = self.object(item, &here, "a change", &["path", "change"])?;
            let path = self.needed(item, members, "path", &here).and_then(|n| {
                let pointer = child_pointer(&here, "path");
                let path = self.string(n, &pointer)?;
                self.inside(n, &pointer, &path)
            });
            let change = self
                .needed(item, members, "change", &here)
                .and_then(|n| self.one_of(n, &child_pointer(&here, "change"), &CHANGES));
            out.push((path?, change?));
        }
        Some(out)
    }

    /// An object of texts by workspace path.
    fn texts_by_path(&mut self, node: &Node<'_>, at: &str) -> Option<BTreeMap<String, String>> {
        let Some(members) = node.as_object() else {
            self.wrong_type(node, at, "an object of texts by path");
            return None;
        };
        let mut out = BTreeMap::new();
        let mut fine = true;
        for member in members {
            let pointer = child_pointer(at, &member.key);
            let path = self.inside_key(member.key_span, &pointer, &member.key);
            match (path, self.string(&member.value, &pointer)) {
                (Some(path), Some(text)) => {
                    out.insert(path, text);
                }
                _ => fine = false,
            }
        }
        fine.then_some(out)
    }

    /// An array of strings; with `paths`, each a path inside the workspace.
    fn strings(&mut self, node: &Node<'_>, at: &str, paths: bool) -> Option<Vec<String>> {
        let Some(items) = node.as_array() else {
            self.wrong_type(node, at, "an array of strings");
            return None;
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let pointer = format!("{at}/{i}");
            let text = self.string(item, &pointer)?;
            out.push(if paths {
                self.inside(item, &pointer, &text)?
            } else {
                text
            });
        }
        Some(out)
    }

    /// `path`, when it is relative and stays inside the workspace.
    fn inside(&mut self, node: &Node<'_>, at: &str, path: &str) -> Option<String> {
        self.inside_key(node.span, at, path)
    }

    fn inside_key(&mut self, span: Span, at: &str, path: &str) -> Option<String> {
        let parts: Vec<&str> = path.split('/').collect();
        let bad = path.is_empty()
            || path.starts_with('/')
            || path.contains('\0')
            || parts
                .iter()
                .any(|p| *p == ".." || *p == "." || p.is_empty())
            || parts.first() == Some(&".git");
        if bad {
            self.malformed(
                span,
                at,
                &format!(
                    "`{path}` is not a path inside the workspace: relative, no `.`, `..` or empty parts, not in `.git`"
                ),
            );
            return None;
        }
        Some(path.to_owned())
    }

    /// The members of `node`, each unknown one reported.
    fn object<'n, 's>(
        &mut self,
        node: &'n Node<'s>,
        at: &str,
        what: &str,
        known: &[&str],
    ) -> Option<Members<'n, 's>> {
        let Some(members) = node.as_object() else {
            self.wrong_type(node, at, "an object");
            return None;
        };
        for member in members.iter().filter(|m| !known.contains(&&*m.key)) {
            self.unknown(member, at, what, known);
        }
        Some(members)
    }

    /// The member `key` of the object `node` at `at`, reported when missing.
    fn needed<'n, 's>(
        &mut self,
        node: &Node<'s>,
        members: Members<'n, 's>,
        key: &str,
        at: &str,
    ) -> Option<&'n Node<'s>> {
        let found = members.iter().find(|m| m.key == key).map(|m| &m.value);
        if found.is_none() {
            self.sink.push(
                Diagnostic::error(
                    E0011,
                    Span::at(node.span.start as usize),
                    format!(
                        "{} needs `{key}`",
                        if at.is_empty() { self.what } else { "this" }
                    ),
                )
                .with_pointer(at),
            );
        }
        found
    }

    fn malformed(&mut self, span: Span, at: &str, message: &str) {
        self.sink
            .push(Diagnostic::error(self.code, span, message.to_owned()).with_pointer(at));
    }
}

#[cfg(test)]
mod tests;
