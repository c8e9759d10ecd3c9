//! One jq or Expr evaluation in a process of its own: the daemon starts
//! its own binary as `__opcode_eval`, writes the program and the data to
//! it, and reads the outputs back. The process bounds its own memory
//! (`RLIMIT_DATA`), evaluates on a thread with a known stack, and dies
//! with the daemon; the daemon kills it when the step's timeout or a
//! cancel drops the call. A program that overflows its stack or its
//! memory ends the process, and the call fails with R0130. Neither jaq nor
//! expr-lang can be interrupted or bounded from inside (a jq filter may
//! never end, an Expr range may be a billion items long).

use std::io::{Read, Write};
use std::path::Path;
use std::process::Stdio;

use opcode_vm::error::ActionError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::limits::Limits;

/// The first argument that makes a binary evaluate one program.
pub const ARG: &str = "__opcode_eval";

/// The stack the program runs on (recursion deeper than it fits is stopped).
const STACK: usize = 64 << 20;
/// Memory the process needs besides the program's own (the binary, its stack).
const BASE_MEMORY: u64 = 128 << 20;

/// The language of a program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Language {
    /// A jq filter over `data`: every output.
    Jq,
    /// An Expr expression over the variables in `data` (an object): one output.
    Expr,
}

impl Language {
    /// How messages name a program of this language.
    fn program(self) -> &'static str {
        match self {
            Language::Jq => "the jq filter",
            Language::Expr => "the Expr expression",
        }
    }

    /// The prefix of the limits that bound it (`jq_memory`, `expr_memory`).
    fn limit(self) -> &'static str {
        match self {
            Language::Jq => "jq",
            Language::Expr => "expr",
        }
    }
}

/// What the daemon sends.
#[derive(Debug, Serialize, Deserialize)]
struct Request {
    language: Language,
    source: String,
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
    /// An Expr expression read a variable that is not there.
    UnknownVariable(String),
    TooManyOutputs(u64),
}

/// Runs `source` on `data` in a process started from `helper` (or, without
/// one, on a thread of this process), within `limits`.
pub async fn evaluate(
    language: Language,
    source: &str,
    data: &Value,
    helper: Option<&Path>,
    limits: &Limits,
) -> Result<Vec<Value>, ActionError> {
    let (checked, nesting) = match language {
        Language::Jq => (
            opcode_vm::limits::check_jq(source),
            opcode_vm::limits::JQ_NESTING,
        ),
        Language::Expr => (
            opcode_vm::limits::check_expr(source),
            opcode_vm::limits::EXPR_NESTING,
        ),
    };
    if let Err(limit) = checked {
        return Err(opcode_vm::limits::exceeded(
            &format!("{}_nesting", language.limit()),
            source.len() as u64,
            nesting as u64,
            format!("{} {limit}", language.program()),
        ));
    }
    let request = Request {
        language,
        source: source.to_owned(),
        data: data.clone(),
        max_outputs: limits.jq_outputs,
        memory: match language {
            Language::Jq => limits.jq_memory,
            Language::Expr => limits.expr_memory,
        },
    };
    let answer = if let Some(helper) = helper {
        in_process_of_its_own(helper, &request, limits).await?
    } else {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .stack_size(STACK)
            .spawn(move || sender.send(answer_of(&request)))
            .map_err(|e| ActionError::execution(format!("cannot start the evaluation: {e}")))?;
        receiver.await.unwrap_or_else(|_| {
            Answer::Error(format!("{} failed inside (a panic)", language.program()))
        })
    };
    match answer {
        Answer::Outputs(outputs) => Ok(outputs),
        Answer::Error(message) => Err(ActionError::new(
            match language {
                Language::Jq => opcode_vm::codes::R0100,
                Language::Expr => opcode_vm::codes::R0103,
            },
            "EXECUTION_ERROR",
            message,
            false,
        )),
        Answer::UnknownVariable(name) => Err(ActionError::new(
            opcode_vm::codes::R0102,
            "INTERPOLATION_ERROR",
            format!(
                "the Expr expression reads `{name}`, which is neither a variable nor an input the run was given"
            ),
            false,
        )
        .with_details(serde_json::json!({"name": name}))),
        Answer::TooManyOutputs(max) => Err(opcode_vm::limits::exceeded(
            "jq_outputs",
            max + 1,
            max,
            format!("the jq filter gave more than {max} outputs (limits.jq_outputs)"),
        )),
    }
}

