//! `fs.read`, `fs.write`, `fs.append`, `fs.delete`, `fs.list`, `fs.stat`, `fs.copy`, `fs.move`.

use opcode_vm::catalog::{ActionSpec, Ty};

use super::spec::action;

fn written() -> Ty {
    Ty::object([("path", Ty::String), ("size", Ty::Int)])
}

fn copied() -> Ty {
    Ty::object([
        ("src", Ty::String),
        ("dst", Ty::String),
        ("size", Ty::Int),
        ("is_dir", Ty::Bool),
    ])
}

/// Signatures.
pub fn specs() -> Vec<ActionSpec> {
    let entry = Ty::object([
        ("name", Ty::String),
        ("path", Ty::String),
        ("size", Ty::Int),
        ("modified_at", Ty::String),
        ("is_dir", Ty::Bool),
    ]);
    vec![
        action("fs.read", "Reads a file. With encoding `auto` (the default), binary content (a NUL byte in the first 8 KB) is returned base64-encoded.")
            .req("path", Ty::String, "file to read")
            .opt("encoding", Ty::one_of_strings(&["text", "base64", "auto"]), "text, base64 or auto (default)")
            .output(Ty::object([("path", Ty::String), ("content", Ty::String), ("encoding", Ty::String), ("size", Ty::Int)])),
        action("fs.write", "Writes a file, replacing it. Non-string content is written as JSON.")
            .req("path", Ty::String, "file to write")
            .req("content", Ty::Any, "what to write")
            .opt("create_dirs", Ty::Bool, "create missing parent directories (default false)")
            .opt("mode", Ty::Int, "permissions for a new file (default 0644 = 420)")
            .output(written()),
        action("fs.append", "Appends to a file, creating it if needed.")
            .req("path", Ty::String, "file to append to")
            .req("content", Ty::Any, "what to append")
            .output(written()),
        action("fs.delete", "Deletes a file, or a directory with `recursive`.")
            .req("path", Ty::String, "what to delete")
            .opt("recursive", Ty::Bool, "delete a directory and its contents (default false)")
            .output(Ty::object([("path", Ty::String), ("deleted", Ty::Bool)])),
        action("fs.list", "Lists a directory.")
            .req("path", Ty::String, "directory to list")
            .opt("pattern", Ty::String, "glob on entry names, such as *.json")
            .opt("recursive", Ty::Bool, "walk subdirectories (default false)")
            .output(Ty::object([("path", Ty::String), ("entries", Ty::array(entry))])),
        action("fs.stat", "Describes a file or directory.")
            .req("path", Ty::String, "file or directory")
            .output(Ty::object([
                ("path", Ty::String),
                ("size", Ty::Int),
                ("modified_at", Ty::String),
                ("is_dir", Ty::Bool),
                ("permissions", Ty::String),
            ])),
        action("fs.copy", "Copies a file or directory.")
            .req("src", Ty::String, "source")
            .req("dst", Ty::String, "destination")
            .opt("create_dirs", Ty::Bool, "create missing parent directories (default false)")
            .output(copied()),
        action("fs.move", "Moves a file or directory.")
            .req("src", Ty::String, "source")
            .req("dst", Ty::String, "destination")
            .opt("create_dirs", Ty::Bool, "create missing parent directories (default false)")
            .output(copied()),
    ]
}

/// Largest file `fs.read` returns.
#[cfg(feature = "runtime")]
const MAX_READ: u64 = 50 * 1024 * 1024;

