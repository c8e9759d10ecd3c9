//! One case: compile its workflow, run it through the engine's executor
//! over an in-memory store on a virtual clock (a runtime of its own whose
//! time is paused: waits and timeouts pass at once, in order), answer it,
//! and match what it did against what the case expects.

use std::path::Path;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use opcode_runtime::driver::{self, Answers};
use opcode_runtime::store::RunLog;
use opcode_runtime::store::memory::MemoryStore;
use opcode_runtime::summary::{View, summary};
use opcode_runtime::{Config, EventStore, StartRequest};
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
    /// Crash points tried (`--crash-points`), all told.
    pub crash_points: usize,
    /// Of those, the kills of a run while it recovered from an earlier one.
    pub crashes_in_recovery: usize,
}

/// The id of the run under test (its children's ids start with it).
const ROOT: &str = "run";
/// A day: the background loop's poll and the driver's look without news
/// (both are woken by what happens; on a virtual clock a shorter nap would
/// only cost turns).
const DAY: Duration = Duration::from_hours(24);

/// Runs `case` of `file` (read from `path`); with `crash_points`, again
/// from every commit of the run as if the process had died right after it.
pub fn run_case(path: &Path, file: &TestFile, case: &Case, crash_points: bool) -> Outcome {
    let started = Instant::now();
    let mut outcome = Outcome {
        name: case.name.clone(),
        failures: Vec::new(),
        virtual_ms: 0,
        wall: Duration::ZERO,
        crash_points: 0,
        crashes_in_recovery: 0,
    };
    if let Err(failure) = attempt(path, file, case, crash_points, &mut outcome) {
        outcome.failures.push(failure);
    }
    outcome.wall = started.elapsed();
    outcome
}

/// A case ready to run: its program's request, and its mocks.
struct Prepared {
    request: StartRequest,
    steps: Vec<String>,
    mocks: std::collections::BTreeMap<String, Mock>,
}

impl Prepared {
    fn stand_in(&self) -> Arc<Mocks> {
        Arc::new(Mocks::new(ROOT, self.steps.clone(), self.mocks.clone()))
    }
}

fn attempt(
    path: &Path,
    file: &TestFile,
    case: &Case,
    crash_points: bool,
    outcome: &mut Outcome,
) -> Result<(), String> {
    let (name, text, base) = source(path, file, case)?;
    let (program, diagnostics) = crate::check::compiler().compile(&text, &name);
    let codes: Vec<&str> = diagnostics.iter().map(|d| d.code.id).collect();
    if let Some(want) = &case.expect.diagnostics {
        let missing: Vec<&String> = want
            .iter()
            .filter(|c| !codes.contains(&c.as_str()))
            .collect();
        if !missing.is_empty() {
            outcome
                .failures
                .push(format!("expected diagnostics {missing:?}, got {codes:?}"));
        }
        return Ok(());
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
    let steps = program.steps.iter().map(|s| s.id.clone()).collect();
    let request = StartRequest {
        id: Some(ROOT.to_owned()),
        ..crate::run::start_request(text, program, inputs, "opcodec-test", base)
    };
    let prepared = Prepared {
        request,
        steps,
        mocks,
    };
    let stand_in = prepared.stand_in();
    let store = Arc::new(MemoryStore::new());
    if crash_points {
        store.keep_snapshots();
    }
    let reference = paused(run(&prepared, case, store.clone(), stand_in.clone(), None))?;
    outcome.virtual_ms = reference.virtual_ms;
    outcome.failures.extend(reference.refused);
    outcome.failures.extend(
        stand_in
            .refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned(),
    );
    outcome.failures.extend(stand_in.unused());
    outcome.failures.extend(compare(case, &reference.view));
    if crash_points && outcome.failures.is_empty() {
        let want = opcode_runtime::summary::untimed(&reference.view);
        crash_at_every_commit(&prepared, case, &store, &want, outcome, &[])?;
    }
    Ok(())
}

/// Runs `work` on a runtime of its own whose clock is paused.
fn paused<T>(work: impl Future<Output = Result<T, String>>) -> Result<T, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?
        .block_on(work)
}

/// How many kills in a row a crash-point run tries: one after each commit
/// of the reference run, and a second after each commit the recovery from
/// the first makes (a daemon killed again while it recovers).
const CRASH_DEPTH: usize = 2;

