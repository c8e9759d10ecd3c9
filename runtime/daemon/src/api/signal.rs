//! `opcode.signal`: answer or cancel a decision, cancel or resume a
//! workflow, or send a named signal to its wait steps.

use opcode_vm::codes;
use opcode_vm::event::{Event, Resolution};
use serde_json::{Map, Value, json};

use super::args::Args;
use super::view::{Asked, render};
use super::{Api, ToolError, ToolResult};
use opcode_runtime::executor::Delivery;

/// Handles `opcode.signal`.
pub async fn signal(api: &Api, args: &Args) -> ToolResult {
    let id = args.str("workflow_id")?;
    let kind = args.str("signal_type")?;
    let agent_id = args.opt_str("agent_id")?;
    let step_id = args.opt_str("step_id")?;
    let asked = Asked::from_args(args, api.inline_limit)?;
    let wait = args.opt_bool("wait")?.unwrap_or(true);
    let empty = Map::new();
    let payload = args.opt_object("payload")?.unwrap_or(&empty);
    if api.store().workflow(id).await?.is_none() {
        // A debounced run whose burst still gathers may be cancelled.
        let start = if kind == "cancel" && step_id.is_none() {
            super::pending::pending(api.store().as_ref(), id).await?
        } else {
            None
        };
        let Some(start) = start else {
            return Err(api.unknown_run(id).await);
        };
        let children = api.exec.changes();
        super::pending::cancel(api, id, &start, reason(payload)).await?;
        return settled(api, id, kind, false, wait.then_some(&asked), children).await;
    }
    api.seen(agent_id).await?;
    // A decision a child run waits for is answered there.
    let mut target = id.to_owned();
    let event = match kind {
        "decision" => {
            let (run, decision) = pending_decision(api, id, step_id, agent_id).await?;
            target = run;
            let choice = match payload.get("choice") {
                Some(Value::String(c)) if !c.is_empty() => c.clone(),
                _ => {
                    return Err(ToolError::new(
                        codes::R0122,
                        "a decision needs `payload.choice`, the chosen option's id",
                    ));
                }
            };
            Event::DecisionResolved {
                decision,
                resolution: Resolution {
                    choice,
                    reasoning: args.opt_str("reasoning")?.map(str::to_owned),
                    data: payload.get("data").cloned(),
                    resolved_by: agent_id.map(str::to_owned),
                },
            }
        }
        "cancel" => match step_id {
            Some(_) => {
                let (run, decision) = pending_decision(api, id, step_id, agent_id).await?;
                target = run;
                Event::DecisionCancelled { decision }
            }
            None => Event::Cancel {
                reason: reason(payload).to_owned(),
            },
        },
        "resume" => {
            refuse_waiting(api, id).await?;
            let children = api.exec.changes();
            api.exec.resume(id).await?;
            return settled(api, id, kind, false, wait.then_some(&asked), children).await;
        }
        "signal" | "data" => {
            let name = payload
                .get("name")
                .and_then(Value::as_str)
                .or(step_id)
                .ok_or_else(|| {
                    ToolError::new(
                        codes::R0122,
                        "a signal needs a name: `payload.name` (or `step_id`)",
                    )
                })?;
            let data = payload
                .get("data")
                .cloned()
                .unwrap_or_else(|| Value::Object(payload.clone()));
            // A signal a child run waits for is delivered there.
            target = opcode_runtime::summary::signal_target(api.store().as_ref(), id, name).await?;
            if target == id {
                refuse_unawaited(api, id, name).await?;
            }
            Event::Signal {
                name: name.to_owned(),
                payload: data,
            }
        }
        other => {
            return Err(ToolError::new(
                codes::R0122,
                format!(
                    "unknown signal_type `{other}`: use decision, cancel, resume, signal or data"
                ),
            ));
        }
    };
    // Taken before the delivery, so that a child suspending is not missed.
    let children = api.exec.changes();
    match api.exec.deliver(&target, event).await? {
        Delivery::Applied => {
            let resumed = kind == "decision";
            settled(api, id, kind, resumed, wait.then_some(&asked), children).await
        }
        Delivery::Queued { owner } => Ok(json!({
            "ok": true,
            "workflow_id": id,
            "signal_type": kind,
            "queued": true,
            "owner": owner,
        })),
    }
}

