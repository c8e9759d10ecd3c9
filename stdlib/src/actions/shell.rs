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
                ("dropped_bytes", Ty::object([("stdout", Ty::Int), ("stderr", Ty::Int)])),
                ("isolated", Ty::Bool),
                ("limits_hit", Ty::object([("memory", Ty::Bool), ("pids", Ty::Bool)])),
            ])),
    ]
}

/// Reads a stream to its end, keeping at most `cap` bytes; returns them
/// and how many were dropped.
#[cfg(feature = "runtime")]
async fn drain(stream: Option<impl tokio::io::AsyncRead + Unpin>, cap: u64) -> (Vec<u8>, u64) {
    let Some(mut stream) = stream else {
        return (Vec::new(), 0);
    };
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let mut kept = Vec::new();
    let mut dropped = 0u64;
    let mut buf = [0u8; 16 * 1024];
    loop {
        match tokio::io::AsyncReadExt::read(&mut stream, &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                dropped += n.saturating_sub(room) as u64;
            }
        }
    }
    (kept, dropped)
}

/// The program, its arguments, environment and directory of a call.
#[cfg(feature = "runtime")]
struct Invocation {
    program: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    cwd: std::path::PathBuf,
}

#[cfg(feature = "runtime")]
fn invocation(
    call: &crate::call::Call,
    base: &std::path::Path,
) -> Result<Invocation, opcode_vm::error::ActionError> {
    use serde_json::Value;

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
    let (program, args) = if call.flag("shell", false) {
        let line = std::iter::once(command.to_owned())
            .chain(args)
            .collect::<Vec<_>>()
            .join(" ");
        ("/bin/sh".to_owned(), vec!["-c".to_owned(), line])
    } else {
        (command.to_owned(), args)
    };
    let cwd = match call.str("cwd") {
        Some(dir) if std::path::Path::new(dir).is_absolute() => std::path::PathBuf::from(dir),
        Some(dir) => base.join(dir),
        None => base.to_path_buf(),
    };
    let env = match call.params.get("env") {
        Some(Value::Object(env)) => env.iter().map(|(k, v)| (k.clone(), text(v))).collect(),
        _ => Vec::new(),
    };
    Ok(Invocation {
        program,
        args,
        env,
        cwd,
    })
}

