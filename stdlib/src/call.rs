//! What an action receives: its call, the services the embedding provides
//! (logging, events, notifications, child workflows), its secrets. Every
//! action reads this; [`crate::exec`] dispatches calls to the actions.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::Duration;

use opcode_vm::effect::{Dispatch, SecretPart, SecretSite};
use opcode_vm::error::ActionError;
use opcode_vm::event::{Ask, EffectId};
use opcode_vm::program::PathSeg;
use opcode_vm::value::follow_mut;
use serde_json::Value;

use crate::redact::Revealed;

/// A boxed future, for the object-safe [`Services`] trait.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One action invocation. Its `Debug` masks the secret values.
#[derive(Clone, Default)]
pub struct Call {
    /// The run.
    pub run_id: String,
    /// The step instance (`fetch`, `hash[2]`).
    pub step: String,
    /// `run_id/step/attempt`: the same for a re-run of an interrupted attempt.
    pub idempotency_key: String,
    /// The dispatch this call answers (the same for a re-run of an
    /// interrupted attempt): what a question it asks names.
    pub effect: EffectId,
    /// The agent that started the run.
    pub agent_id: Option<String>,
    /// The template the run was started from.
    pub template: Option<String>,
    /// The run's workspace: where relative paths resolve and sandboxed
    /// processes work (none: the embedding's directory).
    pub workspace: Option<PathBuf>,
    /// The session the run belongs to (spec/agents.md, "Sessions").
    pub session: Option<String>,
    /// The run's priority (0 first, 9 last), which runs it starts inherit.
    pub priority: Option<u8>,
    /// The action's full name.
    pub action: String,
    /// Parameters, secrets resolved.
    pub params: Value,
    /// The CEL variables, for actions that need them.
    pub scope: Option<Value>,
    /// The step's isolation settings.
    pub isolation: Option<Value>,
    /// The secret values resolved into `params` (and the run's other
    /// secrets), masked in what the call returns or publishes.
    pub revealed: Revealed,
    /// Secrets left unresolved in `params` as their references, for a
    /// call that passes them on (`workflow.run`, `workflow.map`).
    pub passed: Vec<SecretSite>,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("run_id", &self.run_id)
            .field("step", &self.step)
            .field("action", &self.action)
            .field("params", &self.revealed.value(&self.params))
            .field("revealed", &self.revealed)
            .finish_non_exhaustive()
    }
}

impl Call {
    /// The call for a dispatch, its secrets resolved; a call that starts
    /// child runs keeps them as references, to pass on.
    pub async fn prepare(
        dispatch: &Dispatch,
        run_id: &str,
        step: &str,
        agent_id: Option<&str>,
        secrets: &dyn Secrets,
    ) -> Result<Call, ActionError> {
        let passes_on = only_waits(&dispatch.action);
        let (params, revealed, passed) = if passes_on {
            (
                shown_params(dispatch),
                Revealed::default(),
                dispatch.secrets.clone(),
            )
        } else {
            let (params, revealed) =
                resolve_secrets(&dispatch.params, &dispatch.secrets, secrets).await?;
            (params, revealed, Vec::new())
        };
        Ok(Call {
            run_id: run_id.to_owned(),
            step: step.to_owned(),
            idempotency_key: format!("{run_id}/{step}/{}", dispatch.attempt),
            effect: dispatch.effect,
            agent_id: agent_id.map(str::to_owned),
            template: None,
            workspace: None,
            session: None,
            priority: None,
            action: dispatch.action.clone(),
            params,
            scope: dispatch.scope.clone(),
            isolation: dispatch.isolation.clone(),
            revealed,
            passed,
        })
    }

    /// The same call with its secret values masked in its parameters: what
    /// an action that only publishes its parameters (a log line, an event,
    /// a notification) may show.
    pub fn masked(&self) -> Call {
        Call {
            params: self.revealed.value(&self.params),
            ..self.clone()
        }
    }

