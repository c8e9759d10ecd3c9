//! The sandbox's view of the file system, built in stage 2: the host
//! read-only, a private `/tmp`, a `/dev` of harmless devices only, the
//! daemon's files and other runs' workspaces covered, and the workspace
//! itself bound back (writable unless the policy says not). `/proc` is
//! mounted by the init, inside the new pid namespace.
//!
//! Covers and binds are laid shallowest first ([`layers`]), so the deepest
//! rule decides what each path shows: a hidden path inside a bound one
//! (the daemon's database inside a granted home, wherever it lives: under
//! the private `/tmp` too) is covered after the bind brings it back, and
//! the workspace inside the covered root of workspaces is bound after the
//! cover.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, open};
use nix::mount::{MsFlags, mount};
use nix::sys::stat::Mode;

use super::Spec;

const NONE: Option<&str> = None;

/// The host devices a sandboxed command may use.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// Builds the view.
pub(super) fn build(spec: &Spec) -> Result<(), String> {
    mount(NONE, "/", NONE, MsFlags::MS_REC | MsFlags::MS_PRIVATE, NONE)
        .map_err(|e| format!("cannot make mounts private: {e}"))?;
    let workspace = match &spec.workspace {
        Some(ws) => Some((
            ws.as_path(),
            File::open(ws).map_err(|e| unreachable(spec, ws, &e))?,
        )),
        None => None,
    };
    let binds = spec
        .binds
        .iter()
        .map(|bind| {
            let handle = File::open(&bind.path).map_err(|e| unreachable(spec, &bind.path, &e))?;
            Ok((bind, handle))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let devices = device_handles()?;
    let host_mounts = mounts()?;
    read_only_host(&host_mounts)?;
    private_tmp(spec)?;
    private_dev(spec, &devices)?;
    let mut masks = Vec::new();
    let bound = workspace
        .iter()
        .map(|(ws, handle)| (*ws, handle, spec.writable))
        .chain(binds.iter().map(|(b, h)| (b.path.as_path(), h, b.writable)));
    for layer in layers(&spec.hidden, bound) {
        match layer {
            Layer::Cover(path) => {
                if hide(path, &devices)? {
                    masks.push(path.to_path_buf());
                }
            }
            Layer::Bind(path, handle, writable) => {
                bind_back(path, handle, writable, &host_mounts)?;
            }
        }
    }
    for dir in masks {
        remount(&dir, MsFlags::MS_RDONLY | MASKED)
            .map_err(|e| format!("cannot make the cover of {} read-only: {e}", dir.display()))?;
    }
    Ok(())
}

/// The error for a workspace the sandbox user cannot open.
fn unreachable(spec: &Spec, ws: &Path, e: &std::io::Error) -> String {
    format!(
        "the sandbox user (uid {}) cannot open {}: {e}; give that user access \
         (every parent directory must be searchable) or choose another workspace",
        spec.uid,
        ws.display()
    )
}

/// Flags of the empty file systems that cover hidden paths.
const MASKED: MsFlags = MsFlags::MS_NOSUID
    .union(MsFlags::MS_NODEV)
    .union(MsFlags::MS_NOEXEC);

/// `O_PATH` handles on the host devices kept, taken before `/dev` is covered.
fn device_handles() -> Result<Vec<(&'static str, OwnedFd)>, String> {
    let mut handles = Vec::new();
    for name in DEVICES {
        let path = Path::new("/dev").join(name);
        match open(&path, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty()) {
            Ok(fd) => handles.push((*name, fd)),
            Err(Errno::ENOENT | Errno::ENXIO) => {}
            Err(e) => return Err(format!("cannot open {}: {e}", path.display())),
        }
    }
    if !handles.iter().any(|(name, _)| *name == "null") {
        return Err("the host has no /dev/null".into());
    }
    Ok(handles)
}

/// A path naming an open handle, for mounting from it.
fn by_handle(fd: &impl AsRawFd) -> String {
    format!("/proc/self/fd/{}", fd.as_raw_fd())
}

/// Every host mount made read-only (keeping its per-mount flags). A mount
/// the sandbox user cannot reach is left: the command cannot reach it
/// either. `/proc` is replaced later.
fn read_only_host(host_mounts: &[(PathBuf, String)]) -> Result<(), String> {
    for (point, options) in host_mounts {
        if point.starts_with("/proc") {
            continue;
        }
        match remount(point, MsFlags::MS_RDONLY | kept_flags(options)) {
            Ok(()) | Err(Errno::EACCES | Errno::ENOENT) => {}
            Err(e) => {
                return Err(format!("cannot make {} read-only: {e}", point.display()));
            }
        }
    }
    Ok(())
}

/// Remounts the mount at `point` (bind semantics: its per-mount flags only).
fn remount(point: &Path, flags: MsFlags) -> nix::Result<()> {
    let flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | flags;
    mount(NONE, point, NONE, flags, NONE)
}

/// A tmpfs at `point`.
fn tmpfs(point: &str, flags: MsFlags, options: &str) -> Result<(), String> {
    mount(Some("tmpfs"), point, Some("tmpfs"), flags, Some(options))
        .map_err(|e| format!("cannot mount a private {point}: {e}"))
}

/// A private, empty `/tmp`.
fn private_tmp(spec: &Spec) -> Result<(), String> {
    let options = format!("size={},mode=1777", spec.tmp_size);
    tmpfs("/tmp", MsFlags::MS_NOSUID | MsFlags::MS_NODEV, &options)
}

/// A `/dev` holding only [`DEVICES`] (bound from the host), the usual
/// links, a private `/dev/shm` and, where the kernel allows, a private
/// `/dev/pts`; read-only but for `/dev/shm`.
fn private_dev(spec: &Spec, devices: &[(&'static str, OwnedFd)]) -> Result<(), String> {
    tmpfs(
        "/dev",
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        "size=64k,mode=0755",
    )?;
    let io = |what: &str, e: std::io::Error| format!("cannot set up /dev ({what}): {e}");
    for (name, handle) in devices {
        let node = Path::new("/dev").join(name);
        File::create(&node).map_err(|e| io(name, e))?;
        mount(
            Some(by_handle(handle).as_str()),
            &node,
            NONE,
            MsFlags::MS_BIND,
            NONE,
        )
        .map_err(|e| format!("cannot bind {}: {e}", node.display()))?;
    }
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(target, Path::new("/dev").join(link))
            .map_err(|e| io(link, e))?;
    }
    std::fs::create_dir("/dev/shm").map_err(|e| io("shm", e))?;
    let options = format!("size={},mode=1777", spec.tmp_size);
    tmpfs("/dev/shm", MsFlags::MS_NOSUID | MsFlags::MS_NODEV, &options)?;
    std::fs::create_dir("/dev/pts").map_err(|e| io("pts", e))?;
    let pts = mount(
        Some("devpts"),
        "/dev/pts",
        Some("devpts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    );
    if pts.is_ok() {
        std::os::unix::fs::symlink("pts/ptmx", "/dev/ptmx").map_err(|e| io("ptmx", e))?;
    }
    remount(
        Path::new("/dev"),
        MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
    )
    .map_err(|e| format!("cannot make /dev read-only: {e}"))
}

/// One mount of the view: a hidden path covered, or a kept path (opened
/// before anything was covered) bound back, writable or not.
#[derive(Debug, PartialEq)]
enum Layer<'a, H> {
    Cover(&'a Path),
    Bind(&'a Path, H, bool),
}

/// The covers and binds in the order they are laid: shallowest path
/// first, a cover before a bind of the same depth; so each path shows
/// what the deepest rule above it says.
fn layers<'a, H>(
    hidden: &'a [PathBuf],
    bound: impl Iterator<Item = (&'a Path, H, bool)>,
) -> Vec<Layer<'a, H>> {
    let mut layers: Vec<Layer<'a, H>> = hidden.iter().map(|p| Layer::Cover(p.as_path())).collect();
    layers.extend(bound.map(|(path, handle, writable)| Layer::Bind(path, handle, writable)));
    layers.sort_by_key(|layer| match layer {
        Layer::Cover(path) => (path.components().count(), 0),
        Layer::Bind(path, ..) => (path.components().count(), 1),
    });
    layers
}

/// Covers a hidden path if the view shows it: a directory with an empty
/// tmpfs (read-only once everything is laid), a file with `/dev/null`.
/// True when it covered a directory.
fn hide(path: &Path, devices: &[(&'static str, OwnedFd)]) -> Result<bool, String> {
    // Out of the sandbox user's reach, or absent from the view: nothing to see.
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(false);
    };
    let result = if meta.is_dir() {
        mount(
            Some("tmpfs"),
            path,
            Some("tmpfs"),
            MASKED,
            Some("size=64k,mode=0755"),
        )
    } else {
        let null = devices
            .iter()
            .find(|(name, _)| *name == "null")
            .map(|(_, fd)| by_handle(fd))
            .unwrap_or_default();
        mount(Some(null.as_str()), path, NONE, MsFlags::MS_BIND, NONE)
    };
    result.map_err(|e| format!("cannot hide {}: {e}", path.display()))?;
    Ok(meta.is_dir())
}

/// Binds the workspace, or another kept path (opened before anything
/// covered it), back at its path, writable or not; its mount point is made
/// where a cover hides it.
fn bind_back(
    ws: &Path,
    handle: &File,
    writable: bool,
    host_mounts: &[(PathBuf, String)],
) -> Result<(), String> {
    let made = if handle.metadata().is_ok_and(|m| m.is_dir()) {
        std::fs::create_dir_all(ws)
    } else {
        ws.parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(ws)
                    .map(drop)
            })
    };
    made.map_err(|e| format!("cannot make the mount point {}: {e}", ws.display()))?;
    let source = by_handle(handle);
    mount(
        Some(source.as_str()),
        ws,
        NONE,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        NONE,
    )
    .map_err(|e| format!("cannot mount the workspace {}: {e}", ws.display()))?;
    // The host mount holding it decides the flags a user namespace locks.
    let options = host_mounts
        .iter()
        .filter(|(point, _)| ws.starts_with(point))
        .max_by_key(|(point, _)| point.as_os_str().len())
        .map_or("", |(_, options)| options.as_str());
    let mut flags = kept_flags(options) | MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    if !writable {
        flags |= MsFlags::MS_RDONLY;
    }
    remount(ws, flags).map_err(|e| {
        format!(
            "cannot make the workspace {} {}: {e}",
            ws.display(),
            if writable { "writable" } else { "read-only" }
        )
    })
}

/// Mount points and their options, from `/proc/self/mountinfo`.
fn mounts() -> Result<Vec<(PathBuf, String)>, String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let mut points: Vec<(PathBuf, String)> = text
        .lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let point = fields.nth(4)?;
            let options = fields.next()?;
            Some((PathBuf::from(unescape(point)), options.to_owned()))
        })
        .collect();
    points.sort();
    points.dedup_by(|a, b| a.0 == b.0);
    Ok(points)
}

/// Mountinfo escapes spaces and such as `\040`.
fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && let Ok(n) = u8::from_str_radix(&text[i + 1..i + 4], 8)
        {
            out.push(n);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The per-mount flags a remount must keep (a user namespace locks them).
fn kept_flags(options: &str) -> MsFlags {
    options.split(',').fold(MsFlags::empty(), |flags, option| {
        flags
            | match option {
                "nosuid" => MsFlags::MS_NOSUID,
                "nodev" => MsFlags::MS_NODEV,
                "noexec" => MsFlags::MS_NOEXEC,
                "noatime" => MsFlags::MS_NOATIME,
                "nodiratime" => MsFlags::MS_NODIRATIME,
                "relatime" => MsFlags::MS_RELATIME,
                _ => MsFlags::empty(),
            }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_mountinfo_escapes_and_flags() {
        assert_eq!(unescape(r"/mnt/with\040space"), "/mnt/with space");
        let flags = kept_flags("rw,nosuid,nodev,relatime");
        assert!(flags.contains(MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_RELATIME));
        assert!(!flags.contains(MsFlags::MS_NOEXEC));
    }

    /// The daemon's home granted to a step (its database inside, the
    /// root of workspaces inside, the step's own workspace inside that):
    /// the database and the root are covered after the home is bound back,
    /// the workspace bound after the root is covered.
    #[test]
    fn the_deepest_rule_is_laid_last() {
        let hidden = [
            PathBuf::from("/tmp/home/.opcode/opcode.db"),
            PathBuf::from("/tmp/home/workspaces"),
            PathBuf::from("/var/x"),
        ];
        let bound = [
            (Path::new("/tmp/home/workspaces/r1"), 'w', true),
            (Path::new("/tmp/home"), 'h', true),
        ];
        let order: Vec<String> = layers(&hidden, bound.into_iter())
            .iter()
            .map(|layer| match layer {
                Layer::Cover(path) => format!("cover {}", path.display()),
                Layer::Bind(path, ..) => format!("bind {}", path.display()),
            })
            .collect();
        assert_eq!(
            order,
            [
                "cover /var/x",
                "bind /tmp/home",
                "cover /tmp/home/workspaces",
                "cover /tmp/home/.opcode/opcode.db",
                "bind /tmp/home/workspaces/r1",
            ]
        );
    }
}
