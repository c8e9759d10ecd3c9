//! An agent definition's `skills`: each `{name, content}` or `{name,
//! path}`, names plain and unique, paths inside the definition's folder.

use std::path::{Component, Path};

use crate::diagnostics::Diagnostic;
use crate::diagnostics::codes::{E0064, E0066};
use crate::source::Span;
use crate::syntax::node::Node;

use super::Reader;

/// A skill of an agent: `SKILL.md` text the agent is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Its name (`A-Za-z0-9_-`): the folder it is written to.
    pub name: String,
    /// Where its text is.
    pub source: SkillSource,
    /// Where the skill is written in the definition (for what reading
    /// its file finds).
    pub span: Span,
}

/// Where a skill's text is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkillSource {
    /// Written in the definition.
    Content(String),
    /// A file, relative to the definition's folder, inside it.
    Path(String),
}

/// The most text a skill may have, in bytes, in `content` or its file.
pub const MAX_SKILL_BYTES: usize = 1024 * 1024;

/// The most skills a definition may have.
pub const MAX_SKILLS: usize = 64;

/// Whether `name` may name a skill (the step parameter's rule).
pub fn is_skill_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
}

/// Whether relative `path` stays inside the folder it is read from, as
/// written: not absolute, no `..`, not empty. (Links are the reader's to
/// check, on the files.)
pub fn stays_inside(path: &str) -> bool {
    let path = Path::new(path);
    !path.as_os_str().is_empty()
        && !path.to_string_lossy().contains('\\')
        && path
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        && path.components().any(|c| matches!(c, Component::Normal(_)))
}

impl Reader<'_> {
    pub(super) fn skills(&mut self, node: &Node<'_>) -> Vec<Skill> {
        let Some(items) = node.as_array() else {
            self.wrong_type(node, "/skills", "a list of skills");
            return Vec::new();
        };
        if items.len() > MAX_SKILLS {
            self.sink.push(
                Diagnostic::error(
                    E0064,
                    node.span,
                    format!(
                        "{} skills: an agent may have at most {MAX_SKILLS}",
                        items.len()
                    ),
                )
                .with_pointer("/skills")
                .with_help("merge related skills into one SKILL.md"),
            );
        }
        let mut skills: Vec<Skill> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let pointer = format!("/skills/{i}");
            let Some(skill) = self.skill(item, &pointer) else {
                continue;
            };
            if skills.iter().any(|s| s.name == skill.name) {
                self.sink.push(
                    Diagnostic::error(
                        E0064,
                        item.span,
                        format!("skill `{}` is given twice", skill.name),
                    )
                    .with_pointer(pointer)
                    .with_help("each skill is written to a folder of its name: give each a name of its own"),
                );
                continue;
            }
            skills.push(skill);
        }
        skills
    }

    fn skill(&mut self, item: &Node<'_>, pointer: &str) -> Option<Skill> {
        const KNOWN: [&str; 3] = ["name", "content", "path"];
        let shape = "a skill is {\"name\": \"plain-name\", \"content\": \"…\"} or \
                     {\"name\": \"plain-name\", \"path\": \"skills/name/SKILL.md\"}";
        let Some(members) = item.as_object() else {
            self.wrong_type(item, pointer, "a skill object");
            return None;
        };
        for member in members.iter().filter(|m| !KNOWN.contains(&&*m.key)) {
            self.unknown(member, pointer, "a skill", &KNOWN);
        }
        let field = |key: &str| members.iter().find(|m| m.key == key).map(|m| &m.value);
        let Some(node) = field("name") else {
            self.sink.push(
                Diagnostic::error(E0064, item.span, "a skill needs a `name`")
                    .with_pointer(pointer.to_owned())
                    .with_help(shape),
            );
            return None;
        };
        let name = self.string(node, &format!("{pointer}/name"))?;
        if !is_skill_name(&name) {
            self.sink.push(
                Diagnostic::error(E0064, node.span, format!("`{name}` cannot name a skill"))
                    .with_pointer(format!("{pointer}/name"))
                    .with_help("a skill's name is letters, digits, `-` and `_`, at most 64"),
            );
            return None;
        }
        let source = match (field("content"), field("path")) {
            (Some(content), None) => {
                let at = format!("{pointer}/content");
                let text = self.string(content, &at)?;
                if text.len() > MAX_SKILL_BYTES {
                    self.sink.push(
                        Diagnostic::error(
                            E0064,
                            content.span,
                            format!(
                                "skill `{name}` is {} bytes: a skill may be at most {MAX_SKILL_BYTES}",
                                text.len()
                            ),
                        )
                        .with_pointer(at),
                    );
                    return None;
                }
                SkillSource::Content(text)
            }
            (None, Some(path)) => {
                let text = self.string(path, &format!("{pointer}/path"))?;
                if !stays_inside(&text) {
                    self.sink.push(
                        Diagnostic::error(
                            E0066,
                            path.span,
                            format!("skill path `{text}` leaves the definition's folder"),
                        )
                        .with_pointer(format!("{pointer}/path"))
                        .with_help(
                            "give a path relative to the folder of the definition file, \
                             without `..`, or write the text in `content`",
                        ),
                    );
                    return None;
                }
                SkillSource::Path(text)
            }
            (content, _) => {
                let message = if content.is_some() {
                    format!("skill `{name}` has both `content` and `path`")
                } else {
                    format!("skill `{name}` has neither `content` nor `path`")
                };
                self.sink.push(
                    Diagnostic::error(E0064, item.span, message)
                        .with_pointer(pointer.to_owned())
                        .with_help(shape),
                );
                return None;
            }
        };
        Some(Skill {
            name,
            source,
            span: item.span,
        })
    }
}
