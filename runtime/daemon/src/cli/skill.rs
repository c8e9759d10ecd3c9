//! `opcode skill`: the agent skill this binary carries (spec/mcp.md,
//! "Prompts and the skill"), printed, or installed into a skills directory
//! (`~/.claude/skills`, `.cursor/skills`…) as `DIR/opcode/`.

use std::path::{Path, PathBuf};

use opcode_daemon::api::skill::{FILES, SKILL_MD, frontmatter};

use super::common::{Exit, fail};

/// Arguments of `skill`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Write the skill into this skills directory, as DIR/opcode/ (its
    /// files replaced); without it, print SKILL.md.
    #[arg(long, value_name = "DIR")]
    install: Option<PathBuf>,
}

/// Runs `skill`.
pub fn skill(args: &Args) -> Exit {
    let Some(dir) = &args.install else {
        print!("{SKILL_MD}");
        return Exit::Ok;
    };
    match install(dir) {
        Ok(at) => {
            println!("installed the skill in {}", at.display());
            Exit::Ok
        }
        Err(e) => fail(e),
    }
}

/// Writes the skill's files under `dir/<name>/`, answering that directory.
fn install(dir: &Path) -> Result<PathBuf, String> {
    let at = dir.join(frontmatter().0);
    for (path, text) in FILES {
        let file = at.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::write(&file, text).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn installing_writes_every_file_under_the_skills_name() {
        let dir = tempfile::tempdir().unwrap();
        let at = install(dir.path()).unwrap();
        assert_eq!(at, dir.path().join("opcode"));
        for (path, text) in FILES {
            assert_eq!(std::fs::read_to_string(at.join(path)).unwrap(), text);
        }
    }
}
