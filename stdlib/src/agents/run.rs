//! One delegated agent call: its sandbox, its home, its worktree, the
//! agent driven within its budget, and the result (spec/agents.md).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use opcode_vm::error::ActionError;
use serde_json::{Value, json};

use super::AgentsConfig;
use super::drive::{self, Ending};
use super::entry::Entry;
use super::home::CallDir;
use super::permission::Permissions;
use super::release;
use super::role::Role;
use super::session::{Prefix, Session};
use super::snapshot::Snapshot;
use super::task::{self, Budget, Task};
use super::transcript::{self, Transcript};
use super::worktree::{self, Writer};
use crate::call::{Call, Services};
use crate::isolation::sandbox::Bind;
use crate::isolation::{IsolationConfig, Policy, cgroup::Cgroup, spawn};

/// Runs `call` of an `agent.*` action.
pub async fn run(
    call: &Call,
    base: &Path,
    isolation: &IsolationConfig,
    agents: &AgentsConfig,
    services: &dyn Services,
) -> Result<Value, ActionError> {
    let role = Role::of(&call.action)?;
    let release = release::of(call, role, agents, services).await?;
    let call = release.as_ref().map_or(call, |r| &r.call);
    let (name, entry) = agents.entry(call.str("agent"))?;
    let budget = Budget::of(call, role)?;
    let permissions = Permissions::of(call, &budget)?;
    let mut policy = policy(call, role, entry, isolation, base)?;
    let workspace = policy
        .workspace
        .clone()
        .unwrap_or_else(|| base.to_path_buf());
    if !workspace.is_dir() {
        return Err(ActionError::validation(format!(
            "the agent's workspace {} is not a directory",
            workspace.display()
        )));
    }
    let attempt = call.idempotency_key.rsplit('/').next().unwrap_or("1");
    let call_name = transcript::file_name(&format!("{}.{}.{attempt}", call.run_id, call.step));
    let owner = (policy.uid, policy.gid);
    let dir = CallDir::make(&agents.calls, &call_name, owner)?;
    let mut cleanup = Cleanup {
        writer: None,
        cgroup: None,
        dir: Some(dir.clone()),
    };
    dir.provision(
        &skills(call)?,
        call.params.get("mcp").and_then(Value::as_object),
        owner,
    )?;
    let scratch = (role == Role::Runner).then(|| dir.scratch());
    let session = Session::of(&call.params, call.session.as_deref(), &agents.sessions)?;
    let prefix = match &session {
        Some(session) => session.prefix(services).await,
        None => Prefix::default(),
    };
    let task = task::build(
        call,
        role,
        &budget,
        &workspace,
        scratch.as_deref(),
        &prefix.text,
    )?;
    binds(&mut policy, role, &workspace, &dir);
    policy.hidden.push(agents.calls.clone());
    policy.hidden.push(agents.transcripts.clone());
    if role.writes() {
        let holder = format!("{}/{}", call.run_id, call.step);
        let locks = agents.calls.join(".worktrees");
        let tree = worktree::canonical(&workspace);
        let writer = Writer::acquire(tree.clone(), &holder, Some(&locks))?;
        let refused = match services.take_worktree(&tree, &holder).await {
            Ok(None) => None,
            Ok(Some(other)) => Some(worktree::held_by(&tree, other)),
            Err(e) => Some(ActionError::execution(format!(
                "cannot take the lease of the worktree {} in the store: {e}",
                tree.display()
            ))),
        };
        if let Some(refused) = refused {
            writer.release();
            services.let_go_worktrees().await;
            return Err(refused);
        }
        cleanup.writer = Some(writer);
    }
    let argv = entry.argv(&placeholders(call, role, &budget, &workspace, &task));
    let (program, arguments) = argv.split_first().map_or_else(
        || (String::new(), Vec::new()),
        |(p, rest)| (p.clone(), rest.to_vec()),
    );
    let env = environment(call, role, entry, &budget, &dir, scratch.as_deref());
    let before = Snapshot::of(&workspace).await;
    let sandboxed = spawn::sandboxed(
        &policy,
        isolation.helper.as_deref(),
        &program,
        arguments,
        env,
        &workspace,
    )?;
    cleanup.cgroup = Some(sandboxed.cgroup);
    let mut transcript = Transcript::create(transcript::path(
        &agents.transcripts,
        &call.run_id,
        &call.step,
        attempt,
    ))
    .await;
    let started = Instant::now();
    // The agent is stopped once the places it writes (its workspace, its
    // home) are full.
    let places = crate::isolation::disk::writable_places(&policy);
    let driven = tokio::select! {
        outcome = drive::drive(
            sandboxed.command,
            cleanup.cgroup.as_ref(),
            entry,
            &task,
            &budget,
            call,
            services,
            drive::Asker {
                permissions,
                role,
                agent: name,
            },
            &mut transcript,
        ) => Ok(outcome),
        full = crate::isolation::disk::full(places, policy.disk) => Err(full),
    };
    let cleaned = cleanup.finish();
    if role.writes() {
        services.let_go_worktrees().await;
    }
    let outcome = match driven {
        Ok(outcome) => outcome,
        Err(full) => return Err(crate::isolation::over_disk(&full, policy.disk)),
    };
    let (ending, mut observed, exit_code, stderr_tail) = outcome?;
    let after = Snapshot::of(&workspace).await;
    let report = observed.report(&entry.report);
    let mut result = json!({
        "role": role.name(),
        "agent": name,
        "status": match ending {
            Ending::Exited => "completed",
            Ending::Timeout => "timeout",
            Ending::StepLimit => "step_limit",
        },
        "files_changed": before.changes(&after),
        "max_steps": budget.max_steps,
        "duration_ms": started.elapsed().as_millis() as u64,
        "exit_code": exit_code,
    });
    if let Some(release) = &release {
        result["release"] = release.pinned.clone().into();
    }
    let mut reference = transcript.finish().await;
    let attempt = attempt.parse().unwrap_or(1);
    transcript::keep(&mut reference, services, call, attempt).await;
    result["transcript"] = reference;
    if let Some(out) = result.as_object_mut() {
        out.extend(observed.fields(report.as_ref(), role == Role::Runner));
        if before.cut || after.cut {
            out.insert("files_cut".into(), json!(true));
        }
    }
    if let Some(session) = &session {
        result["session"] = json!({"id": session.id(), "turns": prefix.turns,
                                   "compacted": prefix.compacted, "prefix": prefix.text});
    }
    if let Err(why) = cleaned {
        return Err(quarantined(&why, &result));
    }
    let broken =
        ending == Ending::Exited && report.is_none() && (exit_code != 0 || !observed.any());
    if broken {
        let why = if exit_code == 0 {
            "wrote nothing its protocol reads".to_owned()
        } else {
            format!("exited with code {exit_code} without a report")
        };
        let tail = if stderr_tail.is_empty() {
            String::new()
        } else {
            format!(": {}", stderr_tail.join(" | "))
        };
        return Err(
            ActionError::execution(format!("the agent `{name}` {why}{tail}")).with_details(result),
        );
    }
    if let Some(session) = &session {
        remember(session, services, call, role, &result, observed.compacted()).await;
    }
    Ok(result)
}

