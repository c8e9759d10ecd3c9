//! The `opcode` command line.

mod agent;
mod common;
mod database;
mod doctor;
mod export;
mod guarding;
mod inspect;
mod install;
mod resume;
mod run;
mod schedule;
mod scrub;
mod secret;
mod serve;
mod signal;
mod skill;
mod stacks;

use clap::{Parser, Subcommand};

pub use self::common::Exit;
pub use self::scrub::secrets_out_of_sight;

/// Run opcode workflows durably.
#[derive(Debug, Parser)]
#[command(name = "opcode", about = "Run opcode workflows durably")]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the six MCP tools over Streamable HTTP (/mcp) and legacy SSE (/sse); the default.
    Serve(serve::Args),
    /// Write ~/.opcode/settings.json from the given flags, or (--client) register the daemon in an MCP client.
    Install(install::InstallArgs),
    /// Take the daemon out of an MCP client's configuration.
    Uninstall(install::UninstallArgs),
    /// Start a workflow and run it until it ends or waits for a decision or signal.
    Run(run::Args),
    /// Carry on with interrupted workflows (one, or all of them).
    Resume(resume::Args),
    /// Show a workflow's status, steps, output and pending decisions.
    Status(inspect::StatusArgs),
    /// List a workflow's event log.
    Events(inspect::EventsArgs),
    /// Write a finished run as a workflow test case (`opcodec test` replays it).
    Export(export::ExportArgs),
    /// Resolve a pending decision or send a named signal, then carry on.
    Signal(signal::SignalArgs),
    /// Cancel a workflow.
    Cancel(signal::CancelArgs),
    /// Run templates on cron schedules: add, list, rm, enable, disable.
    Schedule(schedule::Args),
    /// Keep secrets in the vault: set (value from stdin), list, rm.
    Secret(secret::Args),
    /// Check what `opcode serve` needs here, and say what to do about each failure.
    Doctor(doctor::DoctorArgs),
    /// Print the agent skill, or install it into a skills directory.
    Skill(skill::Args),
    /// Agent definitions as versioned releases: init, check, test, publish, list, show, diff.
    Agent(agent::Args),
}

/// What `opcode --version` prints after the name: the version, the commit
/// it was built from and the database schema it writes.
pub static VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "{} (commit {}, schema {})",
        env!("CARGO_PKG_VERSION"),
        env!("OPCODE_COMMIT"),
        opcode_runtime::store::SCHEMA_VERSION
    )
});

/// Runs the command; returns the exit code.
pub fn main(cli: Cli) -> u8 {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return Exit::Usage as u8;
        }
    };
    let command = cli
        .command
        .unwrap_or_else(|| Command::Serve(serve::Args::default()));
    if !matches!(
        command,
        Command::Serve(_) | Command::Install(_) | Command::Uninstall(_)
    ) {
        common::init_text_logs();
    }
    let exit = runtime.block_on(async move {
        match command {
            Command::Serve(args) => serve::serve(args).await,
            Command::Install(args) => install::install(&args),
            Command::Uninstall(args) => install::uninstall(&args),
            Command::Run(args) => run::run(args).await,
            Command::Resume(args) => resume::run(args).await,
            Command::Status(args) => inspect::status(args).await,
            Command::Events(args) => inspect::events(args).await,
            Command::Export(args) => export::export(args).await,
            Command::Signal(args) => signal::signal(args).await,
            Command::Cancel(args) => signal::cancel(args).await,
            Command::Schedule(args) => schedule::schedule(args).await,
            Command::Secret(args) => secret::secret(args).await,
            Command::Doctor(args) => doctor::doctor(&args).await,
            Command::Skill(args) => skill::skill(&args),
            Command::Agent(args) => agent::agent(args).await,
        }
    });
    // Do not wait for actions still running: they are recorded as in
    // flight and run again on the next resume.
    runtime.shutdown_background();
    exit as u8
}
