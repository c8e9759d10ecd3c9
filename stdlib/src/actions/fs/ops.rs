//! The `fs.*` operations. Every path is opened under the call's rules
//! ([`PathRules::entry`]): through its parent directory, opened without a
//! link taking it out of the allowed tree, and then never through a link.
//! Directories are walked through open handles; links inside a tree are
//! listed and copied as links, never followed.

use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata};
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use base64::Engine;
use nix::errno::Errno;
use nix::fcntl::{OFlag, renameat};
use nix::sys::stat::{Mode, mkdirat};
use nix::unistd::{UnlinkatFlags, unlinkat};
use opcode_vm::error::ActionError;
use serde_json::{Value, json};

use crate::call::Call;
use crate::isolation::paths::Access::{Read as Reading, Write as Writing};
use crate::isolation::paths::beneath::owned_like_parent;
use crate::isolation::paths::{Entry, PathRules};

/// Largest file `fs.read` returns.
const MAX_READ: u64 = 50 * 1024 * 1024;

/// Largest file `fs.read` reads where it is called rather than on a
/// blocking thread.
const IN_PLACE_READ: u64 = 64 * 1024;

/// Runs `fs.<name>` for `call`; relative paths resolve against `base`.
pub fn run(name: &str, call: &Call, base: &Path, rules: &PathRules) -> Result<Value, ActionError> {
    let path_of = |key: &str| path_param(call, key, base);
    match name {
        "read" => read(call, &path_of("path")?, rules),
        "write" => write(call, &path_of("path")?, rules, false),
        "append" => write(call, &path_of("path")?, rules, true),
        "delete" => delete(call, &path_of("path")?, rules),
        "list" => list(call, &path_of("path")?, rules),
        "stat" => stat(&path_of("path")?, rules),
        "copy" | "move" => copy_or_move(
            name == "move",
            call,
            &path_of("src")?,
            &path_of("dst")?,
            rules,
        ),
        _ => Err(super::super::unknown(call)),
    }
}

/// `fs.read` of a regular file of at most 64 KiB, cheap enough to do
/// where it is called; `None` when the path is anything else (or cannot
/// be opened), for [`run`] on a blocking thread. Opened without blocking,
/// so that a FIFO put in its place meanwhile cannot hold the caller.
pub fn read_if_small(
    call: &Call,
    base: &Path,
    rules: &PathRules,
) -> Option<Result<Value, ActionError>> {
    let path = match path_param(call, "path", base) {
        Ok(path) => path,
        Err(e) => return Some(Err(e)),
    };
    let entry = match rules.entry(&path, Reading) {
        Ok(entry) => entry,
        Err(e) => return Some(Err(e)),
    };
    let fd = entry
        .open(OFlag::O_RDONLY | OFlag::O_NONBLOCK, Mode::empty())
        .ok()?;
    let mut file = File::from(fd);
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > IN_PLACE_READ {
        return None;
    }
    match read_at_most(&mut file, IN_PLACE_READ) {
        Ok((_, true)) | Err(_) => None,
        Ok((bytes, false)) => Some(Ok(contents(call, &path, bytes, false, meta.len()))),
    }
}

/// The path in the parameter `key`; a relative one resolves against `base`.
fn path_param(call: &Call, key: &str, base: &Path) -> Result<PathBuf, ActionError> {
    let given = Path::new(call.required(key)?);
    Ok(if given.is_absolute() {
        given.to_path_buf()
    } else {
        base.join(given)
    })
}

fn io(what: &str, path: &Path, e: impl std::fmt::Display) -> ActionError {
    ActionError::execution(format!("{what} {}: {e}", path.display()))
}

fn errno(what: &str, path: &Path, e: Errno) -> ActionError {
    io(what, path, e.desc())
}

fn read(call: &Call, path: &Path, rules: &PathRules) -> Result<Value, ActionError> {
    let entry = rules.entry(path, Reading)?;
    let fd = entry
        .open(OFlag::O_RDONLY, Mode::empty())
        .map_err(|e| errno("cannot read", path, e))?;
    let mut file = File::from(fd);
    let file_size = file.metadata().map(|m| m.len()).unwrap_or_default();
    let (bytes, truncated) =
        read_at_most(&mut file, MAX_READ).map_err(|e| io("cannot read", path, e))?;
    Ok(contents(call, path, bytes, truncated, file_size))
}