/// Records the call's turn in its session, its secrets masked; a session
/// that cannot be written loses the turn, not the call.
async fn remember(
    session: &Session,
    services: &dyn Services,
    call: &Call,
    role: Role,
    result: &Value,
    compacted: Option<&str>,
) {
    let mask = |text: &str| call.revealed.text(text);
    let mut turn = json!({
        "role": role.name(),
        "prompt": mask(call.str("prompt").unwrap_or_default()),
        "summary": mask(result["summary"].as_str().unwrap_or_default()),
        "status": result["status"],
    });
    if let Some(compacted) = compacted {
        turn["compacted"] = json!(mask(compacted));
    }
    if let Err(e) = session.record(services, call, &turn).await {
        services.log(
            call,
            "warn",
            "the agent's turn was not kept in its session",
            &json!({"session": session.id(), "error": e}),
        );
    }
}

/// The sandbox policy of a role: the step's block with the role's
/// workspace mode, which the step may not change, and the entry's network.
fn policy(
    call: &Call,
    role: Role,
    entry: &Entry,
    isolation: &IsolationConfig,
    base: &Path,
) -> Result<Policy, ActionError> {
    let mut block = match &call.isolation {
        Some(Value::Object(block)) => block.clone(),
        _ => serde_json::Map::new(),
    };
    if block.get("writable").and_then(Value::as_bool) == Some(true) && !role.writes() {
        return Err(ActionError::new(
            opcode_vm::codes::R0129,
            "ISOLATION_WIDENED",
            format!(
                "`isolation.writable`: a {}'s workspace is read-only; use agent.worker to change it",
                role.name()
            ),
            false,
        ));
    }
    if block.get("enabled").and_then(Value::as_bool) == Some(false) {
        return Err(crate::isolation::unavailable(&[
            "delegated agents run only in a sandbox (`isolation.enabled: false` is refused)".into(),
        ]));
    }
    if let Some(ws) = call.str("workspace") {
        block.insert("workspace".into(), json!(ws));
    }
    block.insert("writable".into(), json!(role.writes()));
    let shaped = Call {
        isolation: Some(Value::Object(block)),
        ..call.clone()
    };
    let mut policy = Policy::of(isolation, &shaped, base)?;
    if !policy.enabled {
        return Err(crate::isolation::unavailable(&[
            "delegated agents run only in a sandbox, and isolation is off in the settings".into(),
        ]));
    }
    policy.network |= entry.network;
    Ok(policy)
}

