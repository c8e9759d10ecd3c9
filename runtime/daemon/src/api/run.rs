//! `opcode.run`: start a template's workflow with validated params and
//! return its outcome (or, with `wait: false`, its id at once).

use std::sync::Arc;

use opcode_stdlib::inputs::prepare;
use opcode_vm::codes;
use serde_json::{Value, json};
use sha2::Digest as _;

use super::args::Args;
use super::view::{Asked, render};
use super::{Api, ToolError, ToolResult};
use opcode_runtime::executor::{ExecError, Executor, StartRequest};
use opcode_runtime::store::{StepDetail, StoreError, TemplateRow, WorkflowStatus};

/// Handles `opcode.run`.
pub async fn run(api: &Api, args: &Args) -> ToolResult {
    let name = args.str("template_name")?;
    let version = args.opt_version("version")?;
    let agent_id = args.opt_str("agent_id")?;
    let wait = args.opt_bool("wait")?.unwrap_or(true);
    let session_id = session_of(args)?;
    let priority = args.opt_count("priority")?;
    let idempotent = idempotent_id(args, name)?;
    let asked = Asked::from_args(args, api.inline_limit)?;
    let given = args
        .opt_object("params")?
        .map_or_else(|| json!({}), |p| Value::Object(p.clone()));
    // Taken before the start, so that the run's end is not missed, nor a
    // child suspending on a decision.
    let changes = api.exec.changes();
    let children = api.exec.changes();
    let mut tries = 0;
    let earlier = match &idempotent {
        Some(id) => api.store().workflow(id).await?.map(|row| row.id),
        None => None,
    };
    let id = loop {
        if let Some(id) = &earlier {
            break (id.clone(), true);
        }
        let template = kept_template(api, name, version).await?;
        // The run's creation notes its agent as seen.
        let mut request =
            template_request(&api.exec, &template, &given, agent_id, idempotent.clone())?;
        // The run's state is read with the commit that settles it: its
        // steps whole only when the answer shows them.
        let detail = if asked.view.shows_steps() {
            StepDetail::Whole
        } else {
            StepDetail::StatusOnly
        };
        request.report_state = wait.then_some(detail);
        request.session_id.clone_from(&session_id);
        request.template_latest = version.is_none();
        if let Some(asked) = priority {
            request.priority = Some(asked_priority(api, &request, asked)?);
        }
        match (api.exec.start(request).await, &idempotent) {
            // Another process defined a newer version: read it and go again.
            (Err(ExecError::Store(StoreError::Outdated(_))), _) if tries < 3 => {
                api.templates.forget_latest(name);
                tries += 1;
            }
            // Started before with this idempotency key: that run answers.
            (Err(ExecError::Store(StoreError::Exists(_))), Some(id)) => break (id.clone(), true),
            (started, _) => break (started?, false),
        }
    };
    let (id, duplicate) = id;
    if !wait {
        let row = api.store().workflow(&id).await?;
        let status = row.map_or(WorkflowStatus::Pending, |r| r.status);
        let mut out = json!({ "workflow_id": id, "status": status });
        if duplicate {
            out["duplicate"] = json!(true);
        }
        return Ok(out);
    }
    // A run stopped by a refused write carries on later: name it. One that
    // another call with the same idempotency key created first is that
    // call's run: it is waited on as it is.
    let settled = async {
        match api.exec.settled_or_held(&id, Some(changes), children).await {
            Err(ExecError::Store(StoreError::Exists(_))) if idempotent.is_some() => {
                let (changes, children) = (api.exec.changes(), api.exec.changes());
                let state = api.exec.settled_or_held(&id, Some(changes), children).await;
                state.map(|state| (state, true))
            }
            settled => settled.map(|state| (state, duplicate)),
        }
        .map_err(|e| ToolError::from(e).with_details(json!({ "workflow_id": id })))
    };
    let (state, duplicate) = api.unless_stopping(&id, settled).await?;
    let mut out = render(api, &id, state, &asked).await?;
    if duplicate {
        out["duplicate"] = json!(true);
    }
    Ok(out)
}

/// The id of the run `idempotency_key` names for template `name`: the same
/// key starts one run, whose id later calls with it are answered (1 to 256
/// characters; none: a fresh id).
fn idempotent_id(args: &Args, name: &str) -> Result<Option<String>, ToolError> {
    let Some(key) = args.opt_str("idempotency_key")? else {
        return Ok(None);
    };
    if key.trim().is_empty() || key.chars().count() > 256 {
        return Err(ToolError::new(
            codes::R0122,
            "`idempotency_key` is 1 to 256 characters, not blank",
        ));
    }
    let digest = sha2::Sha256::digest(format!("{name}\0{key}").as_bytes());
    Ok(Some(format!("run-{}", hex::encode(&digest[..12]))))
}

