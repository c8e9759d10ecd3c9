//! What the runtime gives actions: logs on stderr, live `workflow.emit`
//! events, other runs' contexts, and durable child workflows.

use std::path::{Path, PathBuf};
use std::sync::Weak;

use opcode_stdlib::exec::{BoxFuture, Call, Child, Services, child_workflow_id, template_file};
use opcode_vm::error::ActionError;
use opcode_vm::event::{Ask, Event};
use serde_json::{Value, json};

use super::{Delivery, ExecError, Inner, StartRequest, Until};
use crate::owner;
use crate::registry::Failure;
use crate::store::{SessionTurn, Transcript, WorkflowStatus, WorktreeLease};

/// Why a service is not given: the executor has stopped.
const STOPPED: &str = "the executor has stopped";

/// A `workflow.emit` event.
#[derive(Debug, Clone, PartialEq)]
pub struct Emitted {
    /// The run.
    pub workflow_id: String,
    /// The step instance.
    pub step_id: String,
    /// The event's name.
    pub event_type: String,
    /// Its data.
    pub payload: Value,
}

/// The runtime's [`Services`].
pub struct RuntimeServices {
    inner: Weak<Inner>,
}

impl RuntimeServices {
    /// Services of the executor behind `inner`.
    pub fn new(inner: Weak<Inner>) -> RuntimeServices {
        RuntimeServices { inner }
    }
}

impl Services for RuntimeServices {
    fn log(&self, call: &Call, level: &str, message: &str, data: &Value) {
        if let Some(inner) = self.inner.upgrade() {
            inner.observer().logged(&super::LogLine {
                run_id: &call.run_id,
                step: &call.step,
                level,
                message,
                data,
            });
        }
        let data = match data {
            Value::Object(m) if m.is_empty() => None,
            other => Some(other.to_string()),
        };
        let (workflow, step) = (call.run_id.as_str(), call.step.as_str());
        match level {
            "error" => {
                tracing::error!(target: "workflow", workflow, step, data = data.as_deref(), "{message}");
            }
            "warn" | "warning" => {
                tracing::warn!(target: "workflow", workflow, step, data = data.as_deref(), "{message}");
            }
            "debug" => {
                tracing::debug!(target: "workflow", workflow, step, data = data.as_deref(), "{message}");
            }
            _ => {
                tracing::info!(target: "workflow", workflow, step, data = data.as_deref(), "{message}");
            }
        }
    }

    fn emit(&self, call: &Call, event_type: &str, payload: &Value) {
        if let Some(inner) = self.inner.upgrade() {
            let _ = inner.emitted.send(Emitted {
                workflow_id: call.run_id.clone(),
                step_id: call.step.clone(),
                event_type: event_type.to_owned(),
                payload: payload.clone(),
            });
        }
    }

    fn notify(&self, call: &Call, message: &str, data: &Value) -> Value {
        let notifier = self
            .inner
            .upgrade()
            .and_then(|inner| inner.notifier.get().cloned());
        let Some(notifier) = notifier else {
            return json!({"notified": false, "reason": "no_notifier"});
        };
        let note = json!({
            "message": message,
            "workflow_id": call.run_id,
            "step_id": call.step,
            "data": data,
        });
        notifier.notify(call.agent_id.as_deref(), note)
    }

    fn context_of<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Option<Value>> {
        Box::pin(async move {
            let inner = self.inner.upgrade()?;
            let row = inner.store.workflow(run_id).await.ok()??;
            Some(
                row.context
                    .and_then(|c| serde_json::from_str(&c).ok())
                    .unwrap_or_else(|| json!({})),
            )
        })
    }

