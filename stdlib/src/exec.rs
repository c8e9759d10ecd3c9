//! Running actions: dispatch of a call by name to the built-in actions,
//! a plugin's, or the embedding's. What an action receives is
//! [`crate::call`], re-exported here.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use opcode_vm::catalog::{ActionSpec, Placement};
use opcode_vm::error::ActionError;
use serde_json::Value;

use crate::actions::{assert, crypto, expr, fs, http, json, shell, workflow};
use crate::agents::AgentsConfig;
use crate::isolation::IsolationConfig;
use crate::limits::Limits;

pub use crate::call::{
    BoxFuture, Call, Child, EnvSecrets, Secrets, Services, child_id, child_workflow_id, only_waits,
    parse_duration, path_like, resolve_secrets, reveal, shown_params, sites_under, started_by,
    template_file, tree_root,
};

/// The built-in actions, ready to run.
pub struct Actions {
    http: reqwest::Client,
    services: Arc<dyn Services>,
    base_dir: PathBuf,
    isolation: IsolationConfig,
    external: Option<Arc<dyn ExternalActions>>,
    limits: Limits,
    evaluator: Option<PathBuf>,
    agents: AgentsConfig,
}

/// Actions the embedding provides besides the built-in ones (the daemon's
/// plugins: `<plugin>.<tool>`).
pub trait ExternalActions: Send + Sync {
    /// Does this provider run `action`?
    fn handles(&self, action: &str) -> bool;
    /// Runs one call of an action it handles.
    fn run<'a>(&'a self, call: &'a Call) -> BoxFuture<'a, Result<Value, ActionError>>;
}

impl std::fmt::Debug for Actions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Actions")
            .field("base_dir", &self.base_dir)
            .finish_non_exhaustive()
    }
}

impl Actions {
    /// Actions resolving relative paths against `base_dir`.
    pub fn new(services: Arc<dyn Services>, base_dir: PathBuf) -> Actions {
        Actions {
            http: http::client(),
            services,
            base_dir,
            isolation: IsolationConfig::default(),
            external: None,
            limits: Limits::default(),
            evaluator: None,
            agents: AgentsConfig::default(),
        }
    }

    /// These actions with `agents` for `agent.*` (spec/agents.md).
    #[must_use]
    pub fn with_agents(mut self, agents: AgentsConfig) -> Actions {
        self.agents = agents;
        self
    }

    /// These actions within `limits` (spec/limits.md).
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Actions {
        self.limits = limits;
        self
    }

    /// These actions with `helper`, a binary whose `main` calls
    /// [`crate::helpers::main_if_helper`], running jq filters in processes
    /// of their own (without one, in this process).
    #[must_use]
    pub fn with_evaluator(mut self, helper: Option<PathBuf>) -> Actions {
        self.evaluator = helper;
        self
    }

    /// These actions, with `external` ones besides.
    #[must_use]
    pub fn with_external(mut self, external: Option<Arc<dyn ExternalActions>>) -> Actions {
        self.external = external;
        self
    }

    /// These actions with `isolation` for the processes and paths they use.
    #[must_use]
    pub fn with_isolation(mut self, isolation: IsolationConfig) -> Actions {
        self.isolation = isolation;
        self
    }

    /// The directory relative paths are resolved against.
    pub fn base_dir(&self) -> &Path {
        &self.base_dir
    }

    /// What a call of `action` with `params` depends on outside this
    /// machine, which its circuit breaker guards (`crate::targets`): an
    /// HTTP origin, a plugin's server, a delegated agent's settings entry;
    /// `None` for work on this machine alone.
    pub fn target(&self, action: &str, params: &Value) -> Option<String> {
        let plugin = self
            .external
            .as_ref()
            .filter(|e| e.handles(action))
            .map(|_| action.split_once('.').map_or(action, |(plugin, _)| plugin));
        crate::targets::target_of(action, params, plugin, |name| {
            self.agents
                .entry(name)
                .ok()
                .map(|(entry, _)| entry.to_owned())
        })
    }