/// Runs `shell.exec`: in a sandbox when the call's isolation policy says so.
#[cfg(feature = "runtime")]
pub async fn run(
    call: &crate::call::Call,
    base: &std::path::Path,
    isolation: &crate::isolation::IsolationConfig,
) -> Result<serde_json::Value, opcode_vm::error::ActionError> {
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    use opcode_vm::error::ActionError;
    use serde_json::{Value, json};
    use tokio::io::AsyncWriteExt;

    use crate::isolation::{Policy, sandbox, spawn, tether};

    let mut policy = Policy::of(isolation, call, base)?;
    // An isolated process starts in its workspace (a relative `cwd` is in it).
    let start = match &policy.workspace {
        Some(ws) if policy.enabled => ws.clone(),
        _ => base.to_path_buf(),
    };
    let inv = invocation(call, &start)?;
    // Without a workspace, the working directory is the workspace.
    policy.workspace.get_or_insert_with(|| inv.cwd.clone());
    if policy.enabled
        && let Some(ws) = &policy.workspace
        && !inv.cwd.starts_with(ws)
    {
        return Err(ActionError::new(
            opcode_vm::codes::R0126,
            "PATH_DENIED",
            format!(
                "the working directory {} is outside the workspace {}",
                inv.cwd.display(),
                ws.display()
            ),
            false,
        ));
    }
    let sandbox = if policy.enabled {
        match spawn::sandboxed(
            &policy,
            isolation.helper.as_deref(),
            &inv.program,
            inv.args.clone(),
            inv.env.clone(),
            &inv.cwd,
        ) {
            Ok(sandboxed) => Some(sandboxed),
            Err(_) if policy.allow_unisolated => None,
            Err(e) => return Err(e),
        }
    } else {
        None
    };
    let isolated = sandbox.is_some();
    let (mut cmd, cgroup) = if let Some(sandboxed) = sandbox {
        (sandboxed.command, Some(sandboxed.cgroup))
    } else {
        let mut c = tether::command(isolation.helper.as_deref(), &inv.program, &inv.args);
        for name in crate::environment::not_inherited() {
            c.env_remove(name);
        }
        c.current_dir(&inv.cwd).envs(inv.env.iter().cloned());
        (c, None)
    };
    // Its own process group, so a timeout kills the whole tree.
    cmd.process_group(0);
    cmd.kill_on_drop(true);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| {
        if isolated {
            crate::isolation::unavailable(&[format!("cannot enter new namespaces: {e}")])
        } else {
            ActionError::execution(format!(
                "cannot start `{}` in {}: {e}",
                inv.program,
                inv.cwd.display()
            ))
        }
    })?;
    let pid = child.id();
    // What an unsandboxed command leaves behind ends with its step, or
    // with its call when that is dropped (a cancel).
    let _group = Group((!isolated).then_some(pid).flatten());
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
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let timeout = call.duration("timeout", Duration::from_secs(30));
    let cap = policy.max_output;
    let work = async {
        let ((out, out_cut), (err, err_cut), ()) =
            tokio::join!(drain(stdout, cap), drain(stderr, cap), feed);
        let status = child.wait().await;
        (out, out_cut, err, err_cut, status)
    };
    // A sandboxed call is stopped once the places it writes are full.
    let places = if isolated {
        crate::isolation::disk::writable_places(&policy)
    } else {
        Vec::new()
    };
    let mut full = None;
    let finished = tokio::select! {
        finished = Box::pin(tokio::time::timeout(timeout, work)) => finished.ok(),
        over = crate::isolation::disk::full(places, policy.disk) => {
            full = Some(over);
            None
        }
    };
    let killed = finished.is_none();
    if killed && let Some(pid) = pid {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let hits = cgroup.as_ref().map(|group| {
        group.kill_all();
        group.hits()
    });
    drop(cgroup);
    if let Some(full) = &full {
        return Err(crate::isolation::over_disk(full, policy.disk));
    }
    let (out, out_cut, err, err_cut, status) = finished.unwrap_or_else(|| {
        (
            Vec::new(),
            0,
            format!("killed after {}ms", timeout.as_millis()).into_bytes(),
            0,
            Err(std::io::Error::other("killed")),
        )
    });
    let exit_code = sandbox::exit_code(status);
    let stderr_text = String::from_utf8_lossy(&err).into_owned();
    if isolated && let Some(error) = sandbox::setup_failure(exit_code, stderr_text.lines()) {
        return Err(error);
    }
    if !isolated
        && matches!(exit_code, 126 | 127)
        && let Some(line) = stderr_text.strip_prefix(tether::PREFIX)
    {
        let line = line.lines().next().unwrap_or_default();
        return Err(ActionError::execution(line.to_owned()));
    }
    let stdout_raw = String::from_utf8_lossy(&out).into_owned();
    let parsed = serde_json::from_str::<Value>(stdout_raw.trim())
        .ok()
        .filter(|_| !stdout_raw.trim().is_empty());
    let hits = hits.unwrap_or_default();
    let output = json!({
        "stdout": parsed.unwrap_or_else(|| Value::String(stdout_raw.clone())),
        "stdout_raw": stdout_raw,
        "stderr": stderr_text,
        "exit_code": exit_code,
        "duration_ms": started.elapsed().as_millis() as u64,
        "killed": killed,
        "truncated": out_cut + err_cut > 0,
        "dropped_bytes": {"stdout": out_cut, "stderr": err_cut},
        "isolated": isolated,
        "limits_hit": {"memory": hits.memory, "pids": hits.pids},
    });
    if hits.memory {
        let message = format!(
            "`{}` used more memory than its sandbox allows and was killed (isolation.memory)",
            inv.program
        );
        return Err(
            ActionError::new(opcode_vm::codes::R0130, "LIMIT_EXCEEDED", message, false)
                .with_details(json!({"limit": "memory", "output": output})),
        );
    }
    if call.flag("fail_on_nonzero", false) && exit_code != 0 {
        return Err(ActionError::execution(format!(
            "`{}` exited with code {exit_code}",
            inv.program
        ))
        .with_details(output));
    }
    Ok(output)
}

/// A process group killed when dropped.
#[cfg(feature = "runtime")]
struct Group(Option<u32>);

#[cfg(feature = "runtime")]
impl Drop for Group {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}
