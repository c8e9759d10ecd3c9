//! One case: compile its workflow, run it through the engine's executor
//! over an in-memory store on a virtual clock (a runtime of its own whose
//! time is paused: waits and timeouts pass at once, in order), answer it,
//! and match what it did against what the case expects.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use opcode_runtime::driver::{self, Answers};
use opcode_runtime::store::memory::MemoryStore;
use opcode_runtime::summary::{View, summary};
use opcode_runtime::{Config, EventStore, Executor, StartRequest};
use opcode_stdlib::exec::EnvSecrets;
use serde_json::Value;

use super::expect::{mismatches, short};
use super::file::{Case, Mock, TestFile};
use super::mocks::Mocks;

/// How a case went.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The case's name.
    pub name: String,
    /// Why it failed; empty when it passed.
    pub failures: Vec<String>,
    /// Virtual time the run took, in milliseconds.
    pub virtual_ms: u64,
    /// Wall-clock time the case took.
    pub wall: Duration,
}

/// The id of the run under test (its children's ids start with it).
const ROOT: &str = "run";
/// A day: the background loop's poll and the driver's look without news
/// (both are woken by what happens; on a virtual clock a shorter nap would
/// only cost turns).
const DAY: Duration = Duration::from_hours(24);

/// Runs `case` of `file` (read from `path`).
pub fn run_case(path: &Path, file: &TestFile, case: &Case) -> Outcome {
    let started = Instant::now();
    let (virtual_ms, failures) = match attempt(path, file, case) {
        Ok(done) => done,
        Err(failure) => (0, vec![failure]),
    };
    Outcome {
        name: case.name.clone(),
        failures,
        virtual_ms,
        wall: started.elapsed(),
    }
}