/// The `session_id` argument, checked: a session name (spec/agents.md).
fn session_of(args: &Args) -> Result<Option<String>, ToolError> {
    let Some(id) = args.opt_str("session_id")? else {
        return Ok(None);
    };
    if !opcode_stdlib::agents::session::valid_name(id) {
        return Err(ToolError::new(
            codes::R0122,
            format!(
                "`session_id` is a name of 1 to 128 letters, digits, `-`, `_` or `.` (not starting with `.`), not `{id}`"
            ),
        ));
    }
    Ok(Some(id.to_owned()))
}

/// The priority a caller asks (`priority`: 0 first to 9 last) for a run
/// of `request`'s template: any at or after the template's own; one
/// before it only as far as the settings' `priority_highest` allows; else
/// R0122.
fn asked_priority(api: &Api, request: &StartRequest, asked: u32) -> Result<u8, ToolError> {
    let last = opcode_vm::limits::PRIORITY_LAST;
    let own = request.priority.unwrap_or(opcode_vm::limits::PRIORITY);
    let highest = own.min(api.priority_highest());
    match u8::try_from(asked) {
        Ok(asked) if asked >= highest && asked <= last => Ok(asked),
        _ => Err(ToolError::new(
            codes::R0122,
            format!(
                "`priority` runs from {highest} (first: the higher of the template's own {own} \
                 and the settings' `priority_highest`) to {last} (last), not {asked}"
            ),
        )
        .with_details(json!({"argument": "priority", "highest": highest, "last": last}))),
    }
}

/// Starts a run of `template` with `given` params (validated, defaults
/// applied), as `id` if given; returns its id. A run with that id that
/// already exists (a start repeated after a crash) counts as started.
pub async fn start_template(
    exec: &Executor,
    template: &TemplateRow,
    given: &Value,
    agent_id: Option<&str>,
    id: Option<String>,
) -> Result<String, ToolError> {
    let request = template_request(exec, template, given, agent_id, id.clone())?;
    match (exec.start(request).await, id) {
        (Ok(id), _) | (Err(ExecError::Store(StoreError::Exists(_))), Some(id)) => Ok(id),
        (Err(e), _) => Err(e.into()),
    }
}

/// The request that starts a run of `template` with `given` params
/// (validated, defaults applied), as `id` if given.
pub(super) fn template_request(
    exec: &Executor,
    template: &TemplateRow,
    given: &Value,
    agent_id: Option<&str>,
    id: Option<String>,
) -> Result<StartRequest, ToolError> {
    let prepared = exec
        .with_program(&template.definition, |program| prepare(program, given))
        .map_err(|e| {
            ToolError::new(
                codes::R0109,
                format!(
                    "template `{}` v{} no longer compiles ({e}); define it again",
                    template.name, template.version
                ),
            )
        })?;
    let inputs = prepared.map_err(|problems| {
        ToolError::new(
            codes::R0108,
            format!(
                "the params do not match the input_schema of `{}`: {}",
                template.name,
                problems.join("; ")
            ),
        )
        .with_details(json!({ "problems": problems }))
    })?;
    Ok(StartRequest {
        id,
        definition: template.definition.clone(),
        inputs,
        agent_id: agent_id.map(str::to_owned),
        template_name: Some(template.name.clone()),
        template_version: Some(template.version),
        priority: super::templates::Head::of(template).priority,
        ..StartRequest::default()
    })
}

/// Template `name` at `version` (`None`: the latest), from memory if kept
/// there, or R0120.
pub(super) async fn kept_template(
    api: &Api,
    name: &str,
    version: Option<i64>,
) -> Result<Arc<TemplateRow>, ToolError> {
    if let Some(row) = api.templates.get(name, version) {
        return Ok(row);
    }
    let row = read_template(api, name, version).await?;
    Ok(api.templates.keep(row, version.is_none()))
}

/// The template named by the argument `key` (and `version`), or R0120.
pub async fn template(api: &Api, args: &Args, key: &str) -> Result<TemplateRow, ToolError> {
    read_template(api, args.str(key)?, args.opt_version("version")?).await
}

/// Template `name` at `version` (`None`: the latest), read from the store,
/// or R0120.
async fn read_template(
    api: &Api,
    name: &str,
    version: Option<i64>,
) -> Result<TemplateRow, ToolError> {
    api.store().template(name, version).await?.ok_or_else(|| {
        let which = version.map_or_else(String::new, |v| format!(" version {v}"));
        ToolError::new(
            codes::R0120,
            format!("template `{name}`{which} is not defined"),
        )
    })
}