    /// The directory relative paths of this call resolve against.
    pub fn base<'a>(&'a self, fallback: &'a Path) -> &'a Path {
        self.workspace.as_deref().unwrap_or(fallback)
    }

    /// A string parameter.
    pub fn str(&self, name: &str) -> Option<&str> {
        self.params.get(name).and_then(Value::as_str)
    }

    /// A boolean parameter (default when absent or not a boolean).
    pub fn flag(&self, name: &str, default: bool) -> bool {
        self.params
            .get(name)
            .and_then(Value::as_bool)
            .unwrap_or(default)
    }

    /// A required string parameter.
    pub fn required(&self, name: &str) -> Result<&str, ActionError> {
        match self.params.get(name) {
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(ActionError::validation(format!(
                "`{}` needs `{name}` to be a string, got {other}",
                self.action
            ))),
            None => Err(ActionError::validation(format!(
                "`{}` needs parameter `{name}`",
                self.action
            ))),
        }
    }

    /// A duration parameter (`30s`), or the default.
    pub fn duration(&self, name: &str, default: Duration) -> Duration {
        self.str(name)
            .and_then(|s| parse_duration(s).ok())
            .unwrap_or(default)
    }
}

/// Parses a Go-style duration (`250ms`, `1h30m`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| e.to_string())
}

/// What the embedding (the daemon, or `opcodec run`) provides to actions.
pub trait Services: Send + Sync {
    /// `workflow.log`.
    fn log(&self, call: &Call, level: &str, message: &str, data: &Value);
    /// `workflow.emit`: publish to live subscribers.
    fn emit(&self, call: &Call, event_type: &str, payload: &Value);
    /// `workflow.notify`: returns `{notified, reason?}`; never fails.
    fn notify(&self, call: &Call, message: &str, data: &Value) -> Value;
    /// `workflow.context` on another run: its context, if known.
    fn context_of<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Option<Value>>;
    /// `workflow.run` and each item of `workflow.map`: run a child template
    /// and wait for it; `{workflow_id, status, output}` when it completed.
    fn run_child<'a>(
        &'a self,
        call: &'a Call,
        child: Child<'a>,
    ) -> BoxFuture<'a, Result<Value, ActionError>>;
    /// Cancels the child `index` of a `workflow.map` call (fail fast); the
    /// default does nothing, for embeddings whose children cannot outlive
    /// the call.
    fn cancel_child<'a>(&'a self, _call: &'a Call, _index: usize) -> BoxFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }
    /// The turns of agent session `session`, oldest first, as
    /// [`Services::record_turn`] kept them (spec/agents.md, "Sessions").
    fn session_turns<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Vec<Value>, String>>;
    /// Records `turn` as `call`'s turn in `session`, replacing the one its
    /// run and step recorded before (a re-run), and keeps the newest
    /// `keep` turns of the session.
    fn record_turn<'a>(
        &'a self,
        session: &'a str,
        call: &'a Call,
        turn: &'a Value,
        keep: usize,
    ) -> BoxFuture<'a, Result<(), String>>;
    /// Keeps the whole transcript of `call`'s `attempt` once the call has
    /// ended, replacing one kept for that attempt before.
    fn keep_transcript<'a>(
        &'a self,
        call: &'a Call,
        attempt: u32,
        text: String,
    ) -> BoxFuture<'a, Result<(), String>>;
    /// Release `reference` (`name` for its newest, or `name@version`) of
    /// the agent registry (spec/registry.md): `{name, version, definition}`,
    /// the definition with its skills' text. The default has no registry.
    fn agent_release<'a>(
        &'a self,
        reference: &'a str,
    ) -> BoxFuture<'a, Result<Value, ActionError>> {
        Box::pin(std::future::ready(Err(ActionError::validation(format!(
            "no agent `{reference}` in the settings' `agents`, and no agent registry here"
        )))))
    }
    /// Takes `worktree` for `holder` (a run and step) across the daemons
    /// sharing the embedding's store: `None` when taken, else who holds
    /// it. The default takes it at once, for embeddings alone on their
    /// worktrees.
    fn take_worktree<'a>(
        &'a self,
        _worktree: &'a Path,
        _holder: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, String>> {
        Box::pin(std::future::ready(Ok(None)))
    }
    /// Lets go at once of the worktrees this process no longer holds
    /// ([`crate::agents::worktree::held`]); the default does nothing.
    fn let_go_worktrees(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }
    /// Asks `ask` (its `effect` is the call's) as a decision of the run and
    /// waits for the chosen option; the default answers `ask.default` at
    /// once, for embeddings that cannot ask anyone.
    fn ask<'a>(&'a self, _call: &'a Call, ask: Ask) -> BoxFuture<'a, String> {
        Box::pin(std::future::ready(ask.default))
    }
}

