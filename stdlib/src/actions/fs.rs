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
        action("fs.read", "Reads a file. With encoding `auto` (the default), binary content (a NUL byte in the first 8 KB) is returned base64-encoded. At most its first 50 MiB are read: `truncated` says when the file is longer, `file_size` is its whole size and `size` what was read.")
            .req("path", Ty::String, "file to read")
            .opt("encoding", Ty::one_of_strings(&["text", "base64", "auto"]), "text, base64 or auto (default)")
            .reads_only()
            .output(Ty::object([("path", Ty::String), ("content", Ty::String), ("encoding", Ty::String), ("size", Ty::Int), ("file_size", Ty::Int), ("truncated", Ty::Bool)])),
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
            .reads_only()
            .output(Ty::object([("path", Ty::String), ("entries", Ty::array(entry))])),
        action("fs.stat", "Describes a file or directory.")
            .req("path", Ty::String, "file or directory")
            .reads_only()
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

#[cfg(feature = "runtime")]
mod ops;

/// Runs `fs.<name>` (on a blocking thread: every path is opened by hand;
/// `fs.stat`, a few metadata calls, and `fs.read` of a small regular file
/// in place: a hop to the blocking pool would cost more than the call).
#[cfg(feature = "runtime")]
pub async fn run(
    name: &str,
    call: &crate::call::Call,
    base: &std::path::Path,
    isolation: &crate::isolation::IsolationConfig,
) -> Result<serde_json::Value, opcode_vm::error::ActionError> {
    let rules = crate::isolation::Policy::of(isolation, call, base)?.fs;
    if name == "stat" {
        return ops::run(name, call, base, &rules);
    }
    if name == "read"
        && let Some(read) = ops::read_if_small(call, base, &rules)
    {
        return read;
    }
    let (name, call, base) = (name.to_owned(), call.clone(), base.to_path_buf());
    tokio::task::spawn_blocking(move || ops::run(&name, &call, &base, &rules))
        .await
        .unwrap_or_else(|e| {
            Err(opcode_vm::error::ActionError::execution(format!(
                "the fs action stopped: {e}"
            )))
        })
}
