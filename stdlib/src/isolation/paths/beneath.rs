//! Opening the path of an `fs.*` call so that no link takes it out of the
//! allowed tree: the parent directory is opened with `openat2` and
//! `RESOLVE_BENEATH` from the allowed directory that holds it, its real
//! place is checked against the rules, a link in the last place is
//! followed by hand (and checked again), and every operation then names
//! the entry relative to that open directory, never following a link.

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, AtFlags, OFlag, OpenHow, ResolveFlag, open, openat2, readlinkat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstatat, mkdirat};
use opcode_vm::error::ActionError;

use super::{Access, PathRules, denied, normalize};

/// Links followed before giving up, as the kernel does.
const MAX_LINKS: usize = 40;

/// A path of a call, opened under the rules: the directory holding it and
/// its name there. The directory's real place was checked; the name is
/// not a link.
#[derive(Debug)]
pub struct Entry {
    /// The directory holding it (`O_PATH`).
    pub dir: OwnedFd,
    /// Its name in `dir` (`.` for `/`).
    pub name: OsString,
    /// Its real, absolute path.
    pub real: PathBuf,
    /// What the opening found there, without following a link (it looked
    /// to see whether the name is one): a stat of it, or why there is none.
    pub found: nix::Result<FileStat>,
}

impl Entry {
    /// A path naming the entry through the open directory, for the calls
    /// that take paths: the kernel resolves only the last name, and the
    /// entry is not a link.
    pub fn path(&self) -> PathBuf {
        use std::os::fd::AsRawFd;
        Path::new(&format!("/proc/self/fd/{}", self.dir.as_raw_fd())).join(&self.name)
    }

    /// Opens the entry itself, never through a link.
    pub fn open(&self, flags: OFlag, mode: Mode) -> nix::Result<OwnedFd> {
        let flags = flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        nix::fcntl::openat(&self.dir, self.name.as_os_str(), flags, mode)
    }
}

impl PathRules {
    /// Opens `path` (absolute) for `access` under these rules, or R0126.
    /// The opening checks the real place of what it opened; a failure is
    /// R0126 when the path, resolved as it stands, is refused (a missing
    /// path outside the allowed tree is refused, not "not found").
    pub fn entry(&self, path: &Path, access: Access) -> Result<Entry, ActionError> {
        self.open_entry(path, access)
            .map_err(|failure| match self.check(path, access) {
                Err(refused) => refused,
                Ok(_) => failure,
            })
    }

    fn open_entry(&self, path: &Path, access: Access) -> Result<Entry, ActionError> {
        let mut logical = normalize(path);
        for _ in 0..MAX_LINKS {
            let (dir, name, known) = self.parent_of(path, &logical, access)?;
            let real_dir = match known {
                Some(real_dir) => real_dir,
                None => real_path(&dir).map_err(|e| io_error(path, e))?,
            };
            let real = if name == "." {
                real_dir.clone()
            } else {
                real_dir.join(&name)
            };
            if let Some(why) = self.refusal(&real, access) {
                return Err(denied(path, &real, &why));
            }
            let found = fstatat(&dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW);
            let is_link = found.is_ok_and(|st| {
                SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK
            });
            if !is_link {
                return Ok(Entry {
                    dir,
                    name,
                    real,
                    found,
                });
            }
            let target = readlinkat(&dir, name.as_os_str()).map_err(|e| io_error(path, e))?;
            logical = normalize(&real_dir.join(target));
        }
        Err(denied(path, &logical, "behind too many links"))
    }

