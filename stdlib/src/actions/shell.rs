//! `shell.exec`.

use opcode_vm::catalog::{ActionSpec, Ty};

use super::spec::action;

/// Signatures.
pub fn specs() -> Vec<ActionSpec> {
    vec![
        action("shell.exec", "Runs a program. A non-zero exit code is data (`exit_code`), not a failure, unless `fail_on_nonzero` is set. Standard output that is valid JSON is parsed into `stdout`; `stdout_raw` keeps the text.")
            .req("command", Ty::String, "program to run (or shell command line with `shell: true`)")
            .opt("args", Ty::array(Ty::Any), "arguments; non-strings are passed as JSON text")
            .opt("env", Ty::map(Ty::Any), "environment variables for the process")
            .opt("cwd", Ty::String, "working directory")
            .opt("stdin", Ty::Any, "standard input; non-strings are passed as JSON")
            .opt("timeout", Ty::Duration, "kill the process after this long (default 30s)")
            .opt("shell", Ty::Bool, "run through /bin/sh -c (default false)")
            .opt("fail_on_nonzero", Ty::Bool, "fail the step on a non-zero exit code (default false)")
            .output(Ty::object([
                ("stdout", Ty::Any),
                ("stdout_raw", Ty::String),
                ("stderr", Ty::String),
                ("exit_code", Ty::Int),
                ("duration_ms", Ty::Int),
                ("killed", Ty::Bool),
                ("truncated", Ty::Bool),
            ])),
    ]
}

/// Largest amount of each output stream kept.
#[cfg(feature = "runtime")]
const MAX_OUTPUT: usize = 10 * 1024 * 1024;

/// Reads a stream to its end, keeping at most [`MAX_OUTPUT`] bytes.
#[cfg(feature = "runtime")]
async fn drain(stream: Option<impl tokio::io::AsyncRead + Unpin>) -> (Vec<u8>, bool) {
    let Some(mut stream) = stream else {
        return (Vec::new(), false);
    };
    let mut kept = Vec::new();
    let mut truncated = false;
    let mut buf = [0u8; 16 * 1024];
    loop {
        match tokio::io::AsyncReadExt::read(&mut stream, &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = MAX_OUTPUT.saturating_sub(kept.len());
                if n > room {
                    truncated = true;
                }
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    (kept, truncated)
}

/// Runs `shell.exec`.
#[cfg(feature = "runtime")]
pub async fn run(
    call: &crate::exec::Call,
    base: &std::path::Path,
) -> Result<serde_json::Value, opcode_vm::error::ActionError> {
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    use opcode_vm::error::ActionError;
    use serde_json::{Value, json};
    use tokio::io::AsyncWriteExt;

    let command = call.required("command")?;
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let args: Vec<String> = call
        .params
        .get("args")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(text).collect())
        .unwrap_or_default();
    let mut cmd = if call.flag("shell", false) {
        let line = std::iter::once(command.to_owned())
            .chain(args)
            .collect::<Vec<_>>()
            .join(" ");
        let mut c = tokio::process::Command::new("/bin/sh");
        c.arg("-c").arg(line);
        c
    } else {
        let mut c = tokio::process::Command::new(command);
        c.args(&args);
        c
    };
    let cwd = match call.str("cwd") {
        Some(dir) if std::path::Path::new(dir).is_absolute() => std::path::PathBuf::from(dir),
        Some(dir) => base.join(dir),
        None => base.to_path_buf(),
    };
    cmd.current_dir(&cwd);
    if let Some(Value::Object(env)) = call.params.get("env") {
        for (k, v) in env {
            cmd.env(k, text(v));
        }
    }
    // Its own process group, so a timeout kills the whole tree.
    cmd.process_group(0);
    cmd.kill_on_drop(true);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| {
        ActionError::execution(format!(
            "cannot start `{command}` in {}: {e}",
            cwd.display()
        ))
    })?;
    let pid = child.id();
    let stdin_data = match call.params.get("stdin") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone().into_bytes()),
        Some(other) => Some(other.to_string().into_bytes()),
    };
    let mut stdin = child.stdin.take();
    let feed = async move {
        if let (Some(pipe), Some(data)) = (stdin.as_mut(), stdin_data) {
            let _ = pipe.write_all(&data).await;
        }
        drop(stdin);
    };
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let timeout = call.duration("timeout", Duration::from_secs(30));
    let work = async {
        let ((out, out_cut), (err, err_cut), ()) = tokio::join!(drain(stdout), drain(stderr), feed);
        let status = child.wait().await;
        (out, out_cut, err, err_cut, status)
    };
    let (out, out_cut, err, err_cut, status, killed) =
        if let Ok((out, out_cut, err, err_cut, status)) =
            Box::pin(tokio::time::timeout(timeout, work)).await
        {
            (out, out_cut, err, err_cut, status.ok(), false)
        } else {
            if let Some(pid) = pid {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            (
                Vec::new(),
                false,
                format!("killed after {}ms", timeout.as_millis()).into_bytes(),
                false,
                None,
                true,
            )
        };
    let exit_code = status.and_then(|s| s.code()).unwrap_or(-1);
    let stdout_raw = String::from_utf8_lossy(&out).into_owned();
    let parsed = serde_json::from_str::<Value>(stdout_raw.trim())
        .ok()
        .filter(|_| !stdout_raw.trim().is_empty());
    let output = json!({
        "stdout": parsed.unwrap_or_else(|| Value::String(stdout_raw.clone())),
        "stdout_raw": stdout_raw,
        "stderr": String::from_utf8_lossy(&err),
        "exit_code": exit_code,
        "duration_ms": started.elapsed().as_millis() as u64,
        "killed": killed,
        "truncated": out_cut || err_cut,
    });
    if call.flag("fail_on_nonzero", false) && exit_code != 0 {
        return Err(
            ActionError::execution(format!("`{command}` exited with code {exit_code}"))
                .with_details(output),
        );
    }
    Ok(output)
}