/// `fs.read`'s answer: `bytes` read of `path`, text or base64 as asked.
fn contents(call: &Call, path: &Path, bytes: Vec<u8>, truncated: bool, file_size: u64) -> Value {
    let encoding = match call.str("encoding").unwrap_or("auto") {
        "auto" if bytes.iter().take(8192).any(|b| *b == 0) => "base64",
        "auto" | "text" => "text",
        _ => "base64",
    };
    let size = bytes.len();
    let content = if encoding == "text" {
        // Valid UTF-8 (the usual case) becomes the string without a copy.
        String::from_utf8(bytes)
            .unwrap_or_else(|invalid| String::from_utf8_lossy(invalid.as_bytes()).into_owned())
    } else {
        base64::engine::general_purpose::STANDARD.encode(&bytes)
    };
    json!({"path": path.display().to_string(), "content": content, "encoding": encoding,
           "size": size, "file_size": file_size.max(size as u64), "truncated": truncated})
}

/// The first `cap` bytes of `reader`, and whether more were left (one more
/// byte is there: a size read before may be stale).
fn read_at_most(reader: &mut impl Read, cap: u64) -> std::io::Result<(Vec<u8>, bool)> {
    let mut bytes = Vec::new();
    reader.take(cap).read_to_end(&mut bytes)?;
    let more = bytes.len() as u64 == cap && reader.read(&mut [0u8])? > 0;
    Ok((bytes, more))
}

/// What `fs.write` and `fs.append` write: text as is, anything else as JSON.
fn content(call: &Call) -> Vec<u8> {
    match call.params.get("content") {
        Some(Value::String(s)) => s.clone().into_bytes(),
        Some(Value::Null) | None => Vec::new(),
        Some(other) => serde_json::to_vec_pretty(other).unwrap_or_default(),
    }
}

fn write(call: &Call, path: &Path, rules: &PathRules, append: bool) -> Result<Value, ActionError> {
    let what = if append {
        "cannot append to"
    } else {
        "cannot write"
    };
    if !append && call.flag("create_dirs", false) {
        rules.create_parents(path)?;
    }
    let entry = rules.entry(path, Writing)?;
    let existed = entry.found.is_ok();
    let mode = call
        .params
        .get("mode")
        .and_then(Value::as_u64)
        .map_or(0o644, |m| m as u32);
    let flags = OFlag::O_WRONLY
        | OFlag::O_CREAT
        | if append {
            OFlag::O_APPEND
        } else {
            OFlag::O_TRUNC
        };
    let fd = entry
        .open(flags, Mode::from_bits_truncate(mode))
        .map_err(|e| errno(what, path, e))?;
    if !existed {
        owned_like_parent(&entry.dir, &fd);
    }
    let bytes = content(call);
    let mut file = File::from(fd);
    file.write_all(&bytes).map_err(|e| io(what, path, e))?;
    file.flush().map_err(|e| io(what, path, e))?;
    let size = if append {
        file.metadata().map_or(0, |m| m.len())
    } else {
        bytes.len() as u64
    };
    Ok(json!({"path": path.display().to_string(), "size": size}))
}

fn delete(call: &Call, path: &Path, rules: &PathRules) -> Result<Value, ActionError> {
    let entry = rules.entry(path, Writing)?;
    let recursive = call.flag("recursive", false);
    let is_dir = std::fs::symlink_metadata(entry.path()).map(|m| m.is_dir());
    match is_dir {
        Err(e) if recursive && e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("cannot delete", path, e)),
        Ok(true) if recursive => {
            std::fs::remove_dir_all(entry.path()).map_err(|e| io("cannot delete", path, e))?;
        }
        Ok(true) => return Err(io("cannot delete", path, "Is a directory (set recursive)")),
        Ok(false) => unlinkat(
            &entry.dir,
            entry.name.as_os_str(),
            UnlinkatFlags::NoRemoveDir,
        )
        .map_err(|e| errno("cannot delete", path, e))?,
    }
    Ok(json!({"path": path.display().to_string(), "deleted": true}))
}

/// An open directory's children, through the handle.
fn children(dir: &impl AsRawFd, path: &Path) -> Result<Vec<std::fs::DirEntry>, ActionError> {
    let handle = format!("/proc/self/fd/{}", dir.as_raw_fd());
    std::fs::read_dir(handle)
        .and_then(Iterator::collect)
        .map_err(|e| io("cannot list", path, e))
}

/// Opens `name` in `dir` as a directory, never through a link.
fn open_dir(dir: &impl AsFd, name: &OsStr) -> nix::Result<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    nix::fcntl::openat(dir, name, flags, Mode::empty())
}

