//! `opcodec run FILE`: compile and run a workflow in memory.
//!
//! Relative paths (files, `shell.exec` working directory, scripts) resolve
//! against the workflow file's folder. Reasoning steps are answered with
//! `--decide STEP=CHOICE`; named signals are sent with `--signal NAME=JSON`;
//! secrets come from `OPCODE_SECRET_<NAME>` environment variables;
//! `workflow.run` runs `<template>.json` or `<template>/workflow.json` found
//! next to the workflow (or in a sibling folder).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use opcode_stdlib::exec::{Actions, BoxFuture, Call, Child, EnvSecrets, Services, template_file};
use opcode_stdlib::inputs::{pairs, parse_inputs, parse_value};
use opcode_stdlib::local::{LocalRun, summary};
use opcode_vm::Plan;
use opcode_vm::error::ActionError;
use opcode_vm::event::RunMeta;
use serde_json::{Value, json};

use crate::compile::compile_file;
use crate::output::{ColorChoice, eprint_line, print};

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A readable report.
    Human,
    /// `{status, output, steps, pending_decisions, error}`.
    Json,
}

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
    /// Answers reasoning step STEP with CHOICE every time it asks. Repeatable.
    #[arg(long, value_name = "STEP=CHOICE")]
    decide: Vec<String>,
    /// Sends signal NAME with a JSON payload after the start. Repeatable.
    #[arg(long, value_name = "NAME=JSON")]
    signal: Vec<String>,
    /// Output format.
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
        max_wait: args.max_wait,
        decisions,
        signals,
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

struct Options {
    max_wait: std::time::Duration,
    decisions: HashMap<String, String>,
    signals: Vec<(String, Value)>,
    json: bool,
    color: bool,
}

/// Compiles and runs one file; `Err` is an exit code (already reported).
fn run_file<'a>(
    path: &'a Path,
    inputs: Value,
    options: &'a Options,
) -> BoxFuture<'a, Result<Value, u8>> {
    Box::pin(async move {
        let program = compile_file(path, options.color)
            .map_err(|code| if code == 1 { EXIT_COMPILE } else { code })?;
        let inputs = opcode_stdlib::inputs::prepare(&program, &inputs).map_err(|errors| {
            eprint_line(&format!(
                "error[R0108]: the inputs do not match input_schema:\n  - {}",
                errors.join("\n  - ")
            ));
            EXIT_FAILED
        })?;
        let base = path
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let base = if base.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            base
        };
        let services = Arc::new(CliServices {
            base: base.clone(),
            max_wait: options.max_wait,
            quiet: options.json,
            decisions: options.decisions.clone(),
        });
        let actions =
            Arc::new(Actions::new(services, base).with_evaluator(std::env::current_exe().ok()));
        let meta = RunMeta {
            run_id: uuid::Uuid::new_v4().to_string(),
            name: program.header.name.clone(),
            agent_id: Some("opcodec".into()),
            ..RunMeta::default()
        };
        let local = LocalRun {
            plan: Plan::new(program),
            actions,
            secrets: Arc::new(EnvSecrets),
            decisions: options.decisions.clone(),
            signals: options.signals.clone(),
            meta,
            max_wait: options.max_wait,
        };
        let outcome = local.run(inputs).await;
        for rejection in &outcome.rejected {
            eprint_line(&format!("error: {rejection}"));
        }
        Ok(summary(&outcome.vm))
    })
}

/// Logs to stderr; runs child templates found next to the workflow.
struct CliServices {
    base: PathBuf,
    max_wait: std::time::Duration,
    quiet: bool,
    decisions: HashMap<String, String>,
}

impl Services for CliServices {
    fn log(&self, call: &Call, level: &str, message: &str, data: &Value) {
        if self.quiet {
            return;
        }
        let extra = match data {
            Value::Object(m) if m.is_empty() => String::new(),
            other => format!(" {other}"),
        };
        eprint_line(&format!("[{level}] {}: {message}{extra}", call.step));
    }

    fn emit(&self, call: &Call, event_type: &str, payload: &Value) {
        if !self.quiet {
            eprint_line(&format!("[event] {}: {event_type} {payload}", call.step));
        }
    }

    fn notify(&self, _call: &Call, _message: &str, _data: &Value) -> Value {
        json!({"notified": false, "reason": "no_session"})
    }

    fn context_of<'a>(&'a self, _run_id: &'a str) -> BoxFuture<'a, Option<Value>> {
        Box::pin(std::future::ready(None))
    }

    fn run_child<'a>(
        &'a self,
        _call: &'a Call,
        child: Child<'a>,
    ) -> BoxFuture<'a, Result<Value, ActionError>> {
        Box::pin(async move {
            let (template, params) = (child.template, child.params.clone());
            let Some(path) = template_file(&self.base, template) else {
                return Err(ActionError::execution(format!(
                    "template `{template}` not found next to the workflow"
                )));
            };
            let options = Options {
                max_wait: self.max_wait,
                decisions: self.decisions.clone(),
                signals: Vec::new(),
                json: self.quiet,
                color: false,
            };
            let summary = run_file(&path, params, &options).await.map_err(|_| {
                ActionError::execution(format!(
                    "template `{template}` could not be compiled or started"
                ))
            })?;
            let status = summary["status"].as_str().unwrap_or("failed").to_owned();
            let output =
                json!({"workflow_id": "local", "status": status, "output": summary["output"]});
            if status == "completed" {
                Ok(output)
            } else {
                Err(ActionError::new(
                    opcode_vm::codes::R0113,
                    "EXECUTION_ERROR",
                    format!("child `{template}` ended {status}"),
                    false,
                )
                .with_details(json!({"child": summary})))
            }
        })
    }
}

fn parse_wait(text: &str) -> Result<std::time::Duration, String> {
    opcode_stdlib::exec::parse_duration(text)
}