    /// Makes the missing directories above `path` (absolute), each inside
    /// the tree it is allowed in, owned like the one it is made in.
    pub fn create_parents(&self, path: &Path) -> Result<(), ActionError> {
        let logical = normalize(path);
        let mut missing = Vec::new();
        let mut dir = logical.parent().map(Path::to_path_buf);
        while let Some(current) = dir {
            match self.entry(&current, Access::Write) {
                Ok(entry) if entry.found.is_ok() => break,
                Ok(_) => {}
                Err(e) => return Err(e),
            }
            dir = current.parent().map(Path::to_path_buf);
            missing.push(current);
        }
        for dir in missing.into_iter().rev() {
            let entry = self.entry(&dir, Access::Write)?;
            match mkdirat(
                &entry.dir,
                entry.name.as_os_str(),
                Mode::from_bits_truncate(0o755),
            ) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(io_error(&dir, e)),
            }
            if let Ok(fd) = entry.open(OFlag::O_RDONLY | OFlag::O_DIRECTORY, Mode::empty()) {
                owned_like_parent(&entry.dir, &fd);
            }
        }
        Ok(())
    }

    /// The directory holding `logical`, opened beneath the allowed
    /// directory that holds it, the name in it, and its real path when
    /// the opening proved it: a directory reached through no link at all
    /// is where its (normal, absolute) path says.
    fn parent_of(
        &self,
        asked: &Path,
        logical: &Path,
        access: Access,
    ) -> Result<(OwnedFd, OsString, Option<PathBuf>), ActionError> {
        let directory = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let (Some(parent), Some(name)) = (logical.parent(), logical.file_name()) else {
            let root = open("/", directory, Mode::empty()).map_err(|e| io_error(asked, e))?;
            return Ok((root, OsString::from("."), Some(PathBuf::from("/"))));
        };
        let name = name.to_owned();
        if let Ok(dir) = open_without_links(parent, directory) {
            return Ok((dir, name, Some(parent.to_path_buf())));
        }
        let Some(root) = self.root_of(parent, access) else {
            // No list restricts the tree: resolve as usual, but no magic links.
            let how = OpenHow::new()
                .flags(directory)
                .resolve(ResolveFlag::RESOLVE_NO_MAGICLINKS);
            let dir = openat2(AT_FDCWD, parent, how).map_err(|e| io_error(asked, e))?;
            return Ok((dir, name, None));
        };
        let rest = parent.strip_prefix(&root).unwrap_or(Path::new(""));
        let root_dir =
            open(root.as_path(), directory, Mode::empty()).map_err(|e| io_error(asked, e))?;
        if rest.as_os_str().is_empty() {
            return Ok((root_dir, name, None));
        }
        let how = OpenHow::new()
            .flags(directory)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
        match openat2(root_dir.as_fd(), rest, how) {
            Ok(dir) => Ok((dir, name, None)),
            Err(Errno::EXDEV | Errno::ELOOP) => Err(denied(
                asked,
                logical,
                &format!("behind a link that leaves {}", root.display()),
            )),
            Err(e) => Err(io_error(asked, e)),
        }
    }

    /// The allowed directory (of the innermost rules that list any) that
    /// holds `dir`: the longest. `None` when no rules list directories.
    fn root_of(&self, dir: &Path, access: Access) -> Option<PathBuf> {
        let mut rules = Some(self);
        while let Some(current) = rules {
            if !(current.read.is_empty() && current.write.is_empty()) {
                let lists: Vec<&PathBuf> = match access {
                    Access::Write => current.write.iter().collect(),
                    Access::Read => current.read.iter().chain(&current.write).collect(),
                };
                // Not under any: the real path's check refuses it, or a
                // link from an allowed tree brought it here.
                return Some(
                    lists
                        .into_iter()
                        .filter(|root| dir.starts_with(root))
                        .max_by_key(|root| root.as_os_str().len())
                        .cloned()
                        .unwrap_or_else(|| dir.to_path_buf()),
                );
            }
            rules = current.outer.as_deref();
        }
        None
    }
}

/// `path` (absolute, normal) opened with `flags` if it is reached through
/// no link at all: then it is its own real path, known with one `openat2`
/// instead of a walk. `ENOENT` says the walk met a missing name before
/// any link (a link is refused with `ELOOP` where it stands).
pub(super) fn open_without_links(path: &Path, flags: OFlag) -> nix::Result<OwnedFd> {
    let how = OpenHow::new()
        .flags(flags)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    openat2(AT_FDCWD, path, how)
}

/// Where an open directory really is.
fn real_path(dir: &OwnedFd) -> nix::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", dir.as_raw_fd()))
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(0)))
}

/// Gives a new file or directory the owner of the directory it was made
/// in (a run's fresh workspace belongs to the sandbox user), when this
/// process is root and may.
pub fn owned_like_parent(parent: &OwnedFd, made: &impl AsFd) {
    if !nix::unistd::Uid::effective().is_root() {
        return;
    }
    if let Ok(st) = nix::sys::stat::fstat(parent)
        && st.st_uid != 0
    {
        let _ = nix::unistd::fchown(
            made,
            Some(nix::unistd::Uid::from_raw(st.st_uid)),
            Some(nix::unistd::Gid::from_raw(st.st_gid)),
        );
    }
}

fn io_error(path: &Path, e: Errno) -> ActionError {
    ActionError::execution(format!("cannot use {}: {}", path.display(), e.desc()))
}
