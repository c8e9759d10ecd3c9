//! `opcode run FILE`: start a workflow and run it until it ends or waits
//! for a decision or a signal; with `--detach`, in a background process.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use opcode_compiler::diagnostics::render::human;
use opcode_compiler::diagnostics::{Diagnostic, Diagnostics, Severity};
use opcode_compiler::{AgentLookup, Embedding};
use opcode_daemon::settings::Settings;
use opcode_runtime::StartRequest;
use opcode_runtime::executor::{CeilingCheck, Executor};
use opcode_runtime::registry::lookup::Known;
use opcode_runtime::store::Registry;
use opcode_runtime::workspace::Workspaces;
use opcode_stdlib::inputs::{parse_inputs, prepare};
use opcode_stdlib::isolation::Block;
use opcode_vm::Program;
use serde_json::Value;

use super::common::{Database, DbArgs, Exit, Format, fail, home, report};

/// The agent a run started by hand is credited to.
const AGENT: &str = "cli";

/// Arguments of `run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The workflow file.
    file: PathBuf,
    #[command(flatten)]
    db: DbArgs,
    /// The run's inputs, as a JSON object.
    #[arg(long)]
    inputs: Option<String>,
    /// One input, `KEY=VALUE` (VALUE is parsed as JSON when it is JSON, else taken as text). Repeatable.
    #[arg(long = "input", value_name = "KEY=VALUE")]
    input: Vec<String>,
    /// The workflow id (default: a new UUID).
    #[arg(long)]
    id: Option<String>,
    /// Run in a background process; print the workflow id once it is stored.
    #[arg(long)]
    detach: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

/// Runs `run`.
pub async fn run(args: Args) -> Exit {
    let given = match parse_inputs(args.inputs.as_deref(), &args.input) {
        Ok(v) => v,
        Err(message) => return fail(message),
    };
    let (source, program) = match compile(&args.file) {
        Ok(compiled) => compiled,
        Err(exit) => return exit,
    };
    let inputs = match prepare(&program, &given) {
        Ok(inputs) => inputs,
        Err(problems) => {
            return fail(format!(
                "[R0108] the inputs do not match input_schema:\n  - {}",
                problems.join("\n  - ")
            ));
        }
    };
    if args.detach {
        return detach(&args, &given).await;
    }
    let store = match args.db.open().await {
        Ok(store) => store,
        Err(exit) => return exit,
    };
    let executor = match args.db.executor(&store).await {
        Ok(executor) => executor,
        Err(exit) => return exit,
    };
    let (source, program) =
        match pinned(&args.file, store.as_ref(), &executor, (source, program)).await {
            Ok(compiled) => compiled,
            Err(exit) => return exit,
        };
    let _background = executor.background();
    let folder = folder_of(&args.file);
    // A file run by hand works in its folder, unless the settings fix a workspace.
    let fixed = matches!(executor.workspaces(), Some(Workspaces::Fixed(_)));
    let request = StartRequest {
        id: args.id.clone(),
        definition: source,
        program: Some(program),
        inputs,
        agent_id: Some(AGENT.into()),
        workspace: (!fixed).then(|| folder.clone()),
        base_dir: Some(folder),
        ..StartRequest::default()
    };
    // Taken before the start: a child suspending on a decision holds the
    // run, which then rests as suspended too.
    let children = executor.changes();
    let id = match executor.start(request).await {
        Ok(id) => id,
        Err(e) => return fail(e),
    };
    if let Err(e) = executor.settled_or_held(&id, None, children).await {
        return fail(e);
    }
    report(store.as_ref(), &id, args.format).await
}

/// Reads and compiles the workflow, printing diagnostics.
fn compile(path: &Path) -> Result<(String, Program), Exit> {
    let bytes =
        std::fs::read(path).map_err(|e| fail(format!("cannot read {}: {e}", path.display())))?;
    let file = path.display().to_string();
    let source = opcode_compiler::decode_utf8(&bytes)
        .map_err(|d| fail(format!("{file}: {}", d.message)))?
        .to_owned();
    let (program, diagnostics, _) = compile_knowing(&source, &file, None)?;
    print(&diagnostics.into_sorted(), &file, &source);
    match program {
        Some(program) => Ok((source, program)),
        None => Err(Exit::Usage),
    }
}

