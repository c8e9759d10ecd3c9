//! A case's workspace before the call: its files, and with `git`, a
//! repository with them committed; then all of it given to the sandbox
//! user.

use std::path::Path;

use opcode_compiler::agent::suite::Case;

/// Fills `dir` (made, empty) from `case`, then gives it to `owner`.
pub async fn fill(dir: &Path, case: &Case, owner: Option<(u32, u32)>) -> Result<(), String> {
    let (dir, files, git) = (dir.to_path_buf(), case.files.clone(), case.git);
    tokio::task::spawn_blocking(move || {
        for (path, text) in &files {
            // The suite reader allowed only plain relative paths.
            let file = dir.join(path);
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("cannot make {}: {e}", parent.display()))?;
            }
            std::fs::write(&file, text)
                .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        }
        if git {
            commit(&dir)?;
        }
        match owner {
            Some(owner) => opcode_stdlib::isolation::give::give_tree(&dir, owner),
            None => Ok(()),
        }
    })
    .await
    .map_err(|e| format!("the fixture stopped: {e}"))?
}

/// `git init` and one commit of everything in `dir`.
fn commit(dir: &Path) -> Result<(), String> {
    let git = |args: &[&str]| {
        let done = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=opcode",
                "-c",
                "user.email=eval@opcode.invalid",
            ])
            .args([
                "-c",
                "init.defaultBranch=main",
                "-c",
                "commit.gpgsign=false",
            ])
            // The workspace is the sandbox user's already; this process is root.
            .args(["-c", "safe.directory=*"])
            .args(args)
            .current_dir(dir)
            .output()
            .map_err(|e| format!("cannot run git for the case's repository: {e}"))?;
        if done.status.success() {
            return Ok(());
        }
        Err(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&done.stderr).trim()
        ))
    };
    git(&["init", "-q"])?;
    git(&["add", "-A"])?;
    git(&["commit", "-q", "--allow-empty", "-m", "fixture"])
}
