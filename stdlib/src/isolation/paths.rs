//! Which paths `fs.*` actions may read and write: allow and deny lists,
//! checked after symlinks are resolved; [`beneath`] opens a path so that
//! no link takes it out of the allowed tree.

pub mod beneath;

pub use self::beneath::Entry;

use std::path::{Component, Path, PathBuf};

use opcode_vm::error::ActionError;
use serde::Deserialize;

/// Allow and deny lists. Deny wins; with both allow lists empty every path
/// not denied is allowed; writing needs a `write` path, reading a `read` or
/// `write` one.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathRules {
    /// Directories that may be read.
    #[serde(default)]
    pub read: Vec<PathBuf>,
    /// Directories that may be read and written.
    #[serde(default)]
    pub write: Vec<PathBuf>,
    /// Directories never touched.
    #[serde(default)]
    pub deny: Vec<PathBuf>,
    /// Rules that must allow the path too (the settings', under a step's).
    #[serde(skip)]
    outer: Option<Box<PathRules>>,
}

/// Reading or writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reading.
    Read,
    /// Creating, changing or deleting.
    Write,
}

impl PathRules {
    /// These rules, with a step's `inner` ones that may only narrow them.
    pub fn narrowed_by(self, inner: PathRules) -> PathRules {
        PathRules {
            outer: Some(Box::new(self)),
            ..inner
        }
    }

    /// The rules with relative entries resolved against `base`.
    pub fn absolute(self, base: &Path) -> PathRules {
        let fix = |list: Vec<PathBuf>| list.into_iter().map(|p| resolve(&base.join(p))).collect();
        PathRules {
            read: fix(self.read),
            write: fix(self.write),
            deny: fix(self.deny),
            outer: self.outer.map(|o| Box::new(o.absolute(base))),
        }
    }

    /// These rules resolved now, when every entry is an absolute path and
    /// no outer rules hold (else they depend on where a run works).
    pub fn resolved_if_absolute(&self) -> Option<PathRules> {
        let lists = [&self.read, &self.write, &self.deny];
        let absolute = lists.iter().all(|l| l.iter().all(|p| p.is_absolute()));
        (absolute && self.outer.is_none()).then(|| self.clone().absolute(Path::new("/")))
    }

    /// Does any rule restrict anything?
    pub fn is_open(&self) -> bool {
        self.read.is_empty()
            && self.write.is_empty()
            && self.deny.is_empty()
            && self.outer.as_ref().is_none_or(|o| o.is_open())
    }

    /// `path` (absolute) if these rules allow `access` to it, else R0126.
    pub fn check(&self, path: &Path, access: Access) -> Result<PathBuf, ActionError> {
        let real = resolve(path);
        if let Some(why) = self.refusal(&real, access) {
            return Err(denied(path, &real, &why));
        }
        Ok(path.to_path_buf())
    }

    fn refusal(&self, real: &Path, access: Access) -> Option<String> {
        if let Some(deny) = self.deny.iter().find(|d| real.starts_with(d)) {
            return Some(format!("under the denied path {}", deny.display()));
        }
        let writable = self.write.iter().any(|w| real.starts_with(w));
        let readable = writable || self.read.iter().any(|r| real.starts_with(r));
        let listed = !(self.read.is_empty() && self.write.is_empty());
        let refused = match access {
            Access::Write if listed && !writable => Some("not under a writable path".to_owned()),
            Access::Read if listed && !readable => Some("not under a readable path".to_owned()),
            _ => None,
        };
        refused.or_else(|| self.outer.as_ref()?.refusal(real, access))
    }
}

/// R0126 for `path` (really `real`), which is `why`.
fn denied(path: &Path, real: &Path, why: &str) -> ActionError {
    ActionError::new(
        opcode_vm::codes::R0126,
        "PATH_DENIED",
        format!("{} is {why}", path.display()),
        false,
    )
    .with_details(serde_json::json!({"path": path, "resolved": real}))
}

