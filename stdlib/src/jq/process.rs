//! One jq evaluation in a process of its own: the daemon starts its own
//! binary as `__opcode_jq`, writes the filter and the data to it, and reads
//! the outputs back. The process bounds its own memory (`RLIMIT_DATA`),
//! runs the filter on a thread with a known stack, and dies with the
//! daemon; the daemon kills it when the step's timeout or a cancel drops
//! the call. A filter that overflows its stack or its memory ends the
//! process, and the call fails with R0130.

use std::io::{Read, Write};
use std::path::Path;
use std::process::Stdio;

use opcode_vm::error::ActionError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Failure;
use crate::limits::Limits;

/// The first argument that makes a binary evaluate one jq filter.
pub const ARG: &str = "__opcode_jq";

/// The stack the filter runs on (recursion deeper than it fits is stopped).
const STACK: usize = 64 << 20;
/// Memory the process needs besides the filter's own (the binary, its stack).
const BASE_MEMORY: u64 = 128 << 20;

/// What the daemon sends.
#[derive(Debug, Serialize, Deserialize)]
struct Request {
    filter: String,
    data: Value,
    max_outputs: u64,
    memory: u64,
}

/// What the process answers.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Answer {
    Outputs(Vec<Value>),
    Error(String),
    TooManyOutputs(u64),
}

/// Runs `filter` on `data` in a process started from `helper` (or, without
/// one, in this process), within `limits`.
pub async fn evaluate(
    filter: &str,
    data: &Value,
    helper: Option<&Path>,
    limits: &Limits,
) -> Result<Vec<Value>, ActionError> {
    if let Err(limit) = opcode_vm::limits::check_jq(filter) {
        return Err(opcode_vm::limits::exceeded(
            "jq_nesting",
            filter.len() as u64,
            opcode_vm::limits::JQ_NESTING as u64,
            format!("the jq filter {limit}"),
        ));
    }
    let answer = if let Some(helper) = helper {
        in_process_of_its_own(helper, filter, data, limits).await?
    } else {
        let (filter, data, max) = (filter.to_owned(), data.clone(), limits.jq_outputs);
        tokio::task::spawn_blocking(move || answer_of(super::run(&filter, &data, max)))
            .await
            .map_err(|e| ActionError::execution(format!("the jq evaluation stopped: {e}")))?
    };
    match answer {
        Answer::Outputs(outputs) => Ok(outputs),
        Answer::Error(message) => Err(ActionError::new(
            opcode_vm::codes::R0100,
            "EXECUTION_ERROR",
            message,
            false,
        )),
        Answer::TooManyOutputs(max) => Err(opcode_vm::limits::exceeded(
            "jq_outputs",
            max + 1,
            max,
            format!("the jq filter gave more than {max} outputs (limits.jq_outputs)"),
        )),
    }
}

fn answer_of(result: Result<Vec<Value>, Failure>) -> Answer {
    match result {
        Ok(outputs) => Answer::Outputs(outputs),
        Err(Failure::Error(message)) => Answer::Error(message),
        Err(Failure::TooManyOutputs(max)) => Answer::TooManyOutputs(max),
    }
}

async fn in_process_of_its_own(
    helper: &Path,
    filter: &str,
    data: &Value,
    limits: &Limits,
) -> Result<Answer, ActionError> {
    let request = Request {
        filter: filter.to_owned(),
        data: data.clone(),
        max_outputs: limits.jq_outputs,
        memory: limits.jq_memory,
    };
    let text = serde_json::to_vec(&request).map_err(|e| ActionError::execution(e.to_string()))?;
    let started = tokio::process::Command::new(helper)
        .arg(ARG)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut child = started
        .map_err(|e| ActionError::execution(format!("cannot start the jq evaluation: {e}")))?;
    let (mut stdin, mut stdout, mut stderr) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let feed = async {
        if let Some(pipe) = stdin.as_mut() {
            let _ = pipe.write_all(&text).await;
        }
        drop(stdin.take());
    };
    let most = limits
        .output_bytes
        .saturating_mul(2)
        .saturating_add(1 << 20);
    let (out, err, ()) = tokio::join!(
        read_most(stdout.take(), most),
        read_most(stderr.take(), 1 << 16),
        feed
    );
    let status = child
        .wait()
        .await
        .map_err(|e| ActionError::execution(format!("the jq evaluation vanished: {e}")))?;
    if status.success()
        && let Ok(answer) = serde_json::from_slice::<Answer>(&out)
    {
        return Ok(answer);
    }
    let said = String::from_utf8_lossy(&err);
    Err(if said.contains("overflowed its stack") {
        opcode_vm::limits::exceeded(
            "jq_stack",
            STACK as u64 + 1,
            STACK as u64,
            "the jq filter recursed deeper than its 64 MiB stack; its evaluation was stopped"
                .into(),
        )
    } else if said.contains("memory allocation") || said.contains("out of memory") {
        let max = limits.jq_memory;
        opcode_vm::limits::exceeded(
            "jq_memory",
            max + 1,
            max,
            format!(
                "the jq filter used more than {max} bytes of memory (limits.jq_memory); its evaluation was stopped"
            ),
        )
    } else {
        ActionError::execution(format!(
            "the jq evaluation ended without an answer ({status}): {}",
            said.trim()
        ))
    })
}

/// Reads `pipe` to its end, keeping at most `most` bytes.
async fn read_most(pipe: Option<impl tokio::io::AsyncRead + Unpin>, most: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Some(pipe) = pipe {
        let _ = pipe.take(most).read_to_end(&mut bytes).await;
    }
    bytes
}

/// The helper's side: reads one request on standard input, answers on
/// standard output, exits.
pub fn main() -> i32 {
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    let mut text = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut text) {
        eprintln!("cannot read the jq request: {e}");
        return 2;
    }
    let request: Request = match serde_json::from_slice(&text) {
        Ok(request) => request,
        Err(e) => {
            eprintln!("the jq request is unreadable: {e}");
            return 2;
        }
    };
    drop(text);
    let memory = request.memory.saturating_add(BASE_MEMORY);
    let _ =
        nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_DATA, memory, memory);
    let worker = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || {
            answer_of(super::run(
                &request.filter,
                &request.data,
                request.max_outputs,
            ))
        });
    let answer = match worker.map(std::thread::JoinHandle::join) {
        Ok(Ok(answer)) => answer,
        Ok(Err(_)) => Answer::Error("the jq engine failed inside (a panic)".into()),
        Err(e) => Answer::Error(format!("cannot start the jq evaluation: {e}")),
    };
    let mut out = std::io::stdout().lock();
    match serde_json::to_writer(&mut out, &answer) {
        Ok(()) if out.flush().is_ok() => 0,
        _ => 2,
    }
}
