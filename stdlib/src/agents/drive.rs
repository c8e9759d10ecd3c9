//! Driving an agent's process: its input, its output lines read as
//! events and kept in the transcript, its permission requests answered,
//! and its budget enforced (spec/agents.md, "Budgets").

use std::process::Stdio;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use opcode_vm::error::ActionError;
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};

use super::entry::{Entry, Stdin};
use super::observed::Observed;
use super::permission::{self, Permissions, Policy};
use super::protocol::{self, Event};
use super::reader::Lines;
use super::role::Role;
use super::task::{Budget, Task};
use super::transcript::Transcript;
use crate::call::{Call, Services};
use crate::isolation::cgroup::Cgroup;
use crate::isolation::sandbox;

/// How the agent's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited by itself.
    Exited,
    /// Its time ran out.
    Timeout,
    /// It started a step beyond its budget.
    StepLimit,
}

/// What a run gave: how it ended, what it reported, its exit code, and
/// the last lines of its stderr.
pub type Outcome = (Ending, Observed, i32, Vec<String>);

/// Lines of stderr kept for an error message.
const STDERR_TAIL: usize = 5;

/// Who the agent is, for the questions its permission requests ask.
#[derive(Debug, Clone, Copy)]
pub struct Asker<'a> {
    /// The step's permission policy.
    pub permissions: Permissions,
    /// The call's role.
    pub role: Role,
    /// The settings entry that runs it.
    pub agent: &'a str,
}

/// A permission request and its answer.
struct Answered {
    id: String,
    action: String,
    detail: Value,
    answer: String,
}

/// Runs `command` (the sandboxed agent) to its end or its budget's.
#[allow(
    clippy::too_many_arguments,
    reason = "one call's parts, each used once"
)]
pub async fn drive(
    mut command: tokio::process::Command,
    cgroup: Option<&Cgroup>,
    entry: &Entry,
    task: &Task,
    budget: &Budget,
    call: &Call,
    services: &dyn Services,
    asker: Asker<'_>,
    transcript: &mut Transcript,
) -> Result<Outcome, ActionError> {
    command.process_group(0);
    command.kill_on_drop(true);
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().map_err(|e| {
        crate::isolation::unavailable(&[format!("cannot enter new namespaces: {e}")])
    })?;
    let start = Instant::now();
    let deadline = start + budget.timeout;
    let wrap_at = start + budget.wrap_up_at();
    let (to_agent, mut lines) = mpsc::unbounded_channel::<String>();
    let mut stdin = child.stdin.take();
    let first = match entry.stdin() {
        Stdin::Task => Some(format!("{}\n", task.json)),
        Stdin::Prompt => Some(task.prompt.clone()),
        Stdin::Control | Stdin::None => None,
    };
    let keep_open = matches!(entry.stdin(), Stdin::Task | Stdin::Control);
    if let Some(first) = &first {
        transcript
            .line("stdin", &call.revealed.text(first.trim_end()))
            .await;
    }
    // The agent's input, written apart so a full pipe never stops reading.
    let writer = tokio::spawn(async move {
        let Some(pipe) = stdin.as_mut() else { return };
        if let Some(first) = first
            && pipe.write_all(first.as_bytes()).await.is_err()
        {
            return;
        }
        if !keep_open {
            return;
        }
        while let Some(line) = lines.recv().await {
            if pipe.write_all(line.as_bytes()).await.is_err() {
                return;
            }
        }
    });
    let mut out = Lines::new(BufReader::new(child.stdout.take().ok_or_else(no_pipe)?));
    let mut err = Lines::new(BufReader::new(child.stderr.take().ok_or_else(no_pipe)?));
    let (mut out_open, mut err_open) = (true, true);
    let mut observed = Observed::default();
    let mut stderr_tail: Vec<String> = Vec::new();
    let mut wrapped = false;
    let send = async |line: Value, transcript: &mut Transcript| {
        let text = line.to_string();
        transcript.line("stdin", &text).await;
        let _ = to_agent.send(format!("{text}\n"));
    };
    // Permission requests waiting for their answers (asked of the run).
    let mut asking = FuturesUnordered::new();
    let mut ending = Ending::Exited;
    while out_open || err_open {
        tokio::select! {
            line = out.next(), if out_open => {
                let Some((text, _cut)) = line else {
                    out_open = false;
                    continue;
                };
                transcript.line("stdout", &call.revealed.text(&text)).await;
                let Some(event) = protocol::parse(entry.protocol, &text) else { continue };
                if let Event::Permission { id, action, detail } = &event {
                    // Without a channel for control lines nobody can answer.
                    let policy = if keep_open { asker.permissions.policy } else { Policy::Deny };
                    let (id, action, detail) = (id.clone(), action.clone(), detail.clone());
                    if let Some(answer) = policy.immediate() {
                        let done = Answered { id, action, detail, answer: answer.to_owned() };
                        send(answered(&done, &mut observed, services, call), transcript).await;
                    } else {
                        publish_permission(services, call, &id, &action, None);
                        let question = permission::question(call, asker.role, asker.agent, (&action, &detail), asker.permissions.timeout);
                        asking.push(async move {
                            let answer = services.ask(call, question).await;
                            Answered { id, action, detail, answer }
                        });
                    }
                }
                let starts_step = matches!(event, Event::StepStart | Event::ToolStart { .. });
                observed.apply(&event);
                publish(services, call, &event, &observed);
                if observed.steps > budget.max_steps
                    || (starts_step && observed.steps >= budget.max_steps)
                {
                    ending = Ending::StepLimit;
                    break;
                }
                if !wrapped && observed.steps >= budget.max_steps - budget.reserve {
                    wrapped = true;
                    let left = deadline.saturating_duration_since(Instant::now());
                    send(json!({"type": "wrap_up", "reason": "steps", "remaining_ms": left.as_millis() as u64}), transcript).await;
                }
            }
            line = err.next(), if err_open => {
                let Some((text, _cut)) = line else {
                    err_open = false;
                    continue;
                };
                let masked = call.revealed.text(&text);
                transcript.line("stderr", &masked).await;
                stderr_tail.push(masked);
                if stderr_tail.len() > STDERR_TAIL {
                    stderr_tail.remove(0);
                }
            }
            Some(done) = asking.next(), if !asking.is_empty() => {
                send(answered(&done, &mut observed, services, call), transcript).await;
            }
            () = sleep_until(wrap_at), if !wrapped => {
                wrapped = true;
                let left = deadline.saturating_duration_since(Instant::now());
                send(json!({"type": "wrap_up", "reason": "time", "remaining_ms": left.as_millis() as u64}), transcript).await;
            }
            () = sleep_until(deadline) => {
                ending = Ending::Timeout;
                break;
            }
        }
    }
    if ending == Ending::Exited {
        tokio::select! {
            _ = child.wait() => {}
            () = sleep_until(deadline) => ending = Ending::Timeout,
        }
    }
    if ending != Ending::Exited {
        if let Some(cgroup) = cgroup {
            cgroup.kill_all();
        }
        let _ = child.start_kill();
        let reason = if ending == Ending::Timeout {
            format!("stopped: its {}s ran out", budget.timeout.as_secs())
        } else {
            format!("stopped: it started a step beyond its {}", budget.max_steps)
        };
        transcript.line("opcode", &reason).await;
    }
    writer.abort();
    let exit_code = sandbox::exit_code(child.wait().await);
    if let Some(error) = sandbox::setup_failure(exit_code, stderr_tail.iter().map(String::as_str)) {
        return Err(error);
    }
    Ok((ending, observed, exit_code, stderr_tail))
}