/// Evaluates `request` here.
fn answer_of(request: &Request) -> Answer {
    match request.language {
        Language::Jq => match crate::jq::run(&request.source, &request.data, request.max_outputs) {
            Ok(outputs) => Answer::Outputs(outputs),
            Err(crate::jq::Failure::Error(message)) => Answer::Error(message),
            Err(crate::jq::Failure::TooManyOutputs(max)) => Answer::TooManyOutputs(max),
        },
        Language::Expr => match crate::expr_lang::evaluate(&request.source, &request.data) {
            Ok(output) => Answer::Outputs(vec![output]),
            Err(crate::expr_lang::Failure::UnknownVariable(name)) => Answer::UnknownVariable(name),
            Err(crate::expr_lang::Failure::Error(message)) => Answer::Error(message),
        },
    }
}

async fn in_process_of_its_own(
    helper: &Path,
    request: &Request,
    limits: &Limits,
) -> Result<Answer, ActionError> {
    let (language, limits_memory) = (request.language, request.memory);
    let text = serde_json::to_vec(request).map_err(|e| ActionError::execution(e.to_string()))?;
    let started = tokio::process::Command::new(helper)
        .arg(ARG)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut child =
        started.map_err(|e| ActionError::execution(format!("cannot start the evaluation: {e}")))?;
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
        .map_err(|e| ActionError::execution(format!("the evaluation vanished: {e}")))?;
    if status.success()
        && let Ok(answer) = serde_json::from_slice::<Answer>(&out)
    {
        return Ok(answer);
    }
    let said = String::from_utf8_lossy(&err);
    let (program, limit) = (language.program(), language.limit());
    Err(if said.contains("overflowed its stack") {
        opcode_vm::limits::exceeded(
            &format!("{limit}_stack"),
            STACK as u64 + 1,
            STACK as u64,
            format!("{program} recursed deeper than its 64 MiB stack; its evaluation was stopped"),
        )
    } else if said.contains("memory allocation") || said.contains("out of memory") {
        let max = limits_memory;
        opcode_vm::limits::exceeded(
            &format!("{limit}_memory"),
            max + 1,
            max,
            format!(
                "{program} used more than {max} bytes of memory (limits.{limit}_memory); its evaluation was stopped"
            ),
        )
    } else {
        ActionError::execution(format!(
            "the evaluation of {program} ended without an answer ({status}): {}",
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
        eprintln!("cannot read the evaluation request: {e}");
        return 2;
    }
    let request: Request = match serde_json::from_slice(&text) {
        Ok(request) => request,
        Err(e) => {
            eprintln!("the evaluation request is unreadable: {e}");
            return 2;
        }
    };
    drop(text);
    let memory = request.memory.saturating_add(BASE_MEMORY);
    let _ =
        nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_DATA, memory, memory);
    let worker = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || answer_of(&request));
    let answer = match worker.map(std::thread::JoinHandle::join) {
        Ok(Ok(answer)) => answer,
        Ok(Err(_)) => Answer::Error("the engine failed inside (a panic)".into()),
        Err(e) => Answer::Error(format!("cannot start the evaluation: {e}")),
    };
    let mut out = std::io::stdout().lock();
    match serde_json::to_writer(&mut out, &answer) {
        Ok(()) if out.flush().is_ok() => 0,
        _ => 2,
    }
}