/// A child workflow to run.
#[derive(Debug, Clone, Copy)]
pub struct Child<'a> {
    /// The template's name.
    pub template: &'a str,
    /// Its version (`v2`, `2`), latest when absent.
    pub version: Option<&'a str>,
    /// The child's inputs.
    pub params: &'a Value,
    /// Where, in `params`, secrets are passed by reference.
    pub secrets: &'a [SecretSite],
    /// The item's position, for a child of `workflow.map`.
    pub index: Option<usize>,
}

impl Child<'_> {
    /// The child's workflow id (see [`child_workflow_id`]).
    pub fn workflow_id(&self, call: &Call) -> String {
        child_workflow_id(call, self.index)
    }
}

/// The workflow id of the child a call starts (the `index`th, for
/// `workflow.map`): the same for a re-run of an interrupted attempt, so it
/// finds the child it already started (see [`child_id`]).
pub fn child_workflow_id(call: &Call, index: Option<usize>) -> String {
    child_id(&call.idempotency_key, index)
}

/// The id of the child started by the call whose idempotency key is
/// `key` (`run/step/attempt`): `ROOT.DIGEST`, the id of the tree's first
/// run and 16 hex digits of the SHA-256 of the key; a `workflow.map`
/// child adds `.INDEX`. As short at any depth, every run of a tree starts
/// with its root's id, and a call's children with its `ROOT.DIGEST`.
pub fn child_id(key: &str, index: Option<usize>) -> String {
    use sha2::Digest;
    use std::fmt::Write;
    let run = key.split('/').next().unwrap_or(key);
    let digest = sha2::Sha256::digest(key.as_bytes());
    let mut id = format!("{}.", tree_root(run));
    for byte in &digest[..8] {
        let _ = write!(id, "{byte:02x}");
    }
    if let Some(i) = index {
        let _ = write!(id, ".{i}");
    }
    id
}