fn list(call: &Call, path: &Path, rules: &PathRules) -> Result<Value, ActionError> {
    let pattern = match call.str("pattern") {
        Some(p) => Some(
            glob::Pattern::new(p)
                .map_err(|e| ActionError::validation(format!("invalid pattern: {e}")))?,
        ),
        None => None,
    };
    let recursive = call.flag("recursive", false);
    let entry = rules.entry(path, Reading)?;
    let top = open_dir(&entry.dir, &entry.name).map_err(|e| errno("cannot list", path, e))?;
    let mut entries = Vec::new();
    let mut dirs = vec![(top, path.to_path_buf(), entry.real.clone())];
    while let Some((dir, shown, real)) = dirs.pop() {
        for child in children(&dir, &shown)? {
            let meta = child.metadata().map_err(|e| io("cannot stat", &shown, e))?;
            let name = child.file_name();
            let (child_shown, child_real) = (shown.join(&name), real.join(&name));
            // A denied directory inside an allowed one is not walked.
            if meta.is_dir() && recursive && rules.check(&child_real, Reading).is_ok() {
                let sub =
                    open_dir(&dir, &name).map_err(|e| errno("cannot list", &child_shown, e))?;
                dirs.push((sub, child_shown.clone(), child_real));
            }
            let name = name.to_string_lossy().into_owned();
            if pattern.as_ref().is_none_or(|p| p.matches(&name)) {
                entries.push(json!({
                    "name": name,
                    "path": child_shown.display().to_string(),
                    "size": meta.len(),
                    "modified_at": modified(&meta),
                    "is_dir": meta.is_dir(),
                }));
            }
        }
    }
    entries.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
    Ok(json!({"path": path.display().to_string(), "entries": entries}))
}

fn stat(path: &Path, rules: &PathRules) -> Result<Value, ActionError> {
    let entry = rules.entry(path, Reading)?;
    // The opening's own look at the entry (through the open directory, not
    // following a link): naming it by its /proc path would make the kernel
    // walk /proc, and a second look would be a second system call.
    let st = entry.found.map_err(|e| errno("cannot stat", path, e))?;
    let mode = st.st_mode;
    let modified = u64::try_from(st.st_mtime).map_or_else(
        |_| String::new(),
        |secs| rfc3339(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs)),
    );
    Ok(json!({
        "path": path.display().to_string(),
        "size": st.st_size,
        "modified_at": modified,
        "is_dir": mode & libc::S_IFMT == libc::S_IFDIR,
        "permissions": format!("{:04o}", mode & 0o7777),
    }))
}

fn copy_or_move(
    moving: bool,
    call: &Call,
    src: &Path,
    dst: &Path,
    rules: &PathRules,
) -> Result<Value, ActionError> {
    let from = rules.entry(src, if moving { Writing } else { Reading })?;
    if call.flag("create_dirs", false) {
        rules.create_parents(dst)?;
    }
    let to = rules.entry(dst, Writing)?;
    let meta = std::fs::symlink_metadata(from.path()).map_err(|e| io("cannot read", src, e))?;
    let renamed = moving
        && renameat(
            &from.dir,
            from.name.as_os_str(),
            &to.dir,
            to.name.as_os_str(),
        )
        .is_ok();
    if !renamed {
        copy_tree(&from.dir, &from.name, &to.dir, &to.name)
            .map_err(|e| io("cannot copy", src, e))?;
        if moving {
            if meta.is_dir() {
                std::fs::remove_dir_all(from.path()).map_err(|e| io("cannot remove", src, e))?;
            } else {
                unlinkat(&from.dir, from.name.as_os_str(), UnlinkatFlags::NoRemoveDir)
                    .map_err(|e| errno("cannot remove", src, e))?;
            }
        }
    }
    Ok(json!({
        "src": src.display().to_string(),
        "dst": dst.display().to_string(),
        "size": tree_size(&to),
        "is_dir": meta.is_dir(),
    }))
}

/// Copies `name` in `from` to `to_name` in `to`: files with their mode,
/// directories walked by handle, links as links.
fn copy_tree(from: &OwnedFd, name: &OsStr, to: &OwnedFd, to_name: &OsStr) -> std::io::Result<()> {
    let source = Path::new(&format!("/proc/self/fd/{}", from.as_raw_fd())).join(name);
    let meta = std::fs::symlink_metadata(&source)?;
    let kind = meta.file_type();
    if kind.is_symlink() {
        let target = nix::fcntl::readlinkat(from, name)?;
        return Ok(nix::unistd::symlinkat(target.as_os_str(), to, to_name)?);
    }
    if kind.is_dir() {
        match mkdirat(to, to_name, Mode::from_bits_truncate(meta.mode())) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => return Err(e.into()),
        }
        let (src_dir, dst_dir) = (open_dir(from, name)?, open_dir(to, to_name)?);
        owned_like_parent(to, &dst_dir);
        let handle = format!("/proc/self/fd/{}", src_dir.as_raw_fd());
        for child in std::fs::read_dir(handle)? {
            let child: OsString = child?.file_name();
            copy_tree(&src_dir, &child, &dst_dir, &child)?;
        }
        return Ok(());
    }
    if !kind.is_file()
        && (kind.is_fifo() || kind.is_socket() || kind.is_block_device() || kind.is_char_device())
    {
        return Err(std::io::Error::other(
            "only files, directories and links are copied",
        ));
    }
    let read = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut input = File::from(nix::fcntl::openat(from, name, read, Mode::empty())?);
    let create =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_TRUNC | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let output = nix::fcntl::openat(to, to_name, create, Mode::from_bits_truncate(meta.mode()))?;
    owned_like_parent(to, &output);
    std::io::copy(&mut input, &mut File::from(output))?;
    Ok(())
}

