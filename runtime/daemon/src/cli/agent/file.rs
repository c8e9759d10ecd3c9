//! An agent definition file and the skills beside it, read and checked: a
//! skill's path must stay in the definition's folder once links are
//! followed too (E0066), and its file must be a regular file of UTF-8
//! text of at most [`MAX_SKILL_BYTES`].

use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use opcode_compiler::agent::{AgentDefinition, Skill, SkillSource};
use opcode_compiler::diagnostics::Diagnostic;
use opcode_compiler::diagnostics::codes::{E0064, E0066};
use opcode_compiler::diagnostics::render::human;

use crate::cli::common::{Exit, fail};

/// The largest skill file read.
const MAX_SKILL_BYTES: u64 = opcode_compiler::agent::MAX_SKILL_BYTES as u64;

/// A checked definition and its skills' text, in order.
pub struct Read {
    /// The definition.
    pub definition: AgentDefinition,
    /// Each skill's text.
    pub texts: Vec<String>,
    /// What was found that is not an error.
    pub warnings: usize,
}

/// Reads `path`: the definition and its skills. Prints every diagnostic;
/// `Err` when there is an error.
pub fn read(path: &Path) -> Result<Read, Exit> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| fail(format!("cannot read {file}: {e}")))?;
    let source =
        opcode_compiler::decode_utf8(&bytes).map_err(|d| fail(format!("{file}: {}", d.message)))?;
    let (definition, mut diagnostics) = opcode_compiler::agent::read(source);
    let mut texts = Vec::new();
    if let Some(definition) = &definition {
        let folder = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        for (i, skill) in definition.skills.iter().enumerate() {
            match text_of(skill, folder) {
                Ok(text) => texts.push(text),
                Err((code, message)) => diagnostics.push(
                    Diagnostic::error(code, skill.span, message)
                        .with_pointer(format!("/skills/{i}/path")),
                ),
            }
        }
    }
    let sorted = diagnostics.into_sorted();
    if !sorted.is_empty() {
        eprintln!(
            "{}",
            human::render(&sorted, &file, source, false).trim_end()
        );
    }
    let warnings = sorted.iter().filter(|d| !d.is_error()).count();
    match definition {
        Some(definition) if !sorted.iter().any(Diagnostic::is_error) => Ok(Read {
            definition,
            texts,
            warnings,
        }),
        _ => Err(Exit::Usage),
    }
}

/// The text of `skill`, read from `folder` when it is a file.
fn text_of(skill: &Skill, folder: &Path) -> Result<String, (opcode_vm::Code, String)> {
    let relative = match &skill.source {
        SkillSource::Content(text) => return Ok(text.clone()),
        SkillSource::Path(relative) => relative,
    };
    let cannot = |e: std::io::Error| {
        (
            E0064,
            format!("skill `{}`: cannot read {relative}: {e}", skill.name),
        )
    };
    let inside: PathBuf = folder.canonicalize().map_err(cannot)?;
    let file = folder.join(relative).canonicalize().map_err(cannot)?;
    if !file.starts_with(&inside) {
        return Err((
            E0066,
            format!(
                "skill `{}`: {relative} leads to {}, outside the definition's folder",
                skill.name,
                file.display()
            ),
        ));
    }
    // A regular file only: a FIFO or a device would block the read or
    // never end (opened without waiting for a FIFO's writer, then judged
    // by what was opened); and no more than the limit, whatever the file
    // grows to.
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(&file)
        .map_err(cannot)?;
    if !opened.metadata().map_err(cannot)?.is_file() {
        return Err((
            E0064,
            format!("skill `{}`: {relative} is not a regular file", skill.name),
        ));
    }
    let mut bytes = Vec::new();
    opened
        .take(MAX_SKILL_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > MAX_SKILL_BYTES {
        return Err((
            E0064,
            format!(
                "skill `{}`: {relative} is more than a skill may be ({MAX_SKILL_BYTES} bytes)",
                skill.name
            ),
        ));
    }
    String::from_utf8(bytes).map_err(|_| {
        (
            E0064,
            format!("skill `{}`: {relative} is not UTF-8 text", skill.name),
        )
    })
}