    fn run_child<'a>(
        &'a self,
        call: &'a Call,
        child: Child<'a>,
    ) -> BoxFuture<'a, Result<Value, ActionError>> {
        Box::pin(async move {
            let inner = self
                .inner
                .upgrade()
                .ok_or_else(|| ActionError::execution("the runtime is shutting down"))?;
            let id = child.workflow_id(call);
            let changes = inner.changes.subscribe();
            // Started by an earlier attempt: it may run elsewhere.
            let mut look = true;
            if inner.store.workflow(&id).await.ok().flatten().is_none() {
                let limits = &inner.config.limits;
                inner
                    .trees
                    .admit(&*inner.store, limits, &call.run_id)
                    .await?;
                start_child(&inner, call, child, &id).await?;
                look = !inner.runs().contains_key(&id);
            }
            inner
                .wait(&id, Until::Ended, changes, look)
                .await
                .map_err(|e| ActionError::execution(e.to_string()))?;
            let row = inner
                .store
                .workflow(&id)
                .await
                .map_err(|e| ActionError::execution(e.to_string()))?
                .ok_or_else(|| ActionError::execution(format!("workflow `{id}` is gone")))?;
            let output = row
                .output
                .as_deref()
                .and_then(|o| serde_json::from_str(o).ok())
                .unwrap_or(Value::Null);
            let mut result = json!({"workflow_id": id, "status": row.status, "output": output});
            if row.status == WorkflowStatus::Completed {
                return Ok(result);
            }
            let cause = row
                .error
                .as_deref()
                .and_then(|e| serde_json::from_str::<Value>(e).ok())
                .map(|e| cause_of(&id, &e));
            let why = cause
                .as_ref()
                .and_then(|c| c["message"].as_str())
                .map_or_else(String::new, |m| format!(": {m}"));
            if let Some(cause) = cause {
                result["cause"] = cause;
            }
            Err(ActionError::new(
                opcode_vm::codes::R0113,
                "EXECUTION_ERROR",
                format!("child `{}` ended {}{why}", child.template, row.status),
                false,
            )
            .with_details(result))
        })
    }

    fn cancel_child<'a>(&'a self, call: &'a Call, index: usize) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Some(inner) = self.inner.upgrade() else {
                return;
            };
            let id = child_workflow_id(call, Some(index));
            let cancel = Event::Cancel {
                reason: format!("a sibling of `{}` failed", call.step),
            };
            let _ = inner.deliver(&id, cancel).await;
        })
    }

    fn session_turns<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Vec<Value>, String>> {
        Box::pin(async move {
            let inner = self.inner.upgrade().ok_or(STOPPED)?;
            let texts = inner
                .store
                .session_turns(session)
                .await
                .map_err(|e| e.to_string())?;
            Ok(texts
                .iter()
                .filter_map(|text| serde_json::from_str(text).ok())
                .collect())
        })
    }

    fn record_turn<'a>(
        &'a self,
        session: &'a str,
        call: &'a Call,
        turn: &'a Value,
        keep: usize,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let inner = self.inner.upgrade().ok_or(STOPPED)?;
            let turn = SessionTurn {
                session: session.to_owned(),
                workflow_id: call.run_id.clone(),
                step: call.step.clone(),
                turn: turn.to_string(),
            };
            let keep = u32::try_from(keep).unwrap_or(u32::MAX);
            inner
                .store
                .record_turn(turn, keep)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn keep_transcript<'a>(
        &'a self,
        call: &'a Call,
        attempt: u32,
        text: String,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let inner = self.inner.upgrade().ok_or(STOPPED)?;
            let transcript = Transcript {
                workflow_id: call.run_id.clone(),
                step: call.step.clone(),
                attempt,
                text,
            };
            inner
                .store
                .keep_transcript(transcript)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn agent_release<'a>(
        &'a self,
        reference: &'a str,
    ) -> BoxFuture<'a, Result<Value, ActionError>> {
        Box::pin(async move {
            let inner = self
                .inner
                .upgrade()
                .ok_or_else(|| ActionError::execution(STOPPED))?;
            match crate::registry::view(inner.store.as_ref(), reference).await {
                Ok(view) => Ok(view),
                Err(Failure::Refused(refused)) => Err(ActionError::validation(refused.message)
                    .with_details(json!({"code": refused.code.id, "help": refused.help}))),
                Err(Failure::Store(e)) => Err(ActionError::execution(format!(
                    "cannot read the agent registry: {e}"
                ))),
            }
        })
    }

    fn take_worktree<'a>(
        &'a self,
        worktree: &'a Path,
        holder: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, String>> {
        Box::pin(async move {
            let inner = self.inner.upgrade().ok_or(STOPPED)?;
            let me = owner::current();
            let lease = WorktreeLease {
                worktree: worktree.to_string_lossy().into_owned(),
                owner: me.to_owned(),
                holder: holder.to_owned(),
            };
            let ttl = inner.config.lease_ttl;
            let take = |over| inner.store.take_worktree(lease.clone(), ttl, over);
            let mut held = take(None).await.map_err(|e| e.to_string())?;
            // A holder on this host whose process is gone left it.
            if held.owner != me && owner::is_dead(&held.owner) {
                held = take(Some(held.owner)).await.map_err(|e| e.to_string())?;
            }
            Ok((held.owner != me).then(|| format!("{}, daemon {}", held.holder, held.owner)))
        })
    }

    fn let_go_worktrees(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Some(inner) = self.inner.upgrade() {
                keep_worktrees(&inner).await;
            }
        })
    }

    fn ask<'a>(&'a self, call: &'a Call, ask: Ask) -> BoxFuture<'a, String> {
        Box::pin(async move {
            let Some(inner) = self.inner.upgrade() else {
                return ask.default;
            };
            let (effect, key, default) = (call.effect, ask.key.clone(), ask.default.clone());
            let answer = inner.asks.wait(&call.run_id, effect, &key);
            let asked = inner
                .deliver(&call.run_id, Event::ActionAsked(Box::new(ask)))
                .await;
            if !matches!(asked, Ok(Delivery::Applied)) {
                // Refused (the call has ended, or the question is malformed),
                // or not here to ask: nobody will answer.
                inner.asks.answer(&call.run_id, effect, &key, &default);
            }
            answer.await.unwrap_or(default)
        })
    }
}