/// Why a cancel cancels: `payload.reason`, or that a signal did.
fn reason(payload: &Map<String, Value>) -> &str {
    payload
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or("cancelled by signal")
}

/// The answer: `ok`, the signal, and the run view once the run has
/// settled again (with `asked`), or at once its id.
async fn settled(
    api: &Api,
    id: &str,
    kind: &str,
    resumed: bool,
    asked: Option<&Asked>,
    children: tokio::sync::broadcast::Receiver<opcode_runtime::executor::Change>,
) -> ToolResult {
    let mut out = json!({
        "ok": true,
        "signal_type": kind,
        "resumed": resumed || kind == "resume",
    });
    let Some(asked) = asked else {
        out["workflow_id"] = json!(id);
        return Ok(out);
    };
    let settled = async { Ok(api.exec.settled_or_held(id, None, children).await?) };
    // The signal is in the log: a stop ends only the wait for the view.
    let state = api.unless_stopping(id, settled).await.map_err(|e| {
        if e.code == codes::R0134 {
            e.with_details(json!({ "workflow_id": id, "signal_applied": true }))
        } else {
            e
        }
    })?;
    let view = render(api, id, state, asked).await?;
    if let (Some(out), Value::Object(view)) = (out.as_object_mut(), view) {
        out.extend(view);
    }
    Ok(out)
}

/// Refuses to resume a run that only waits for an answer or a signal:
/// `resume` would leave it as it is (R0114, naming what it waits for).
async fn refuse_waiting(api: &Api, id: &str) -> Result<(), ToolError> {
    let awaited = opcode_runtime::waiting::awaited(api.store().as_ref(), id).await?;
    let Some(first) = awaited.first() else {
        return Ok(());
    };
    let details: Vec<Value> = awaited
        .iter()
        .map(opcode_runtime::waiting::Awaited::to_json)
        .collect();
    Err(ToolError::new(
        codes::R0114,
        format!("nothing to resume: {}", first.advice()),
    )
    .with_details(json!({ "waiting_for": details })))
}

/// The pending decision `step_id` names (its id or its step), of run `id`
/// or of a suspended run below it, checked against its target agent: the
/// run that asks, and the decision's id.
async fn pending_decision(
    api: &Api,
    id: &str,
    step_id: Option<&str>,
    agent_id: Option<&str>,
) -> Result<(String, String), ToolError> {
    let step = step_id.ok_or_else(|| {
        ToolError::new(codes::R0122, "`step_id` is required: the decision's step")
    })?;
    let (run, found) =
        match opcode_runtime::summary::find_pending(api.store().as_ref(), id, step).await? {
            Ok(found) => found,
            Err(message) => return Err(ToolError::new(codes::R0114, message)),
        };
    if let (Some(target), Some(agent)) = (&found.target_agent, agent_id)
        && target != agent
    {
        return Err(ToolError::new(
            codes::R0114,
            format!("decision `{}` is for agent `{target}`", found.id),
        ));
    }
    Ok((run, found.id))
}

/// Refuses a signal that no wait step of run `id` takes (R0114): it would
/// be kept and never read, and the run would wait on. Names the signals
/// its wait steps take, the closest first.
async fn refuse_unawaited(api: &Api, id: &str, name: &str) -> Result<(), ToolError> {
    let Some(names) = opcode_runtime::summary::awaitable_signals(api.store().as_ref(), id).await?
    else {
        return Ok(());
    };
    if names.iter().any(|n| n == name) {
        return Ok(());
    }
    let listed: Vec<&str> = names.iter().map(String::as_str).collect();
    let closest = opcode_compiler::diagnostics::did_you_mean(name, &listed);
    let message = match (listed.is_empty(), closest) {
        (true, _) => format!("workflow `{id}` has no wait step: no step takes the signal `{name}`"),
        (false, Some(close)) => format!(
            "no wait step of workflow `{id}` takes the signal `{name}`: did you mean `{close}`? (it waits for {})",
            listed.join(", ")
        ),
        (false, None) => format!(
            "no wait step of workflow `{id}` takes the signal `{name}`: it waits for {}",
            listed.join(", ")
        ),
    };
    Err(ToolError::new(codes::R0114, message).with_details(json!({
        "signal": name,
        "signals": listed,
        "closest": closest,
    })))
}