fn attempt(path: &Path, file: &TestFile, case: &Case) -> Result<(u64, Vec<String>), String> {
    let (name, text, base) = source(path, file, case)?;
    let (program, diagnostics) = crate::check::compiler().compile(&text, &name);
    let codes: Vec<&str> = diagnostics.iter().map(|d| d.code.id).collect();
    if let Some(want) = &case.expect.diagnostics {
        let missing: Vec<&String> = want
            .iter()
            .filter(|c| !codes.contains(&c.as_str()))
            .collect();
        return Ok((
            0,
            if missing.is_empty() {
                Vec::new()
            } else {
                vec![format!("expected diagnostics {missing:?}, got {codes:?}")]
            },
        ));
    }
    let Some(program) = program else {
        let errors: Vec<String> = diagnostics
            .iter()
            .filter(|d| d.severity == opcode_compiler::diagnostics::Severity::Error)
            .map(|d| format!("{}: {}", d.code.id, d.message))
            .collect();
        return Err(format!("{name} does not compile: {}", errors.join("; ")));
    };
    let mut mocks = file.mocks.clone();
    mocks.extend(case.mocks.iter().map(|(k, v)| (k.clone(), v.clone())));
    check_mocks(&mocks, &program)?;
    let inputs =
        opcode_stdlib::inputs::prepare(&program, case.inputs.as_ref().unwrap_or(&Value::Null))
            .map_err(|errors| {
                format!(
                    "the inputs do not match input_schema: {}",
                    errors.join("; ")
                )
            })?;
    let stand_in = Arc::new(Mocks {
        root: ROOT.to_owned(),
        steps: program.steps.iter().map(|s| s.id.clone()).collect(),
        by_name: mocks,
        refused: Mutex::new(Vec::new()),
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    let request = StartRequest {
        id: Some(ROOT.to_owned()),
        definition: text,
        program: Some(program),
        inputs,
        agent_id: Some("opcodec-test".into()),
        base_dir: Some(base.clone()),
        workspace: Some(base),
        ..StartRequest::default()
    };
    let (virtual_ms, view, mut failures) =
        runtime.block_on(run(request, case, stand_in.clone()))?;
    failures.extend(
        stand_in
            .refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned(),
    );
    failures.extend(compare(case, &view));
    Ok((virtual_ms, failures))
}

/// The case's workflow: its name, its text, and the folder paths resolve in.
fn source(
    path: &Path,
    file: &TestFile,
    case: &Case,
) -> Result<(String, String, std::path::PathBuf), String> {
    let folder = std::path::absolute(path.parent().unwrap_or_else(|| Path::new(".")))
        .map_err(|e| e.to_string())?;
    let workflow = match &case.workflow {
        Some(Value::String(p)) => folder.join(p),
        Some(inline @ Value::Object(_)) => {
            return Ok((
                format!("{} ({})", path.display(), case.name),
                inline.to_string(),
                folder,
            ));
        }
        Some(other) => {
            return Err(format!(
                "`workflow` is a path or a definition, not {}",
                short(other)
            ));
        }
        None => file.workflow_path(path)?,
    };
    let (name, text) = crate::check::read_source(&workflow)?;
    let base = workflow.parent().map_or(folder, Path::to_path_buf);
    Ok((name, text, base))
}

/// Mocks name a step of the workflow, an instance of one, or an action,
/// and their delays are durations.
fn check_mocks(
    mocks: &std::collections::BTreeMap<String, Mock>,
    program: &opcode_vm::Program,
) -> Result<(), String> {
    for (name, mock) in mocks {
        let step = name.split_once('[').map_or(name.as_str(), |(id, _)| id);
        if !name.contains('.') && program.step_by_id(step).is_none() {
            return Err(format!(
                "a mock names `{name}`, which is neither a step of the workflow nor an action"
            ));
        }
        for m in std::iter::once(mock).chain(mock.sequence.iter().flatten()) {
            if let Some(delay) = &m.delay {
                opcode_stdlib::exec::parse_duration(delay)
                    .map_err(|e| format!("mock `{name}`: `delay` {e}"))?;
            }
        }
    }
    Ok(())
}

/// Starts the run, answers it until it rests, and reads its view.
async fn run(
    request: StartRequest,
    case: &Case,
    stand_in: Arc<Mocks>,
) -> Result<(u64, Value, Vec<String>), String> {
    let base_dir = request.base_dir.clone().unwrap_or_default();
    let mut config = Config {
        base_dir,
        poll: DAY,
        ..Config::default()
    };
    config.isolation.helper = std::env::current_exe().ok();
    let store: Arc<dyn EventStore> = Arc::new(MemoryStore::new());
    let executor = Executor::new(store.clone(), Arc::new(EnvSecrets), config);
    executor.set_stand_in(stand_in);
    let _background = executor.background();
    let answers = Answers {
        decisions: case.decisions.clone().into_iter().collect(),
        signals: case
            .signals
            .iter()
            .map(|s| (s.name.clone(), s.payload.clone()))
            .collect(),
        // Every timeout is waited for: on a virtual clock that costs nothing.
        max_wait: DAY * 365 * 100,
        decider: "opcodec-test".into(),
        reasoning: "answered by the test case".into(),
        recheck: Some(DAY),
    };
    let began = opcode_runtime::time::now_ms();
    let id = executor.start(request).await.map_err(|e| e.to_string())?;
    let rest = driver::attend(&executor, &id, &answers)
        .await
        .map_err(|e| e.to_string())?;
    let virtual_ms = opcode_runtime::time::now_ms().saturating_sub(began);
    let view = summary(store.as_ref(), &id, &View::full())
        .await
        .map_err(|e| e.to_string())?
        .unwrap_or(Value::Null);
    executor.shutdown(Duration::from_secs(1)).await;
    Ok((virtual_ms, view, rest.refused))
}

/// The case's expectations against the run's view.
fn compare(case: &Case, view: &Value) -> Vec<String> {
    let e = &case.expect;
    let mut out = Vec::new();
    let status = Value::String(e.status.clone().unwrap_or_else(|| "completed".into()));
    mismatches("/status", &status, view.get("status"), &mut out);
    if !out.is_empty()
        && let Some(error) = view.get("error")
    {
        out.push(format!("the run's error: {}", short(error)));
    }
    if let Some(output) = &e.output {
        mismatches("/output", output, view.get("output"), &mut out);
    }
    if let Some(error) = &e.error {
        mismatches("/error", error, view.get("error"), &mut out);
    }
    for (step, want) in &e.steps {
        mismatches(
            &format!("/steps/{step}"),
            want,
            view["steps"].get(step),
            &mut out,
        );
    }
    for step in &e.never_ran {
        let status = view["steps"][step]["status"].as_str().unwrap_or("pending");
        if !matches!(status, "pending" | "skipped" | "cancelled") {
            out.push(format!(
                "step `{step}` ran (it is {status}); the case says it never runs"
            ));
        }
    }
    out
}