    /// Must the run's fresh `workspace` exist before a call of `action`
    /// with `params`? Calls that start a process, write files, or read a
    /// path that is relative or inside the workspace need it; calls that
    /// touch no file (HTTP, hashes, assertions, the workflow's own actions)
    /// and reads of absolute paths elsewhere do not, so a run of those
    /// makes and removes no directory (spec/isolation.md, "Workspaces").
    pub fn uses_workspace(&self, action: &str, params: &Value, workspace: &Path) -> bool {
        if self.external.as_ref().is_some_and(|e| e.handles(action)) {
            return true;
        }
        let (family, name) = action.split_once('.').unwrap_or((action, ""));
        match family {
            "http" | "crypto" | "assert" | "workflow" => false,
            "fs" if matches!(name, "read" | "stat" | "list") => params
                .get("path")
                .and_then(Value::as_str)
                .is_none_or(|path| {
                    let path = Path::new(path);
                    !path.is_absolute()
                        || crate::isolation::paths::normalize(path).starts_with(workspace)
                }),
            _ => true,
        }
    }

    /// May a call of `action` with `params` for run `run_id` run inside
    /// the round that asked for it? Its catalog entry says
    /// ([`Placement`]); a plugin's action and an unknown one never do.
    pub fn immediate(&self, action: &str, params: &Value, run_id: &str) -> bool {
        if self.external.as_ref().is_some_and(|e| e.handles(action)) {
            return false;
        }
        match placement(action) {
            Placement::Dispatched => false,
            Placement::InRound => true,
            Placement::InRoundForOwnRun => params
                .get("workflow_id")
                .and_then(Value::as_str)
                .is_none_or(|id| id.is_empty() || id == run_id),
            Placement::InRoundForCel => {
                params.get("language").and_then(Value::as_str) == Some("cel")
            }
        }
    }

    /// Do calls of `action` only read, so that one may start while the
    /// commit of its start is written? Its catalog entry says
    /// (`reads_only`); a plugin's action and an unknown one never do.
    pub fn reads_only(&self, action: &str) -> bool {
        !self.external.as_ref().is_some_and(|e| e.handles(action))
            && entry(action).is_some_and(|spec| spec.reads_only)
    }

    /// Runs one call; secret values it was given are masked in its result,
    /// a result larger than the limit is the call's failure, and so is a
    /// panic in the action.
    pub async fn run(&self, call: &Call) -> Result<Value, ActionError> {
        let run = std::panic::AssertUnwindSafe(self.run_unmasked(call));
        let result = match futures::FutureExt::catch_unwind(run).await {
            Ok(result) => result.and_then(|output| self.bounded(output)),
            Err(_) => Err(ActionError::execution(format!(
                "the action `{}` failed inside (a panic); the daemon carries on",
                call.action
            ))),
        };
        if call.revealed.is_empty() {
            return result;
        }
        match result {
            Ok(output) => Ok(call.revealed.value(&output)),
            Err(error) => Err(ActionError {
                message: call.revealed.text(&error.message),
                details: error.details.as_ref().map(|d| call.revealed.value(d)),
                ..error
            }),
        }
    }

    /// `output`, unless it is larger than the output limit (R0130).
    fn bounded(&self, output: Value) -> Result<Value, ActionError> {
        let max = self.limits.output_bytes;
        let bytes = crate::limits::json_bytes(&output, max);
        if bytes > max {
            return Err(opcode_vm::limits::exceeded(
                "output_bytes",
                bytes,
                max,
                format!("the action's output is larger than {max} bytes (limits.output_bytes)"),
            ));
        }
        Ok(output)
    }

