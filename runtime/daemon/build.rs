//! Names the commit the binary is built from (`opcode --version`), or
//! `unknown` outside a git checkout (a crate from a registry or a tarball).

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    out.status.success().then(|| text.trim().to_owned())
}

/// Builds again when `path` changes; a path that does not exist is not
/// watched (cargo would take it as changed at every build, and relink).
fn watch(path: &Path) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=OPCODE_COMMIT={commit}");
    // Without this line, cargo reruns the script when any file of the
    // package changes; with it, only when a watched file does.
    println!("cargo:rerun-if-changed=build.rs");
    // Built again when the checkout moves to another commit: HEAD names the
    // branch, whose commit is in its own ref file or, once packed, in
    // `packed-refs` (a branch that appears or vanishes shows in either).
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]).map(PathBuf::from) {
        watch(&dir.join("HEAD"));
        watch(&dir.join("packed-refs"));
        if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch(&dir.join(head));
        }
    }
}