/// Recovers the run from each commit the run on `store` made (a fresh
/// executor over the store as it was right after that commit, as after a
/// kill -9), takes it to rest, and checks that it ends as the reference
/// did and that no step instance completed before the crash is called
/// again; below [`CRASH_DEPTH`], kills each recovery again the same way.
fn crash_at_every_commit(
    prepared: &Prepared,
    case: &Case,
    store: &MemoryStore,
    want: &Value,
    outcome: &mut Outcome,
    earlier: &[String],
) -> Result<(), String> {
    let snapshots = store.snapshots();
    let total = snapshots.len();
    for (n, snapshot) in snapshots.into_iter().enumerate() {
        let (row, steps) = paused(async {
            let row = snapshot.workflow(ROOT).await.map_err(|e| e.to_string())?;
            let steps = snapshot.steps(ROOT).await.map_err(|e| e.to_string())?;
            Ok((row, steps))
        })?;
        let Some(row) = row.filter(|r| !r.status.is_ended()) else {
            continue;
        };
        outcome.crash_points += 1;
        if !earlier.is_empty() {
            outcome.crashes_in_recovery += 1;
        }
        let done: Vec<String> = steps
            .into_iter()
            .filter(|s| s.status == opcode_vm::StepStatus::Completed)
            .map(|s| s.step_id)
            .collect();
        snapshot.expire_leases();
        let deeper = earlier.len() + 1 < CRASH_DEPTH;
        if deeper {
            snapshot.keep_snapshots();
        }
        let snapshot = Arc::new(snapshot);
        let stand_in = prepared.stand_in();
        let recovered = paused(run(
            prepared,
            case,
            snapshot.clone(),
            stand_in.clone(),
            Some(row.last_seq),
        ))?;
        let mut at: Vec<String> = earlier.to_vec();
        at.push(format!("after commit {} of {total}", n + 1));
        let label = format!("crashed {}", at.join(", then during the recovery "));
        let got = opcode_runtime::summary::untimed(&recovered.view);
        if &got != want {
            let mut differences = Vec::new();
            mismatches("", want, Some(&got), &mut differences);
            outcome.failures.push(format!(
                "{label}, the run ends differently: {}",
                differences.join("; ")
            ));
        }
        let called = stand_in
            .called
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(again) = done.iter().find(|d| called.contains(d)) {
            outcome.failures.push(format!(
                "{label}, step `{again}` ran again though it had completed"
            ));
        }
        if outcome.failures.is_empty() && deeper {
            crash_at_every_commit(prepared, case, &snapshot, want, outcome, &at)?;
        }
        if !outcome.failures.is_empty() {
            break;
        }
    }
    Ok(())
}

/// The case's workflow: its name, its text, and the folder paths resolve in.
fn source(
    path: &Path,
    file: &TestFile,
    case: &Case,
) -> Result<(String, String, std::path::PathBuf), String> {
    let folder = std::path::absolute(folder_of(path)).map_err(|e| e.to_string())?;
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

/// The folder of `path` (`.` for a bare file name).
pub fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder,
        _ => Path::new("."),
    }
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

/// How a run came to rest.
struct Ran {
    view: Value,
    virtual_ms: u64,
    refused: Vec<String>,
}

/// Starts the run on `store` (or, with `recovered_after`, recovers it there:
/// the signals it had not taken yet, those after that sequence, are sent
/// again), answers it until it rests, and reads its view.
async fn run(
    prepared: &Prepared,
    case: &Case,
    store: Arc<MemoryStore>,
    stand_in: Arc<Mocks>,
    recovered_after: Option<u64>,
) -> Result<Ran, String> {
    let request = prepared.request.clone();
    let config = Config {
        poll: DAY,
        ..crate::run::config_for(request.base_dir.clone().unwrap_or_default())
    };
    let executor = crate::run::engine(store.clone() as Arc<dyn EventStore>, config);
    executor.set_stand_in(stand_in);
    let _background = executor.background();
    let mut answers = Answers {
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
    let id = match recovered_after {
        None => executor.start(request).await.map_err(|e| e.to_string())?,
        Some(last_seq) => {
            answers.signals = unsent_signals(&store, last_seq, &answers.signals).await?;
            executor.recover().await.map_err(|e| e.to_string())?;
            ROOT.to_owned()
        }
    };
    let rest = driver::attend(&executor, &id, &answers)
        .await
        .map_err(|e| e.to_string())?;
    let virtual_ms = opcode_runtime::time::now_ms().saturating_sub(began);
    let view = summary(store.as_ref(), &id, &View::full())
        .await
        .map_err(|e| e.to_string())?
        .unwrap_or(Value::Null);
    executor.shutdown(Duration::from_secs(1)).await;
    // After a recovery, answers given before the crash are not asked again.
    let refused = if recovered_after.is_some() {
        Vec::new()
    } else {
        rest.refused
    };
    Ok(Ran {
        view,
        virtual_ms,
        refused,
    })
}

/// The case's signals the run's log (up to `last_seq`) has not taken yet.
async fn unsent_signals(
    store: &MemoryStore,
    last_seq: u64,
    signals: &[(String, Value)],
) -> Result<Vec<(String, Value)>, String> {
    let entries = store
        .entries(ROOT, 0, true)
        .await
        .map_err(|e| e.to_string())?;
    let taken = entries
        .iter()
        .filter(|e| e.seq <= last_seq)
        .filter_map(|e| opcode_runtime::log::decode(e).ok())
        .filter(|(_, event)| matches!(event, opcode_vm::event::Event::Signal { .. }))
        .count();
    Ok(signals.iter().skip(taken).cloned().collect())
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