    async fn run_unmasked(&self, call: &Call) -> Result<Value, ActionError> {
        if let Some(external) = self.external.as_ref().filter(|e| e.handles(&call.action)) {
            return external.run(call).await;
        }
        let (family, name) = call
            .action
            .split_once('.')
            .unwrap_or((call.action.as_str(), ""));
        match family {
            "http" => http::run(&self.http, name, call).await,
            "fs" => fs::run(name, call, call.base(&self.base_dir), &self.isolation).await,
            "shell" => shell::run(call, call.base(&self.base_dir), &self.isolation).await,
            "crypto" => crypto::run(name, call),
            "assert" => assert::run(name, call),
            "expr" => expr::run(call, self.evaluator.as_deref(), &self.limits).await,
            "json" => json::run(call, self.evaluator.as_deref(), &self.limits).await,
            "agent" => {
                let base = call.base(&self.base_dir);
                let services = self.services.as_ref();
                crate::agents::run(call, base, &self.isolation, &self.agents, services).await
            }
            "workflow" if matches!(name, "log" | "emit" | "notify") => {
                workflow::run(name, &call.masked(), self.services.as_ref()).await
            }
            "workflow" if name == "map" => {
                crate::actions::map::run(call, self.services.as_ref(), self.limits.map_items).await
            }
            "workflow" => workflow::run(name, call, self.services.as_ref()).await,
            _ => Err(ActionError::new(
                opcode_vm::codes::R0107,
                "ACTION_UNAVAILABLE",
                format!("action `{}` is not available", call.action),
                false,
            )),
        }
    }
}

/// The catalog entry of the built-in action `action`, if there is one.
fn entry(action: &str) -> Option<&'static ActionSpec> {
    static ENTRIES: std::sync::OnceLock<HashMap<String, ActionSpec>> = std::sync::OnceLock::new();
    ENTRIES
        .get_or_init(|| {
            crate::catalog()
                .into_iter()
                .map(|spec| (spec.name.clone(), spec))
                .collect()
        })
        .get(action)
}

