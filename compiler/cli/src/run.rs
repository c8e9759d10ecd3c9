//! `opcodec run FILE`: compile and run a workflow in memory, with the
//! engine's executor over its in-memory store (the daemon's code path).
//!
//! Relative paths (files, `shell.exec` working directory, scripts) resolve
//! against the workflow file's folder. Reasoning steps are answered with
//! `--decide STEP=CHOICE` (or `STEP[i]=CHOICE` for one loop instance);
//! named signals are sent with `--signal NAME=JSON`; secrets come from
//! `OPCODE_SECRET_<NAME>` environment variables; `workflow.run` runs `<template>.json` or `<template>/workflow.json` found
//! next to the workflow (or in a sibling folder); a child that waits for a
//! decision nobody answered, or a signal nobody sent, holds its parent,
//! which rests as suspended (exit 3), the child named and its question
//! shown.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use opcode_runtime::driver::{self, Answers};
use opcode_runtime::executor::{LogLine, Observer};
use opcode_runtime::store::memory::MemoryStore;
use opcode_runtime::store::{EntryKind, EventName};
use opcode_runtime::{Config, EventStore, ExecError, Executor, StartRequest};
use opcode_stdlib::exec::EnvSecrets;
use opcode_stdlib::inputs::{pairs, parse_inputs, parse_value};
use serde_json::Value;

use crate::compile::compile_file;
use crate::output::{ColorChoice, Format, eprint_line, print};

/// Arguments of `run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The workflow file.
    file: PathBuf,
    /// The run's inputs, as a JSON object.
    #[arg(long)]
    inputs: Option<String>,
    /// One input, `KEY=VALUE` (VALUE is parsed as JSON when it is JSON, else taken as text). Repeatable.
    #[arg(long = "input", value_name = "KEY=VALUE")]
    input: Vec<String>,
    /// Answers reasoning step STEP with CHOICE every time it asks, or only
    /// one of its loop instances (`review[2]=no`, which wins over
    /// `review=yes`); an answer no decision used is an error. Repeatable.
    #[arg(long, value_name = "STEP=CHOICE")]
    decide: Vec<String>,
    /// Sends signal NAME with a JSON payload after the start. Repeatable.
    #[arg(long, value_name = "NAME=JSON")]
    signal: Vec<String>,
    /// Output format; `json` is `{status, output, steps, pending_decisions, error}`.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// When only decisions or signals are pending, wait this long for their timeouts before reporting the run suspended.
    #[arg(long, default_value = "60s", value_parser = parse_wait)]
    max_wait: std::time::Duration,
    /// Colour diagnostics.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
}

/// Exit codes of `run`.
const EXIT_FAILED: u8 = 1;
const EXIT_COMPILE: u8 = 2;
const EXIT_SUSPENDED: u8 = 3;

/// Runs `run`.
pub fn run(args: &Args) -> u8 {
    let inputs = match parse_inputs(args.inputs.as_deref(), &args.input) {
        Ok(v) => v,
        Err(message) => {
            eprint_line(&format!("error: {message}"));
            return EXIT_COMPILE;
        }
    };
    let decisions = match pairs(&args.decide, "--decide") {
        Ok(p) => p.into_iter().collect::<HashMap<_, _>>(),
        Err(message) => {
            eprint_line(&format!("error: {message}"));
            return EXIT_COMPILE;
        }
    };
    let signals = match pairs(&args.signal, "--signal") {
        Ok(p) => p.into_iter().map(|(k, v)| (k, parse_value(&v))).collect(),
        Err(message) => {
            eprint_line(&format!("error: {message}"));
            return EXIT_COMPILE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprint_line(&format!("error: cannot start the runtime: {e}"));
            return EXIT_COMPILE;
        }
    };
    let options = Options {
        answers: Answers {
            decisions,
            signals,
            max_wait: args.max_wait,
            decider: "opcodec".into(),
            reasoning: "answered on the command line".into(),
            recheck: None,
        },
        json: args.format == Format::Json,
        color: args.color.enabled(),
    };
    let result = runtime.block_on(run_file(&args.file, inputs, &options));
    match result {
        Err(code) => code,
        Ok(summary) => {
            match args.format {
                Format::Json => print(&format!(
                    "{}\n",
                    serde_json::to_string_pretty(&summary).unwrap_or_default()
                )),
                Format::Human => print(&opcode_stdlib::report::human(&summary)),
            }
            match summary["status"].as_str() {
                Some("completed") => 0,
                Some("suspended") => EXIT_SUSPENDED,
                _ => EXIT_FAILED,
            }
        }
    }
}

/// Why a `--signal` would never be read: no wait step of `program` takes
/// its name (a signal matches a wait step by its signal or its id).
fn unawaited_signal(program: &opcode_vm::Program, signals: &[(String, Value)]) -> Option<String> {
    let awaited = program.awaited_signals();
    let mut names: Vec<&str> = awaited
        .iter()
        .flat_map(|(step, name)| [*name, *step])
        .collect();
    names.sort_unstable();
    names.dedup();
    let (name, _) = signals
        .iter()
        .find(|(name, _)| !names.contains(&name.as_str()))?;
    let close = opcode_compiler::diagnostics::did_you_mean(name, &names)
        .map_or(String::new(), |c| format!(": did you mean `{c}`?"));
    Some(if names.is_empty() {
        format!("--signal {name}: the workflow has no wait step that takes a signal")
    } else {
        format!(
            "--signal {name}: no wait step takes it{close} (the workflow waits for {})",
            names.join(", ")
        )
    })
}

