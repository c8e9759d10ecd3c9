//! `opcode agent test`: an agent's eval suite (spec/agent-evals.md). Each
//! case is a one-step run of the agent's role on an executor over an
//! in-memory store, with the operator's settings (its agents, sandbox and
//! budgets): a disposable workspace made as a run's, filled from the
//! fixture, then checked against the case's post-conditions and removed.

mod checks;
mod fixture;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt as _;
use opcode_compiler::agent::suite::{Case, Suite};
use opcode_daemon::settings::{OwnFiles, Settings};
use opcode_runtime::StartRequest;
use opcode_runtime::executor::Executor;
use opcode_runtime::store::EventStore;
use opcode_runtime::store::memory::MemoryStore;
use opcode_runtime::summary::{View, summary};
use opcode_runtime::workspace::Workspaces;
use opcode_stdlib::isolation::DEFAULT_SANDBOX_ID;
use serde_json::{Map, Value, json};

use crate::cli::common::{executor, home};

/// The step id of a case's run.
const STEP: &str = "case";

/// What one case came to.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The case's name.
    pub name: String,
    /// Why it failed; empty when it passed.
    pub failures: Vec<String>,
    /// Wall-clock seconds it took.
    pub seconds: f64,
    /// How the agent's call ended: its `status`, or `failed`.
    pub status: String,
    /// What the agent said it did.
    pub summary: String,
}

/// Runs `suite`'s cases against `definition` (a definition with its
/// skills' text), `jobs` at a time, in the order they end.
pub async fn run(definition: &Value, suite: &Suite, jobs: usize) -> Result<Vec<Outcome>, String> {
    let settings = Settings::load(&Settings::file_in(&home()))?;
    let store: Arc<dyn EventStore> = Arc::new(MemoryStore::new());
    let files = OwnFiles {
        settings: Settings::file_in(&home()),
        ..OwnFiles::default()
    };
    let executor = executor(store.clone(), false, Some(&settings), &files)
        .await
        .map_err(|_| "the executor cannot start with these settings".to_owned())?;
    // Timers (a retry's backoff, a step's deadline) fire as in `opcode run`.
    let _background = executor.background();
    let spaces = workspaces(&settings)?;
    let role = definition["role"].as_str().unwrap_or("scout").to_owned();
    let runner = Runner {
        executor: &executor,
        store: store.as_ref(),
        spaces: &spaces,
        action: format!("agent.{role}"),
        definition,
    };
    let mut outcomes: Vec<Outcome> = futures::stream::iter(&suite.cases)
        .map(|case| runner.case(case))
        .buffer_unordered(jobs.max(1))
        .collect()
        .await;
    let order = |o: &Outcome| suite.cases.iter().position(|c| c.name == o.name);
    outcomes.sort_by_key(order);
    Ok(outcomes)
}

/// Where cases work: fresh directories beside the runs' own, owned by the
/// sandbox user, so the same sandbox reaches them.
fn workspaces(settings: &Settings) -> Result<Workspaces, String> {
    let data_dir = home().join(".opcode");
    let (root, owner) = match settings.workspaces(&data_dir)? {
        Workspaces::Fresh { root, owner } => (root, owner),
        Workspaces::Fixed(_) => (
            Workspaces::default_root(&data_dir),
            Some((DEFAULT_SANDBOX_ID, DEFAULT_SANDBOX_ID)),
        ),
    };
    Ok(Workspaces::Fresh {
        root: root.with_file_name("agent-evals"),
        owner,
    })
}

/// What every case shares.
struct Runner<'r> {
    executor: &'r Executor,
    store: &'r dyn EventStore,
    spaces: &'r Workspaces,
    action: String,
    definition: &'r Value,
}

impl Runner<'_> {
    async fn case(&self, case: &Case) -> Outcome {
        let started = Instant::now();
        let id = format!("eval-{}", uuid::Uuid::now_v7());
        let dir = self.spaces.for_run(&id);
        let ended = self.call(case, &id, &dir).await;
        let _ = tokio::fs::remove_dir_all(&dir).await;
        let (status, summary, failures) = match ended {
            Ok(ended) => {
                let failures = ended.failures;
                (ended.status, ended.summary, failures)
            }
            Err(why) => ("failed".into(), String::new(), vec![why]),
        };
        Outcome {
            name: case.name.clone(),
            failures,
            seconds: started.elapsed().as_secs_f64(),
            status,
            summary,
        }
    }

    /// Runs `case` as run `id` in `dir`, and checks it there.
    async fn call(&self, case: &Case, id: &str, dir: &Path) -> Result<Ended, String> {
        self.spaces
            .ensure(dir)
            .map_err(|e| format!("cannot make the case's workspace {}: {e}", dir.display()))?;
        let owner = match self.spaces {
            Workspaces::Fresh { owner, .. } => *owner,
            Workspaces::Fixed(_) => None,
        };
        fixture::fill(dir, case, owner).await?;
        let text =
            json!({"steps": [{"id": STEP, "action": self.action, "params": self.params(case)}]})
                .to_string();
        let compiler = opcode_compiler::Compiler::new().with_actions(opcode_stdlib::catalog());
        let (program, diagnostics) = compiler.compile(&text, "eval.json");
        let Some(program) = program else {
            let said: Vec<String> = diagnostics.iter().map(|d| d.message.clone()).collect();
            return Err(format!("the case cannot run: {}", said.join("; ")));
        };
        let children = self.executor.changes();
        let request = StartRequest {
            id: Some(id.to_owned()),
            definition: text,
            program: Some(program),
            agent_id: Some("agent-test".into()),
            workspace: Some(dir.to_path_buf()),
            base_dir: Some(dir.to_path_buf()),
            ..StartRequest::default()
        };
        self.executor
            .start(request)
            .await
            .map_err(|e| e.to_string())?;
        self.executor
            .settled_or_held(id, None, children)
            .await
            .map_err(|e| e.to_string())?;
        let run = summary(self.store, id, &View::full())
            .await
            .map_err(|e| e.to_string())?
            .unwrap_or_default();
        let step = &run["steps"][STEP];
        let (status, said) = match step.get("output").filter(|o| !o.is_null()) {
            Some(output) => (
                output["status"].as_str().unwrap_or("completed").to_owned(),
                output["summary"].as_str().unwrap_or_default().to_owned(),
            ),
            None => ("failed".to_owned(), String::new()),
        };
        let mut failures = checks::check(&case.expect, &status, step, dir).await;
        if run["status"] != "completed" && run["status"] != "failed" {
            failures.push(format!(
                "the run did not end ({}): an eval answers no decision",
                run["status"].as_str().unwrap_or("?")
            ));
        }
        Ok(Ended {
            status,
            summary: said,
            failures,
        })
    }

    /// The step's parameters: the case's prompt and budgets over the
    /// definition's fields; a permission request is denied (no one is
    /// there to answer) unless the definition allows them.
    fn params(&self, case: &Case) -> Map<String, Value> {
        let mut params = Map::new();
        params.insert("prompt".into(), case.prompt.clone().into());
        if let Some(steps) = case.max_steps {
            params.insert("max_steps".into(), steps.into());
        }
        if let Some(timeout) = &case.timeout {
            params.insert("timeout".into(), timeout.clone().into());
        }
        opcode_stdlib::agents::release::defaults(self.definition, &mut params);
        if params.get("permissions").and_then(Value::as_str) != Some("allow") {
            params.insert("permissions".into(), "deny".into());
        }
        params
    }
}

/// A case's call, ended.
struct Ended {
    status: String,
    summary: String,
    failures: Vec<String>,
}