/// Where calls of the built-in action `action` run, from its catalog entry.
fn placement(action: &str) -> Placement {
    entry(action).map(|spec| spec.placement).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use opcode_vm::effect::{SecretPart, SecretSite};
    use serde_json::json;

    use super::*;
    use crate::call::testing::Turns;

    /// A plugin providing the actions whose names start with its prefix.
    struct Plugin(&'static str);

    impl ExternalActions for Plugin {
        fn handles(&self, action: &str) -> bool {
            action.starts_with(self.0)
        }
        fn run<'a>(&'a self, _: &'a Call) -> BoxFuture<'a, Result<Value, ActionError>> {
            Box::pin(std::future::ready(Ok(Value::Null)))
        }
    }

    #[tokio::test]
    async fn a_missing_secret_says_how_to_set_it() {
        let site = SecretSite {
            path: Vec::new(),
            parts: vec![SecretPart::Secret("NOT_SET_ANYWHERE_XYZ".into())],
        };
        let Err(error) = resolve_secrets(&json!("x"), &[site], &EnvSecrets).await else {
            panic!("an unset secret resolved");
        };
        assert_eq!(error.code, "R0102");
        assert!(
            error
                .message
                .contains("opcode secret set NOT_SET_ANYWHERE_XYZ")
                && error.message.contains("OPCODE_SECRET_NOT_SET_ANYWHERE_XYZ"),
            "{}",
            error.message
        );
    }

    #[test]
    fn only_calls_that_may_touch_the_workspace_need_it() {
        let actions = Actions::new(Arc::new(Turns::default()), PathBuf::from("."));
        let ws = Path::new("/var/lib/opcode/workspaces/r1");
        let uses = |action: &str, params: Value| actions.uses_workspace(action, &params, ws);
        assert!(!uses("http.get", json!({"url": "http://example.com"})));
        assert!(!uses("crypto.hash", json!({"data": "x"})));
        assert!(!uses("workflow.log", json!({"message": "x"})));
        assert!(!uses("fs.stat", json!({"path": "/etc/hostname"})));
        assert!(!uses("fs.read", json!({"path": "/srv/data/../in.txt"})));
        // Relative paths and paths inside it resolve in the workspace.
        assert!(uses("fs.stat", json!({"path": "out.txt"})));
        assert!(uses(
            "fs.list",
            json!({"path": "/var/lib/opcode/workspaces/r1/out"})
        ));
        assert!(uses(
            "fs.read",
            json!({"path": "/var/lib/opcode/workspaces/x/../r1/a"})
        ));
        assert!(uses("fs.read", json!({})));
        // Writes, processes, agents and plugins may use it wherever they point.
        assert!(uses(
            "fs.write",
            json!({"path": "/tmp/out.txt", "content": "x"})
        ));
        assert!(uses("shell.exec", json!({"command": "ls"})));
        assert!(uses("agent.run", json!({"prompt": "x"})));
        assert!(uses(
            "expr.eval",
            json!({"expression": "1", "language": "jq"})
        ));
        let plugged = Actions::new(Arc::new(Turns::default()), PathBuf::from("."))
            .with_external(Some(Arc::new(Plugin("crypto."))));
        assert!(plugged.uses_workspace("crypto.hash", &json!({}), ws));
    }

    #[test]
    fn immediate_actions_are_computations_in_process() {
        let actions = Actions::new(Arc::new(Turns::default()), PathBuf::from("."));
        let none = json!({});
        let cel = json!({"expression": "1", "language": "cel"});
        let expr = json!({"expression": "1..9", "language": "expr"});
        assert!(actions.immediate("expr.eval", &cel, "r"));
        // Expr, or a language only its text tells, runs in a process of its own.
        assert!(!actions.immediate("expr.eval", &expr, "r"));
        assert!(!actions.immediate("expr.eval", &none, "r"));
        for action in [
            "assert.equals",
            "crypto.hash",
            "workflow.emit",
            "workflow.fail",
        ] {
            assert!(actions.immediate(action, &none, "r"), "{action}");
        }
        for action in [
            "json.jq",
            "http.get",
            "fs.read",
            "shell.exec",
            "workflow.run",
            "workflow.map",
        ] {
            assert!(!actions.immediate(action, &none, "r"), "{action}");
        }
        for spec in crate::catalog() {
            let family = spec.name.split('.').next().unwrap_or_default();
            if matches!(family, "assert" | "crypto") {
                assert_eq!(spec.placement, Placement::InRound, "{}", spec.name);
            }
            if matches!(family, "http" | "fs" | "shell" | "json") {
                assert_eq!(spec.placement, Placement::Dispatched, "{}", spec.name);
            }
        }
        let own = json!({"action": "read", "workflow_id": "r"});
        let other = json!({"action": "read", "workflow_id": "other"});
        assert!(actions.immediate("workflow.context", &own, "r"));
        assert!(!actions.immediate("workflow.context", &other, "r"));
        // A plugin that takes a built-in family's names runs them its way.
        let plugged = Actions::new(Arc::new(Turns::default()), PathBuf::from("."))
            .with_external(Some(Arc::new(Plugin("crypto."))));
        assert!(!plugged.immediate("crypto.hash", &none, "r"));
        assert!(plugged.immediate("expr.eval", &cel, "r"));
    }

    #[test]
    fn only_reads_of_files_start_before_their_commit() {
        let actions = Actions::new(Arc::new(Turns::default()), PathBuf::from("."));
        let reads: Vec<String> = crate::catalog()
            .into_iter()
            .filter(|spec| actions.reads_only(&spec.name))
            .map(|spec| spec.name)
            .collect();
        assert_eq!(reads, ["fs.read", "fs.list", "fs.stat"]);
        assert!(!actions.reads_only("no.such"));
        // A plugin's `fs.read` may do anything.
        let plugged = Actions::new(Arc::new(Turns::default()), PathBuf::from("."))
            .with_external(Some(Arc::new(Plugin("fs."))));
        assert!(!plugged.reads_only("fs.read"));
    }
}