/// `path` made absolute and normal, with symlinks resolved as far as it
/// exists (a path to be created resolves its existing ancestors; a
/// dangling link resolves to where it points). A path reached through no
/// link, or missing after a part reached through none (a run's workspace
/// not made yet), is itself: one `openat2`.
pub fn resolve(path: &Path) -> PathBuf {
    let mut existing = normalize(path);
    let path_only = nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC;
    match beneath::open_without_links(&existing, path_only) {
        Ok(_) | Err(nix::errno::Errno::ENOENT) => return existing,
        Err(_) => {}
    }
    let mut rest = Vec::new();
    for _ in 0..64 {
        if let Ok(real) = existing.canonicalize() {
            return rest
                .into_iter()
                .rev()
                .fold(real, |p, c: std::ffi::OsString| p.join(c));
        }
        if let Ok(target) = std::fs::read_link(&existing) {
            let dir = existing.parent().unwrap_or(Path::new("/"));
            existing = normalize(&dir.join(target));
            continue;
        }
        match (
            existing.file_name().map(ToOwned::to_owned),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => break,
        }
    }
    normalize(path)
}

/// Removes `.` and resolves `..` textually.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(c) => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(read: &[&Path], write: &[&Path], deny: &[&Path]) -> PathRules {
        let own = |l: &[&Path]| l.iter().map(|p| p.to_path_buf()).collect();
        PathRules {
            read: own(read),
            write: own(write),
            deny: own(deny),
            outer: None,
        }
    }

    #[test]
    fn deny_wins_and_writing_needs_a_writable_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (data, out, secret) = (root.join("data"), root.join("out"), root.join("out/secret"));
        std::fs::create_dir_all(&secret).unwrap();
        std::fs::create_dir_all(&data).unwrap();
        let r = rules(&[&data], &[&out], &[&secret]);
        assert!(r.check(&data.join("a.txt"), Access::Read).is_ok());
        assert!(r.check(&data.join("a.txt"), Access::Write).is_err());
        assert!(r.check(&out.join("new/b.txt"), Access::Write).is_ok());
        assert!(r.check(&secret.join("k"), Access::Read).is_err());
        assert!(
            r.check(&root.join("database"), Access::Read).is_err(),
            "prefix is not containment"
        );
        assert!(
            r.check(&data.join("../out/../../etc"), Access::Read)
                .is_err()
        );
        assert!(
            PathRules::default()
                .check(Path::new("/etc/passwd"), Access::Write)
                .is_ok()
        );
    }

    /// Two real directories in a temporary one, `inside/link` pointing
    /// to `outside`.
    fn linked_tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (inside, outside) = (root.join("inside"), root.join("outside"));
        std::fs::create_dir_all(&inside).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, inside.join("link")).unwrap();
        (dir, inside, outside)
    }

    #[test]
    fn symlinks_are_resolved_before_the_check() {
        let (_dir, inside, _) = linked_tree();
        let r = rules(&[], &[&inside], &[]);
        let err = r
            .check(&inside.join("link/file"), Access::Write)
            .unwrap_err();
        assert_eq!(err.code, "R0126");
    }

    #[test]
    fn missing_paths_resolve_through_the_links_before_them() {
        let (_dir, real, elsewhere) = linked_tree();
        std::os::unix::fs::symlink(elsewhere.join("gone"), real.join("dangling")).unwrap();
        // Reached through no link, present or not: itself.
        assert_eq!(resolve(&real.join("new/run")), real.join("new/run"));
        assert_eq!(resolve(&real.join("x/../new")), real.join("new"));
        // A link before the missing part, or a dangling one, is followed.
        assert_eq!(resolve(&real.join("link/run")), elsewhere.join("run"));
        assert_eq!(resolve(&real.join("dangling")), elsewhere.join("gone"));
        assert_eq!(resolve(&real.join("dangling/a")), elsewhere.join("gone/a"));
    }

    #[test]
    fn a_step_only_narrows_the_settings() {
        let settings = rules(&[], &[Path::new("/srv")], &[]);
        let step = rules(&[], &[Path::new("/")], &[]);
        let merged = settings.narrowed_by(step);
        assert!(merged.check(Path::new("/etc/x"), Access::Write).is_err());
        assert!(merged.check(Path::new("/srv/x"), Access::Write).is_ok());
    }
}