/// Total size of the files under an entry (links not followed).
fn tree_size(entry: &Entry) -> u64 {
    fn walk(path: &Path) -> u64 {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return 0;
        };
        if !meta.is_dir() {
            return if meta.is_file() { meta.len() } else { 0 };
        }
        std::fs::read_dir(path).map_or(0, |read| {
            read.flatten().map(|child| walk(&child.path())).sum()
        })
    }
    walk(&entry.path())
}

/// Modification time, RFC 3339 UTC.
fn modified(meta: &Metadata) -> String {
    meta.modified().map(rfc3339).unwrap_or_default()
}

/// A file time as RFC 3339 UTC text, to the second.
fn rfc3339(at: std::time::SystemTime) -> String {
    humantime::format_rfc3339_seconds(at).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_over_the_cap_says_it_was_cut() {
        let (bytes, cut) = read_at_most(&mut &b"abcdef"[..], 4).unwrap();
        assert_eq!((bytes.as_slice(), cut), (&b"abcd"[..], true));
        let (bytes, cut) = read_at_most(&mut &b"abcd"[..], 4).unwrap();
        assert_eq!((bytes.as_slice(), cut), (&b"abcd"[..], false));
    }

    #[test]
    fn only_small_regular_files_are_read_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let rules = PathRules::default();
        let read = |name: &str| Call {
            action: "fs.read".into(),
            params: json!({"path": name}),
            ..Call::default()
        };
        std::fs::write(dir.path().join("small"), "hello").unwrap();
        let in_place = read_if_small(&read("small"), dir.path(), &rules)
            .unwrap()
            .unwrap();
        let blocking = run("read", &read("small"), dir.path(), &rules).unwrap();
        assert_eq!(
            (in_place["content"].clone(), &in_place),
            (json!("hello"), &blocking)
        );
        std::fs::write(dir.path().join("big"), vec![b'x'; 65 * 1024]).unwrap();
        assert!(read_if_small(&read("big"), dir.path(), &rules).is_none());
        // A FIFO is neither opened with a wait nor read here.
        nix::unistd::mkfifo(&dir.path().join("fifo"), Mode::from_bits_truncate(0o600)).unwrap();
        assert!(read_if_small(&read("fifo"), dir.path(), &rules).is_none());
        // A refusal is the answer, not a reason to try again elsewhere.
        let denied: PathRules = serde_json::from_value(json!({"deny": [dir.path()]})).unwrap();
        let denied = denied.absolute(Path::new("/"));
        let refused = read_if_small(&read("small"), dir.path(), &denied).unwrap();
        assert_eq!(refused.unwrap_err().code, opcode_vm::codes::R0126.id);
    }

    #[test]
    fn a_stat_describes_what_its_opening_found_and_follows_links_only_inside() {
        let dir = tempfile::tempdir().unwrap();
        let (inside, outside) = (dir.path().join("in"), dir.path().join("out"));
        std::fs::create_dir_all(inside.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(inside.join("file"), "hello").unwrap();
        std::fs::write(outside.join("secret"), "no").unwrap();
        std::os::unix::fs::symlink(inside.join("file"), inside.join("near")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), inside.join("far")).unwrap();
        let rules: PathRules = serde_json::from_value(json!({"read": [&inside]})).unwrap();
        let rules = rules.absolute(Path::new("/"));
        let file = stat(&inside.join("file"), &rules).unwrap();
        assert_eq!((&file["size"], &file["is_dir"]), (&json!(5), &json!(false)));
        assert_eq!(
            stat(&inside.join("sub"), &rules).unwrap()["is_dir"],
            json!(true)
        );
        // A link inside is described as what it points to.
        assert_eq!(
            stat(&inside.join("near"), &rules).unwrap()["size"],
            json!(5)
        );
        let far = stat(&inside.join("far"), &rules).unwrap_err();
        assert_eq!(far.code, opcode_vm::codes::R0126.id);
        let missing = stat(&inside.join("none"), &rules).unwrap_err();
        assert!(
            missing.message.contains("cannot stat"),
            "{}",
            missing.message
        );
    }
}