/// Runs `fs.<name>`.
#[cfg(feature = "runtime")]
pub async fn run(
    name: &str,
    call: &crate::exec::Call,
    base: &std::path::Path,
    isolation: &crate::isolation::IsolationConfig,
) -> Result<serde_json::Value, opcode_vm::error::ActionError> {
    use std::os::unix::fs::PermissionsExt;

    use crate::isolation::paths::Access::{Read, Write};

    use base64::Engine;
    use opcode_vm::error::ActionError;
    use serde_json::{Value, json};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let io = |what: &str, path: &std::path::Path, e: std::io::Error| {
        ActionError::execution(format!("{what} {}: {e}", path.display()))
    };
    let rules = crate::isolation::Policy::of(isolation, call.isolation.as_ref(), base)?.fs;
    let resolve = |p: &str, access| {
        let path = if std::path::Path::new(p).is_absolute() {
            std::path::PathBuf::from(p)
        } else {
            base.join(p)
        };
        rules.check(&path, access)
    };
    let content_bytes = |call: &crate::exec::Call| -> Vec<u8> {
        match call.params.get("content") {
            Some(Value::String(s)) => s.clone().into_bytes(),
            Some(Value::Null) | None => Vec::new(),
            Some(other) => serde_json::to_vec_pretty(other).unwrap_or_default(),
        }
    };
    let create_parent = |path: &std::path::Path, wanted: bool| {
        let parent = path.parent().map(std::path::Path::to_path_buf);
        async move {
            if wanted && let Some(parent) = parent {
                tokio::fs::create_dir_all(&parent)
                    .await
                    .map_err(|e| io("cannot create", &parent, e))?;
            }
            Ok::<(), ActionError>(())
        }
    };
    match name {
        "read" => {
            let path = resolve(call.required("path")?, Read)?;
            let file = tokio::fs::File::open(&path)
                .await
                .map_err(|e| io("cannot read", &path, e))?;
            let mut bytes = Vec::new();
            file.take(MAX_READ)
                .read_to_end(&mut bytes)
                .await
                .map_err(|e| io("cannot read", &path, e))?;
            let encoding = match call.str("encoding").unwrap_or("auto") {
                "auto" if bytes.iter().take(8192).any(|b| *b == 0) => "base64",
                "auto" | "text" => "text",
                _ => "base64",
            };
            let content = if encoding == "text" {
                String::from_utf8_lossy(&bytes).into_owned()
            } else {
                base64::engine::general_purpose::STANDARD.encode(&bytes)
            };
            Ok(
                json!({"path": path.display().to_string(), "content": content, "encoding": encoding, "size": bytes.len()}),
            )
        }
        "write" => {
            let path = resolve(call.required("path")?, Write)?;
            create_parent(&path, call.flag("create_dirs", false)).await?;
            let bytes = content_bytes(call);
            let mut options = tokio::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            if let Some(mode) = call.params.get("mode").and_then(Value::as_u64) {
                options.mode(mode as u32);
            }
            let mut file = options
                .open(&path)
                .await
                .map_err(|e| io("cannot write", &path, e))?;
            file.write_all(&bytes)
                .await
                .map_err(|e| io("cannot write", &path, e))?;
            file.flush()
                .await
                .map_err(|e| io("cannot write", &path, e))?;
            Ok(json!({"path": path.display().to_string(), "size": bytes.len()}))
        }
        "append" => {
            let path = resolve(call.required("path")?, Write)?;
            let mut file = tokio::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(&path)
                .await
                .map_err(|e| io("cannot append to", &path, e))?;
            file.write_all(&content_bytes(call))
                .await
                .map_err(|e| io("cannot append to", &path, e))?;
            file.flush()
                .await
                .map_err(|e| io("cannot append to", &path, e))?;
            let size = tokio::fs::metadata(&path).await.map_or(0, |m| m.len());
            Ok(json!({"path": path.display().to_string(), "size": size}))
        }
        "delete" => {
            let path = resolve(call.required("path")?, Write)?;
            if call.flag("recursive", false) {
                match tokio::fs::remove_dir_all(&path).await {
                    Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
                        tokio::fs::remove_file(&path)
                            .await
                            .map_err(|e| io("cannot delete", &path, e))?;
                    }
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(io("cannot delete", &path, e));
                    }
                    _ => {}
                }
            } else {
                tokio::fs::remove_file(&path)
                    .await
                    .map_err(|e| io("cannot delete", &path, e))?;
            }
            Ok(json!({"path": path.display().to_string(), "deleted": true}))
        }
        "list" => {
            let path = resolve(call.required("path")?, Read)?;
            let pattern = match call.str("pattern") {
                Some(p) => Some(
                    glob::Pattern::new(p)
                        .map_err(|e| ActionError::validation(format!("invalid pattern: {e}")))?,
                ),
                None => None,
            };
            let mut entries = Vec::new();
            let mut dirs = vec![path.clone()];
            while let Some(dir) = dirs.pop() {
                let mut read = tokio::fs::read_dir(&dir)
                    .await
                    .map_err(|e| io("cannot list", &dir, e))?;
                while let Some(entry) = read
                    .next_entry()
                    .await
                    .map_err(|e| io("cannot list", &dir, e))?
                {
                    let meta = entry
                        .metadata()
                        .await
                        .map_err(|e| io("cannot stat", &entry.path(), e))?;
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if meta.is_dir() && call.flag("recursive", false) {
                        dirs.push(entry.path());
                    }
                    if pattern.as_ref().is_none_or(|p| p.matches(&name)) {
                        entries.push(json!({
                            "name": name,
                            "path": entry.path().display().to_string(),
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
        "stat" => {
            let path = resolve(call.required("path")?, Read)?;
            let meta = tokio::fs::metadata(&path)
                .await
                .map_err(|e| io("cannot stat", &path, e))?;
            Ok(json!({
                "path": path.display().to_string(),
                "size": meta.len(),
                "modified_at": modified(&meta),
                "is_dir": meta.is_dir(),
                "permissions": format!("{:04o}", meta.permissions().mode() & 0o7777),
            }))
        }
        "copy" | "move" => {
            let src = resolve(
                call.required("src")?,
                if name == "move" { Write } else { Read },
            )?;
            let dst = resolve(call.required("dst")?, Write)?;
            create_parent(&dst, call.flag("create_dirs", false)).await?;
            let meta = tokio::fs::metadata(&src)
                .await
                .map_err(|e| io("cannot read", &src, e))?;
            let size = if name == "move" && tokio::fs::rename(&src, &dst).await.is_ok() {
                tree_size(&dst).await
            } else {
                copy_tree(&src, &dst)
                    .await
                    .map_err(|e| io("cannot copy", &src, e))?;
                if name == "move" {
                    if meta.is_dir() {
                        tokio::fs::remove_dir_all(&src)
                            .await
                            .map_err(|e| io("cannot remove", &src, e))?;
                    } else {
                        tokio::fs::remove_file(&src)
                            .await
                            .map_err(|e| io("cannot remove", &src, e))?;
                    }
                }
                tree_size(&dst).await
            };
            Ok(
                json!({"src": src.display().to_string(), "dst": dst.display().to_string(), "size": size, "is_dir": meta.is_dir()}),
            )
        }
        _ => Err(super::unknown(call)),
    }
}

/// Modification time, RFC 3339 UTC.
#[cfg(feature = "runtime")]
fn modified(meta: &std::fs::Metadata) -> String {
    meta.modified()
        .map(|t| humantime::format_rfc3339_seconds(t).to_string())
        .unwrap_or_default()
}

/// Copies a file or a directory tree (file modes kept).
#[cfg(feature = "runtime")]
async fn copy_tree(src: &std::path::Path, dst: &std::path::Path) -> std::io::Result<()> {
    let mut stack = vec![(src.to_path_buf(), dst.to_path_buf())];
    while let Some((from, to)) = stack.pop() {
        if tokio::fs::metadata(&from).await?.is_dir() {
            tokio::fs::create_dir_all(&to).await?;
            let mut read = tokio::fs::read_dir(&from).await?;
            while let Some(entry) = read.next_entry().await? {
                stack.push((entry.path(), to.join(entry.file_name())));
            }
        } else {
            tokio::fs::copy(&from, &to).await?;
        }
    }
    Ok(())
}

/// Total size of the files under a path.
#[cfg(feature = "runtime")]
async fn tree_size(path: &std::path::Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![path.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(meta) = tokio::fs::metadata(&p).await else {
            continue;
        };
        if meta.is_dir() {
            if let Ok(mut read) = tokio::fs::read_dir(&p).await {
                while let Ok(Some(entry)) = read.next_entry().await {
                    stack.push(entry.path());
                }
            }
        } else {
            total += meta.len();
        }
    }
    total
}