/// The most characters of a tool's output published live (the
/// transcript keeps it whole).
const LIVE_OUTPUT: usize = 4096;

/// Publishes one event to the run's live subscribers (the AG-UI stream),
/// its secrets masked: `agent.text`, `agent.tool_start`,
/// `agent.tool_finish`, `agent.plan`, `agent.step`, `agent.permission`,
/// `agent.summary`.
fn publish(services: &dyn Services, call: &Call, event: &Event, seen: &Observed) {
    let (kind, payload) = match event {
        Event::Text(text) if !text.trim().is_empty() => ("agent.text", json!({"text": text})),
        Event::ToolStart { id, tool, input } => (
            "agent.tool_start",
            json!({"id": id, "tool": tool, "input": input}),
        ),
        Event::ToolFinish {
            id,
            tool,
            input,
            output,
            exit_code,
            is_error,
        } => {
            let shown: String = output.chars().take(LIVE_OUTPUT).collect();
            let payload = json!({"id": id, "tool": tool, "input": input, "output": shown,
                                 "exit_code": exit_code, "is_error": is_error});
            ("agent.tool_finish", payload)
        }
        Event::Plan(todos) => ("agent.plan", json!({"todos": todos})),
        Event::Step { tokens, cost } => (
            "agent.step",
            json!({"steps": seen.steps, "tokens": tokens, "cost": cost}),
        ),
        Event::Compacted(summary) => ("agent.summary", json!({"summary": summary})),
        _ => return,
    };
    services.emit(call, kind, &call.revealed.value(&payload));
}

/// Keeps a permission request's answer in the result and publishes it;
/// answers the line that tells the agent.
fn answered(
    done: &Answered,
    observed: &mut Observed,
    services: &dyn Services,
    call: &Call,
) -> Value {
    publish_permission(services, call, &done.id, &done.action, Some(&done.answer));
    let response = json!({"type": "permission_response", "id": done.id, "answer": done.answer});
    observed
        .permissions
        .push(json!({"id": done.id, "action": done.action,
                                     "detail": done.detail, "answer": done.answer}));
    response
}

/// Publishes a permission request (`answer`: none while it is asked).
fn publish_permission(
    services: &dyn Services,
    call: &Call,
    id: &str,
    action: &str,
    answer: Option<&str>,
) {
    let payload = json!({"id": id, "action": action, "answer": answer,
                         "state": if answer.is_some() { "answered" } else { "asked" }});
    services.emit(call, "agent.permission", &call.revealed.value(&payload));
}

fn no_pipe() -> ActionError {
    ActionError::execution("the agent's output could not be read")
}