/// Is `child` a run that the call whose idempotency key is `key` started?
pub fn started_by(child: &str, key: &str) -> bool {
    let base = child_id(key, None);
    child
        .strip_prefix(base.as_str())
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// The id of the first run of the tree run `id` belongs to.
pub fn tree_root(id: &str) -> &str {
    id.split('.').next().unwrap_or(id)
}

/// Could `template` name a path rather than a template: empty, holding a
/// slash or a backslash, or starting with a dot?
pub fn path_like(template: &str) -> bool {
    template.is_empty() || template.contains(['/', '\\']) || template.starts_with('.')
}

/// The file of a child template named `template`, looked up next to a
/// workflow in `base`: `<template>.json`, `<template>/workflow.json`, or a
/// sibling example folder `../<template>/workflow.json`. Names that are
/// paths are refused.
pub fn template_file(base: &Path, template: &str) -> Option<PathBuf> {
    if path_like(template) {
        return None;
    }
    [
        base.join(format!("{template}.json")),
        base.join(template).join("workflow.json"),
        base.join("..").join(template).join("workflow.json"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

/// Where secrets come from.
pub trait Secrets: Send + Sync {
    /// The secret's value.
    fn secret<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Option<String>>;
}

/// Secrets from `OPCODE_SECRET_<NAME>` environment variables.
pub struct EnvSecrets;

impl Secrets for EnvSecrets {
    fn secret<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(std::future::ready(EnvSecrets::lookup(name)))
    }
}

impl EnvSecrets {
    /// `OPCODE_SECRET_<NAME>`, the name upper-cased with other characters as `_`.
    pub fn lookup(name: &str) -> Option<String> {
        let var: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect();
        crate::environment::var(&format!("OPCODE_SECRET_{var}"))
    }
}

/// Writes the secrets of a dispatch into its params; also returns the
/// values revealed.
pub async fn resolve_secrets(
    params: &Value,
    sites: &[SecretSite],
    secrets: &dyn Secrets,
) -> Result<(Value, Revealed), ActionError> {
    let mut params = params.clone();
    let mut revealed = Revealed::default();
    for site in sites {
        let mut text = String::new();
        for part in &site.parts {
            let Some(name) = part.secret() else {
                if let SecretPart::Text(t) = part {
                    text.push_str(t);
                }
                continue;
            };
            let Some(value) = secrets.secret(name).await else {
                return Err(ActionError::new(
                    opcode_vm::codes::R0102,
                    "INTERPOLATION_ERROR",
                    format!(
                        "secret `{name}` is not available: set it with `opcode secret set {name}` \
                         (the daemon's vault, also the panel's Secrets page), or give the daemon \
                         the environment variable OPCODE_SECRET_{name}"
                    ),
                    false,
                ));
            };
            revealed.add(&value);
            if matches!(part, SecretPart::Escaped(_)) {
                let quoted = Value::String(value).to_string();
                text.push_str(&quoted[1..quoted.len() - 1]);
            } else {
                text.push_str(&value);
            }
        }
        if let Some(slot) = follow_mut(&mut params, &site.path) {
            *slot = Value::String(text);
        }
    }
    Ok((params, revealed))
}

/// The values of the secrets `names`, for masking: those found.
pub async fn reveal(names: &[String], secrets: &dyn Secrets) -> Revealed {
    let mut revealed = Revealed::default();
    for name in names {
        if let Some(value) = secrets.secret(name).await {
            revealed.add(&value);
        }
    }
    revealed
}

/// A dispatch's params as people may see them: each secret written as its
/// reference, `${{secrets.NAME}}`, never its value.
pub fn shown_params(dispatch: &Dispatch) -> Value {
    let mut params = dispatch.params.clone();
    for site in &dispatch.secrets {
        let text: String = site
            .parts
            .iter()
            .map(|part| match part {
                SecretPart::Text(t) => t.clone(),
                SecretPart::Secret(name) | SecretPart::Escaped(name) => {
                    format!("${{{{secrets.{name}}}}}")
                }
            })
            .collect();
        if let Some(slot) = follow_mut(&mut params, &site.path) {
            *slot = Value::String(text);
        }
    }
    params
}

/// The sites of `sites` under `prefix`, with the prefix taken off.
pub fn sites_under(sites: &[SecretSite], prefix: &[PathSeg]) -> Vec<SecretSite> {
    sites
        .iter()
        .filter_map(|site| {
            let rest = strip(&site.path, prefix)?;
            Some(SecretSite {
                path: rest.to_vec(),
                parts: site.parts.clone(),
            })
        })
        .collect()
}

/// `path` without `prefix`, a key and an index naming the same position.
fn strip<'p>(path: &'p [PathSeg], prefix: &[PathSeg]) -> Option<&'p [PathSeg]> {
    let same = |a: &PathSeg, b: &PathSeg| match (a, b) {
        (PathSeg::Key(x), PathSeg::Key(y)) => x == y,
        (PathSeg::Index(x), PathSeg::Index(y)) => x == y,
        (PathSeg::Key(k), PathSeg::Index(i)) | (PathSeg::Index(i), PathSeg::Key(k)) => {
            *k == i.to_string()
        }
    };
    (path.len() >= prefix.len() && path.iter().zip(prefix).all(|(a, b)| same(a, b)))
        .then(|| &path[prefix.len()..])
}

/// Does `action` only wait for other runs? Such calls hold no worker
/// slot, so parents waiting for their children never starve them.
pub fn only_waits(action: &str) -> bool {
    matches!(action, "workflow.run" | "workflow.map")
}

/// The services the stdlib's own tests give actions.
#[cfg(test)]
pub(crate) mod testing {
    use std::sync::Mutex;

    use opcode_vm::error::ActionError;
    use opcode_vm::event::Ask;
    use serde_json::Value;

    use super::{BoxFuture, Call, Child, Services};

    /// Services keeping sessions' turns in memory, as a store would, with
    /// one agent release in their registry (`{name, version, definition}`),
    /// and doing nothing else.
    #[derive(Default)]
    pub(crate) struct Turns(
        pub(crate) Mutex<Vec<(String, String, String, Value)>>,
        pub(crate) Option<Value>,
    );

    impl Services for Turns {
        fn log(&self, _: &Call, _: &str, _: &str, _: &Value) {}
        fn emit(&self, _: &Call, _: &str, _: &Value) {}
        fn notify(&self, _: &Call, _: &str, _: &Value) -> Value {
            Value::Null
        }
        fn context_of<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Option<Value>> {
            Box::pin(std::future::ready(None))
        }
        fn run_child<'a>(
            &'a self,
            _: &'a Call,
            _: Child<'a>,
        ) -> BoxFuture<'a, Result<Value, ActionError>> {
            Box::pin(std::future::ready(Ok(Value::Null)))
        }
        fn session_turns<'a>(
            &'a self,
            session: &'a str,
        ) -> BoxFuture<'a, Result<Vec<Value>, String>> {
            let turns = self.0.lock().unwrap();
            let of: Vec<Value> = turns
                .iter()
                .filter(|t| t.0 == session)
                .map(|t| t.3.clone())
                .collect();
            Box::pin(std::future::ready(Ok(of)))
        }
        fn record_turn<'a>(
            &'a self,
            session: &'a str,
            call: &'a Call,
            turn: &'a Value,
            keep: usize,
        ) -> BoxFuture<'a, Result<(), String>> {
            let mut turns = self.0.lock().unwrap();
            turns.retain(|t| !(t.0 == session && t.1 == call.run_id && t.2 == call.step));
            turns.push((
                session.into(),
                call.run_id.clone(),
                call.step.clone(),
                turn.clone(),
            ));
            let mine = turns.iter().filter(|t| t.0 == session).count();
            let mut past = mine.saturating_sub(keep);
            turns.retain(|t| {
                let gone = past > 0 && t.0 == session;
                past -= usize::from(gone);
                !gone
            });
            Box::pin(std::future::ready(Ok(())))
        }
        fn keep_transcript<'a>(
            &'a self,
            _: &'a Call,
            _: u32,
            _: String,
        ) -> BoxFuture<'a, Result<(), String>> {
            Box::pin(std::future::ready(Ok(())))
        }
        fn ask<'a>(&'a self, _: &'a Call, ask: Ask) -> BoxFuture<'a, String> {
            Box::pin(std::future::ready(ask.default))
        }
        fn agent_release<'a>(
            &'a self,
            reference: &'a str,
        ) -> BoxFuture<'a, Result<Value, ActionError>> {
            let name = reference.split('@').next().unwrap_or_default();
            let found = self
                .1
                .clone()
                .filter(|release| release["name"] == name)
                .ok_or_else(|| ActionError::validation(format!("no agent `{reference}`")));
            Box::pin(std::future::ready(found))
        }
    }
}
