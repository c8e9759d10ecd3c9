//! What the runtime gives actions: logs on stderr, live `workflow.emit`
//! events, other runs' contexts, and durable child workflows.

use std::path::PathBuf;
use std::sync::Weak;

use opcode_stdlib::exec::{BoxFuture, Call, Services, template_file};
use opcode_vm::error::ActionError;
use serde_json::{Value, json};

use super::{ExecError, Inner, StartRequest, Until};

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
        template: &'a str,
        _version: Option<&'a str>,
        params: Value,
    ) -> BoxFuture<'a, Result<Value, ActionError>> {
        Box::pin(async move {
            let inner = self
                .inner
                .upgrade()
                .ok_or_else(|| ActionError::execution("the runtime is shutting down"))?;
            // One child per attempt: a re-run of an interrupted attempt
            // finds the child it already started and waits for it.
            let child = call.idempotency_key.replace('/', ".");
            if inner.store.workflow(&child).await.ok().flatten().is_none() {
                start_child(&inner, call, template, params, &child).await?;
            }
            let row = inner
                .wait(&child, Until::Ended)
                .await
                .map_err(|e| ActionError::execution(e.to_string()))?;
            let output = row
                .output
                .as_deref()
                .and_then(|o| serde_json::from_str(o).ok())
                .unwrap_or(Value::Null);
            let result = json!({"workflow_id": child, "status": row.status, "output": output});
            if row.status == "completed" {
                Ok(result)
            } else {
                Err(ActionError::new(
                    opcode_vm::codes::R0113,
                    "EXECUTION_ERROR",
                    format!("child `{template}` ended {}", row.status),
                    false,
                )
                .with_details(result))
            }
        })
    }
}

/// Compiles the template found next to the parent and starts it as `child`.
async fn start_child(
    inner: &std::sync::Arc<Inner>,
    call: &Call,
    template: &str,
    params: Value,
    child: &str,
) -> Result<(), ActionError> {
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
        ActionError::execution(format!(
            "template `{template}` not found next to the workflow"
        ))
    })?;
    let source = std::fs::read_to_string(&path)
        .map_err(|e| ActionError::execution(format!("cannot read {}: {e}", path.display())))?;
    let (program, _) = inner
        .programs
        .compiler()
        .compile(&source, &path.to_string_lossy());
    let program = program
        .ok_or_else(|| ActionError::execution(format!("template `{template}` does not compile")))?;
    let inputs = opcode_stdlib::inputs::prepare(&program, &params)
        .map_err(|problems| ActionError::validation(problems.join("; ")))?;
    let request = StartRequest {
        id: Some(child.to_owned()),
        definition: source,
        program: Some(program),
        inputs,
        agent_id: call.agent_id.clone(),
        parent_id: Some(call.run_id.clone()),
        template_name: Some(template.to_owned()),
        template_version: None,
        base_dir: path.parent().map(PathBuf::from),
    };
    match inner.start(request).await {
        Ok(_) | Err(ExecError::Store(crate::store::StoreError::Exists(_))) => Ok(()),
        Err(e) => Err(ActionError::execution(e.to_string())),
    }
}
