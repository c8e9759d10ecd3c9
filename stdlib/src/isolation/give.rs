//! Giving what the daemon made to the sandbox user.

use std::path::Path;

/// Gives `root` and everything under it (links themselves, never what
/// they point to) to `(uid, gid)`; nothing when this process is not root.
/// Why it could not, naming the path.
pub fn give_tree(root: &Path, (uid, gid): (u32, u32)) -> Result<(), String> {
    if !nix::unistd::Uid::effective().is_root() {
        return Ok(());
    }
    let mut pending = vec![root.to_path_buf()];
    while let Some(path) = pending.pop() {
        nix::unistd::fchownat(
            nix::fcntl::AT_FDCWD,
            &path,
            Some(nix::unistd::Uid::from_raw(uid)),
            Some(nix::unistd::Gid::from_raw(gid)),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(|e| format!("cannot give {} to the sandbox user: {e}", path.display()))?;
        if path.is_dir()
            && !path.is_symlink()
            && let Ok(entries) = std::fs::read_dir(&path)
        {
            pending.extend(entries.flatten().map(|e| e.path()));
        }
    }
    Ok(())
}