/// What the sandbox binds besides the workspace: the home, the runner's
/// scratch, and `.git` read-only under a worker's writable workspace.
fn binds(policy: &mut Policy, role: Role, workspace: &Path, dir: &CallDir) {
    policy.binds.push(Bind {
        path: dir.home(),
        writable: true,
    });
    if role == Role::Runner {
        policy.binds.push(Bind {
            path: dir.scratch(),
            writable: true,
        });
    }
    let git = workspace.join(".git");
    if role.writes() && git.exists() {
        policy.binds.push(Bind {
            path: git,
            writable: false,
        });
    }
}

/// The step's skills, `{name, content}` each.
fn skills(call: &Call) -> Result<Vec<(String, String)>, ActionError> {
    let Some(list) = call.params.get("skills").and_then(Value::as_array) else {
        return Ok(Vec::new());
    };
    list.iter()
        .map(|skill| {
            let name = skill.get("name").and_then(Value::as_str).unwrap_or_default();
            let content = skill.get("content").and_then(Value::as_str);
            let plain = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
            match content {
                Some(content) if plain => Ok((name.to_owned(), content.to_owned())),
                _ => Err(ActionError::validation(format!(
                    "each of `skills` is {{\"name\": \"a-plain-name\", \"content\": \"…\"}}, not {skill}"
                ))),
            }
        })
        .collect()
}

/// The values of the command line's placeholders.
fn placeholders<'a>(
    call: &Call,
    role: Role,
    budget: &Budget,
    workspace: &Path,
    task: &Task,
) -> BTreeMap<&'a str, String> {
    let mut values = BTreeMap::from([
        ("prompt", task.prompt.clone()),
        ("max_steps", budget.max_steps.to_string()),
        ("timeout_s", budget.timeout.as_secs().to_string()),
        ("role", role.name().to_owned()),
        ("workspace", workspace.to_string_lossy().into_owned()),
    ]);
    for key in ["model", "variant"] {
        if let Some(value) = call.str(key).filter(|v| !v.is_empty()) {
            values.insert(key, value.to_owned());
        }
    }
    values
}

/// The agent's environment: the entry's, the step's, then what the daemon
/// sets (which neither may change).
fn environment(
    call: &Call,
    role: Role,
    entry: &Entry,
    budget: &Budget,
    dir: &CallDir,
    scratch: Option<&Path>,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = entry
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(Value::Object(given)) = call.params.get("env") {
        for (key, value) in given {
            let text = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            env.push((key.clone(), text));
        }
    }
    let scratch = scratch.map_or_else(|| PathBuf::from("/tmp"), Path::to_path_buf);
    for (key, value) in [
        ("HOME", dir.home()),
        ("TMPDIR", scratch.clone()),
        ("OPCODE_AGENT_SCRATCH", scratch),
    ] {
        env.push((key.to_owned(), value.to_string_lossy().into_owned()));
    }
    env.push(("OPCODE_AGENT_ROLE".into(), role.name().into()));
    env.push((
        "OPCODE_AGENT_MAX_STEPS".into(),
        budget.max_steps.to_string(),
    ));
    env.push((
        "OPCODE_AGENT_TIMEOUT_MS".into(),
        budget.timeout.as_millis().to_string(),
    ));
    env
}

/// What a call leaves to clean: its processes, its home, its worktree.
struct Cleanup {
    writer: Option<Writer>,
    cgroup: Option<Cgroup>,
    dir: Option<CallDir>,
}

impl Cleanup {
    /// Kills what is left, removes the home, frees the worktree; why the
    /// worktree is quarantined, if it is.
    fn finish(&mut self) -> Result<(), String> {
        if let Some(writer) = &self.writer {
            writer.cleaning();
        }
        let mut failed = Vec::new();
        if let Some(mut cgroup) = self.cgroup.take()
            && let Err(e) = cgroup.remove()
        {
            failed.push(e);
        }
        if let Some(dir) = self.dir.take()
            && let Err(e) = dir.remove()
        {
            failed.push(e);
        }
        let why = failed.join("; ");
        match self.writer.take() {
            Some(writer) if failed.is_empty() => writer.release(),
            Some(writer) => {
                writer.quarantine(&why);
                return Err(why);
            }
            None => {}
        }
        Ok(())
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        // A cancelled call cleans up here, failing closed as above.
        let _ = self.finish();
    }
}

/// The error of a call whose cleanup failed: its worktree is quarantined.
fn quarantined(why: &str, result: &Value) -> ActionError {
    ActionError::new(
        opcode_vm::codes::R0132,
        "WORKTREE_BUSY",
        format!(
            "the agent finished, but its cleanup failed ({why}); its worktree is quarantined: \
             check that no process of it still runs and that the worktree is as it should be, \
             then restart the daemon"
        ),
        false,
    )
    .with_details(json!({"state": "quarantined", "result": result}))
}