/// The workflow compiled again knowing the agents it may name (the
/// settings' and the registry's), its steps naming a release by name alone
/// pinned to it (spec/registry.md): the source and program to run. Only
/// errors are printed: the warnings were, by [`compile`].
async fn pinned(
    path: &Path,
    store: &dyn Registry,
    executor: &Executor,
    compiled: (String, Program),
) -> Result<(String, Program), Exit> {
    let (source, program) = compiled;
    if !Known::may_name_agents(&source) {
        return Ok((source, program));
    }
    let entries = executor.agents().entries.keys().cloned();
    let known = Known::load(store, entries).await.map_err(fail)?;
    let file = path.display().to_string();
    let (program, diagnostics, pinned) = compile_knowing(&source, &file, Some(&known))?;
    let errors: Vec<_> = diagnostics
        .into_sorted()
        .into_iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    print(&errors, &file, &source);
    match program {
        Some(program) => Ok((pinned, program)),
        None => Err(Exit::Usage),
    }
}

/// `source` compiled under the settings' isolation ceiling, knowing
/// `agents`; with them, the text pinned and compiled again.
fn compile_knowing(
    source: &str,
    file: &str,
    agents: Option<&Known>,
) -> Result<(Option<Program>, Diagnostics, String), Exit> {
    let compiler = opcode_compiler::Compiler::new().with_actions(opcode_stdlib::catalog());
    let settings = Settings::load(&Settings::file_in(&home())).map_err(fail)?;
    let block = Block::parse(settings.isolation.as_ref()).map_err(fail)?;
    let ceiling = CeilingCheck {
        settings: &block,
        agent: Some(AGENT),
    };
    let embedding = Embedding {
        isolation: Some(&ceiling),
        agents: agents.map(|a| a as &dyn AgentLookup),
    };
    let (program, diagnostics) = compiler.compile_with(source, file, embedding);
    let Some(agents) = agents.filter(|_| program.is_some()) else {
        return Ok((program, diagnostics, source.to_owned()));
    };
    let pinned = compiler.pin_agents(source, file, agents);
    if pinned == source {
        return Ok((program, diagnostics, pinned));
    }
    let (program, _) = compiler.compile_with(&pinned, file, embedding);
    Ok((program, diagnostics, pinned))
}

/// Prints `diagnostics` of `source` on stderr.
fn print(diagnostics: &[Diagnostic], file: &str, source: &str) {
    if !diagnostics.is_empty() {
        eprintln!(
            "{}",
            human::render(diagnostics, file, source, false).trim_end()
        );
    }
}

/// The workflow file's folder, absolute: relative paths of its actions
/// resolve there, whichever process runs it later.
fn folder_of(file: &Path) -> PathBuf {
    let folder = file
        .canonicalize()
        .ok()
        .and_then(|f| f.parent().map(Path::to_path_buf));
    folder.unwrap_or_else(|| std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")))
}

/// Starts `opcode run` again in a background process group with a fixed
/// id, and returns once the workflow is stored.
async fn detach(args: &Args, given: &Value) -> Exit {
    let id = args
        .id
        .clone()
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    let (db, logs) = match args.db.database() {
        Ok(Database::File(path)) => {
            let path = std::path::absolute(&path).unwrap_or(path);
            let logs = path
                .parent()
                .map_or_else(|| PathBuf::from("logs"), |d| d.join("logs"));
            (path, logs)
        }
        Ok(Database::Server(_)) => (args.db.given(), home().join(".opcode").join("logs")),
        Err(exit) => return exit,
    };
    if let Err(e) = std::fs::create_dir_all(&logs) {
        return fail(format!("cannot create {}: {e}", logs.display()));
    }
    let log_path = logs.join(format!("{id}.log"));
    let log = match std::fs::File::create(&log_path) {
        Ok(f) => f,
        Err(e) => return fail(format!("cannot create {}: {e}", log_path.display())),
    };
    let (out, err) = match (log.try_clone(), log) {
        (Ok(out), err) => (out, err),
        (Err(e), _) => return fail(e),
    };
    // Create (and migrate) the database before the background process opens it.
    let store = match args.db.open().await {
        Ok(store) => store,
        Err(exit) => return exit,
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return fail(format!("cannot find the opcode binary: {e}")),
    };
    let durability = match args.db.durability {
        super::common::DurabilityArg::Normal => "normal",
        super::common::DurabilityArg::Full => "full",
    };
    let file = std::path::absolute(&args.file).unwrap_or_else(|_| args.file.clone());
    let spawned = Command::new(exe)
        .arg("run")
        .arg(&file)
        .arg("--db")
        .arg(&db)
        .args(["--durability", durability, "--id", &id, "--format", "json"])
        .arg("--inputs")
        .arg(given.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .process_group(0)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => return fail(format!("cannot start the background process: {e}")),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(Some(_)) = store.workflow(&id).await {
            println!("{id}");
            return Exit::Ok;
        }
        if let Ok(Some(status)) = child.try_wait() {
            return fail(format!(
                "the background run exited ({status}) before storing the workflow; see {}",
                log_path.display()
            ));
        }
        if Instant::now() > deadline {
            return fail(format!(
                "the background run did not store the workflow in 30s; see {}",
                log_path.display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