/// The first failure below a child run that failed with `error`: its
/// child's cause when it failed because of one, else its own error; so a
/// deep tree's root says what went wrong once, not once a level.
fn cause_of(id: &str, error: &Value) -> Value {
    match error.pointer("/details/cause") {
        Some(cause) => cause.clone(),
        None => json!({
            "workflow_id": id,
            "step": error.get("step"),
            "code": error.get("code"),
            "message": error.get("message"),
        }),
    }
}

/// Compiles the child's template, from the store (as defined with
/// `opcode.define`) or else from a file next to the parent, and starts it.
async fn start_child(
    inner: &std::sync::Arc<Inner>,
    call: &Call,
    child: Child<'_>,
    id: &str,
) -> Result<(), ActionError> {
    let version = match child.version {
        None => None,
        Some(text) => Some(
            text.strip_prefix('v')
                .unwrap_or(text)
                .parse::<i64>()
                .map_err(|_| {
                    ActionError::validation(format!(
                        "`version` must be a number such as 3 or \"v3\", not `{text}`"
                    ))
                })?,
        ),
    };
    let stored = inner
        .store
        .template(child.template, version)
        .await
        .map_err(|e| ActionError::execution(e.to_string()))?;
    let (source, origin, template_version) = if let Some(row) = stored {
        (row.definition, None, Some(row.version))
    } else {
        let (source, path) = template_source(inner, call, child.template).await?;
        (source, Some(path), None)
    };
    let name = origin.as_ref().map_or_else(
        || format!("template:{}", child.template),
        |p| p.to_string_lossy().into_owned(),
    );
    let (program, _) = inner.programs.compiler().compile(&source, &name);
    let program = program.ok_or_else(|| {
        ActionError::execution(format!("template `{}` does not compile", child.template))
    })?;
    let inputs = opcode_stdlib::inputs::prepare(&program, child.params)
        .map_err(|problems| ActionError::validation(problems.join("; ")))?;
    let request = StartRequest {
        id: Some(id.to_owned()),
        definition: source,
        program: Some(program),
        inputs,
        agent_id: call.agent_id.clone(),
        parent_id: Some(call.run_id.clone()),
        template_name: Some(child.template.to_owned()),
        template_version,
        base_dir: origin.and_then(|p| p.parent().map(PathBuf::from)),
        workspace: call.workspace.clone(),
        session_id: call.session.clone(),
        secrets: child.secrets.to_vec(),
        priority: call.priority,
        ..StartRequest::default()
    };
    match inner.start(request).await {
        Ok(_) | Err(ExecError::Store(crate::store::StoreError::Exists(_))) => Ok(()),
        Err(e) => Err(ActionError::execution(e.to_string())),
    }
}

/// A template that is not in the store, read from a file next to the parent.
async fn template_source(
    inner: &std::sync::Arc<Inner>,
    call: &Call,
    template: &str,
) -> Result<(String, PathBuf), ActionError> {
    let parent = inner
        .store
        .workflow(&call.run_id)
        .await
        .ok()
        .flatten()
        .ok_or_else(|| ActionError::execution("the parent workflow is not stored"))?;
    let base = parent
        .base_dir
        .map_or_else(|| inner.config.base_dir.clone(), PathBuf::from);
    let path = template_file(&base, template).ok_or_else(|| {
        ActionError::new(
            opcode_vm::codes::R0120,
            "VALIDATION_ERROR",
            format!("template `{template}` is not defined (nor a file next to the workflow)"),
            false,
        )
    })?;
    let source = std::fs::read_to_string(&path)
        .map_err(|e| ActionError::execution(format!("cannot read {}: {e}", path.display())))?;
    Ok((source, path))
}

/// Keeps this process's leases on the worktrees it holds and lets go of
/// the others (a call ended, or was cancelled); a failure is retried at
/// the next renewal of its leases.
pub(super) async fn keep_worktrees(inner: &Inner) {
    let held = opcode_stdlib::agents::worktree::held()
        .iter()
        .map(|tree| tree.to_string_lossy().into_owned())
        .collect();
    let kept = inner
        .store
        .keep_worktrees(owner::current(), held, inner.config.lease_ttl)
        .await;
    if let Err(error) = kept {
        tracing::warn!(%error, "keeping this process's worktree leases failed; trying again");
    }
}
