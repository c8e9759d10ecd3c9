//! Running an example through the engine's executor, over an in-memory
//! store, and checking what it produced.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use libtest_mimic::Failed;
use opcode_runtime::driver::{self, Answers};
use opcode_runtime::store::memory::MemoryStore;
use opcode_runtime::{Config, Executor, StartRequest};
use opcode_stdlib::exec::{BoxFuture, Secrets};
use serde_json::Value;

use crate::expect::{self, Run};
use crate::mock::Mock;
use crate::replay::Calls;

/// Replaces `{mock}`, `{dir}` and `{example}` in every string of `value`.
fn substitute(value: &Value, vars: &[(&str, &str)]) -> Value {
    match value {
        Value::String(s) => {
            let mut out = s.clone();
            for (name, with) in vars {
                out = out.replace(&format!("{{{name}}}"), with);
            }
            Value::String(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| substitute(v, vars)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), substitute(v, vars)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Secrets for the tests: `secret-NAME`.
struct NoSecrets;

impl Secrets for NoSecrets {
    fn secret<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(std::future::ready(Some(format!("secret-{name}"))))
    }
}

/// A finished run of an example, in its own engine.
pub struct Outcome {
    /// The store the run lives in.
    pub store: Arc<MemoryStore>,
    /// The run.
    pub id: String,
    /// Its summary.
    pub summary: Value,
    /// The answers to give it (again, when it is recovered).
    pub answers: Answers,
    /// Which call each of its effects was.
    pub calls: Arc<Calls>,
}

/// An engine over a fresh in-memory store whose relative paths (and
/// child templates: the other examples) resolve in `dir`; the store keeps
/// a copy of itself after each commit, for the recovery checks.
pub fn engine(dir: &Path) -> (Arc<MemoryStore>, Executor) {
    let store = Arc::new(MemoryStore::new());
    store.keep_snapshots();
    (store.clone(), engine_over(store, dir))
}

/// An executor over `store` whose relative paths resolve in `dir`.
pub fn engine_over(store: Arc<MemoryStore>, dir: &Path) -> Executor {
    let config = Config {
        base_dir: dir.to_path_buf(),
        ..Config::default()
    };
    Executor::new(store, Arc::new(NoSecrets), config)
}

/// The runtime a trial runs in.
pub fn runtime() -> Result<tokio::runtime::Runtime, Failed> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failed::from(e.to_string()))
}

/// The answers of `run`.
pub fn answers(run: &Run) -> Answers {
    Answers {
        decisions: run.decide.clone().into_iter().collect(),
        signals: run.signals.clone(),
        max_wait: Duration::from_secs(10),
        decider: "opcodec".into(),
        reasoning: "answered on the command line".into(),
        recheck: None,
    }
}

/// How long a run (or a recovery) may take to come to rest: a run that
/// hangs fails its test instead of holding the suite.
const REST_WITHIN: Duration = Duration::from_mins(1);

/// Attends run `id` of `executor` and reads its summary, with the answers
/// the run refused.
pub async fn settle(
    executor: &Executor,
    store: &MemoryStore,
    id: &str,
    answers: &Answers,
) -> Result<(Value, Vec<String>), String> {
    let rest = tokio::time::timeout(REST_WITHIN, driver::attend(executor, id, answers))
        .await
        .map_err(|_| format!("the run did not come to rest within {REST_WITHIN:?}"))?
        .map_err(|e| e.to_string())?;
    let summary =
        opcode_runtime::summary::summary(store, id, &opcode_runtime::summary::View::full())
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the run is gone")?;
    Ok((summary, rest.refused))
}

/// Compiles and runs the workflow of `dir` with `inputs`, to rest.
async fn run_workflow(
    dir: &Path,
    inputs: Value,
    run: &Run,
) -> Result<(Outcome, Vec<String>), String> {
    let text = std::fs::read_to_string(dir.join("workflow.json")).map_err(|e| e.to_string())?;
    let (store, executor) = engine(dir);
    let calls = Arc::new(Calls::default());
    executor.set_stand_in(calls.clone());
    let (program, diagnostics) = executor.compiler().compile(&text, "workflow.json");
    let program = program.ok_or_else(|| {
        format!(
            "does not compile: {:?}",
            diagnostics.iter().next().map(|d| &d.message)
        )
    })?;
    let inputs =
        opcode_stdlib::inputs::prepare(&program, &inputs).map_err(|e| format!("inputs: {e:?}"))?;
    let _background = executor.background();
    let request = StartRequest {
        definition: text,
        program: Some(program),
        inputs,
        agent_id: Some("tests".into()),
        ..StartRequest::default()
    };
    let id = executor.start(request).await.map_err(|e| e.to_string())?;
    let answers = answers(run);
    let (summary, refused) = settle(&executor, &store, &id, &answers).await?;
    executor.shutdown(Duration::from_secs(1)).await;
    Ok((
        Outcome {
            store,
            id,
            summary,
            answers,
            calls,
        },
        refused,
    ))
}

/// Runs an example and checks its expectations; returns the outcome.
pub fn check_run(dir: &Path) -> Result<Option<Outcome>, Failed> {
    let expect = expect::load(dir)?;
    let Some(run) = expect.run else {
        return Ok(None);
    };
    runtime()?.block_on(async {
        let mock = Mock::start(run.mock.clone()).await;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp =
            std::env::temp_dir().join(format!("opcode-conformance-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
        for command in &run.setup {
            let status = std::process::Command::new("sh")
                .arg("-c")
                .arg(command)
                .current_dir(&tmp)
                .env("EXAMPLE", dir)
                .status()
                .map_err(|e| e.to_string())?;
            if !status.success() {
                return Err(Failed::from(format!("setup `{command}` failed")));
            }
        }
        let tmp_text = tmp.display().to_string();
        let dir_text = dir.display().to_string();
        let vars = [
            ("mock", mock.base.as_str()),
            ("dir", tmp_text.as_str()),
            ("example", dir_text.as_str()),
        ];
        let inputs = substitute(&run.inputs, &vars);
        let (outcome, refused) = run_workflow(dir, inputs, &run).await?;
        let got = &outcome.summary;
        let mut problems: Vec<String> = refused.iter().map(|r| format!("refused: {r}")).collect();
        if got["status"] != run.status {
            problems.push(format!(
                "status: expected {}, got {}",
                run.status, got["status"]
            ));
        }
        for (pointer, want) in &run.expect {
            let want = substitute(want, &vars);
            match got.pointer(pointer) {
                Some(value) if *value == want => {}
                other => problems.push(format!(
                    "{pointer}: expected {want}, got {}",
                    other.map_or("nothing".into(), ToString::to_string)
                )),
            }
        }
        // A summary leaves out what has no value: absent counts as null.
        for pointer in &run.expect_null {
            match got.pointer(pointer) {
                Some(Value::Null) | None => {}
                other => problems.push(format!(
                    "{pointer}: expected null, got {}",
                    other.map_or("nothing".into(), ToString::to_string)
                )),
            }
        }
        let seen = mock.seen();
        for (request, count) in &run.requests {
            let n = seen
                .iter()
                .filter(|s| format!("{} {}", s.method, s.path) == *request)
                .count();
            if n != *count {
                problems.push(format!("requests `{request}`: expected {count}, got {n}"));
            }
        }
        let _ = std::fs::remove_dir_all(&tmp);
        if problems.is_empty() {
            Ok(Some(outcome))
        } else {
            Err(Failed::from(format!(
                "{}\nsummary: {}",
                problems.join("\n"),
                serde_json::to_string_pretty(got).unwrap_or_default()
            )))
        }
    })
}