struct Options {
    answers: Answers,
    json: bool,
    color: bool,
}

/// Compiles and runs one file in an engine over an in-memory store;
/// `Err` is an exit code (already reported).
async fn run_file(path: &Path, inputs: Value, options: &Options) -> Result<Value, u8> {
    let program = compile_file(path, options.color)
        .map_err(|code| if code == 1 { EXIT_COMPILE } else { code })?;
    let inputs = opcode_stdlib::inputs::prepare(&program, &inputs).map_err(|errors| {
        eprint_line(&format!(
            "error[R0108]: the inputs do not match input_schema:\n  - {}",
            errors.join("\n  - ")
        ));
        EXIT_FAILED
    })?;
    unawaited_signal(&program, &options.answers.signals).map_or(Ok(()), |message| {
        eprint_line(&format!("error[R0114]: {message}"));
        Err(EXIT_COMPILE)
    })?;
    let source = std::fs::read_to_string(path).map_err(|e| {
        eprint_line(&format!("error: cannot read {}: {e}", path.display()));
        EXIT_COMPILE
    })?;
    let base = folder_of(path);
    let store: Arc<dyn EventStore> = Arc::new(MemoryStore::new());
    let executor = engine(store.clone(), config_for(base.clone()));
    if !options.json {
        executor.set_observer(Arc::new(Stderr));
    }
    let _background = executor.background();
    let _events = (!options.json).then(|| print_emitted(&executor));
    let request = start_request(source, program, inputs, "opcodec", base);
    let fail = |e: ExecError| {
        eprint_line(&format!("error: {e}"));
        EXIT_FAILED
    };
    let id = executor.start(request).await.map_err(fail)?;
    let rest = driver::attend(&executor, &id, &options.answers)
        .await
        .map_err(fail)?;
    for refusal in &rest.refused {
        eprint_line(&format!("error: {refusal}"));
    }
    for note in &rest.notes {
        eprint_line(&format!("note: {note}"));
    }
    let summary = opcode_runtime::summary::summary(
        store.as_ref(),
        &id,
        &opcode_runtime::summary::View::full(),
    )
    .await
    .map_err(|e| fail(e.into()))?;
    executor.shutdown(std::time::Duration::from_secs(1)).await;
    Ok(summary.unwrap_or(Value::Null))
}

/// The engine's settings for a run of a workflow in `base`: relative paths
/// resolve there, and processes start through this binary's helpers.
pub fn config_for(base: PathBuf) -> Config {
    let mut config = Config {
        base_dir: base,
        ..Config::default()
    };
    config.isolation.helper = std::env::current_exe().ok();
    config
}

/// The request that starts `program` (compiled from `definition`) with
/// `inputs` as `agent`, its paths resolving in `base`.
pub fn start_request(
    definition: String,
    program: opcode_vm::Program,
    inputs: Value,
    agent: &str,
    base: PathBuf,
) -> StartRequest {
    StartRequest {
        definition,
        program: Some(program),
        inputs,
        agent_id: Some(agent.to_owned()),
        base_dir: Some(base.clone()),
        workspace: Some(base),
        ..StartRequest::default()
    }
}

/// An executor over `store` with `config`, secrets from the environment.
pub fn engine(store: Arc<dyn EventStore>, config: Config) -> Executor {
    Executor::new(store, Arc::new(EnvSecrets), config)
}

/// The workflow file's folder: relative paths resolve there.
fn folder_of(path: &Path) -> PathBuf {
    let folder = std::path::absolute(path)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf));
    folder.unwrap_or_else(|| PathBuf::from("."))
}

/// Prints `workflow.log` lines on stderr.
struct Stderr;

impl Observer for Stderr {
    fn action_ended(&self, _: &str, _: bool, _: f64) {}
    fn appended(&self, _: &[(EntryKind, Option<EventName>)]) {}
    fn logged(&self, line: &LogLine<'_>) {
        let extra = match line.data {
            Value::Object(m) if m.is_empty() => String::new(),
            other => format!(" {other}"),
        };
        eprint_line(&format!(
            "[{}] {}: {}{extra}",
            line.level, line.step, line.message
        ));
    }
}

/// Prints `workflow.emit` events on stderr while the returned task lives.
fn print_emitted(executor: &Executor) -> AbortOnDrop {
    let mut emitted = executor.emitted();
    AbortOnDrop(tokio::spawn(async move {
        loop {
            match emitted.recv().await {
                Ok(e) => eprint_line(&format!(
                    "[event] {}: {} {}",
                    e.step_id, e.event_type, e.payload
                )),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    }))
}

/// Stops a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn parse_wait(text: &str) -> Result<std::time::Duration, String> {
    opcode_stdlib::exec::parse_duration(text)
}
