//! What every `opcode` command shares: the database, the executor, output.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use opcode_daemon::settings::{OwnFiles, Settings};

pub use super::database::Database;
use opcode_runtime::executor::Config;
use opcode_runtime::vault::{RuntimeSecrets, Vault, open_configured};
use opcode_runtime::{Durability, EventStore, Executor};
use serde_json::Value;

/// Exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Completed, or the command did what it was asked.
    Ok = 0,
    /// The workflow failed or was cancelled.
    Failed = 1,
    /// Bad arguments, a workflow that does not compile, bad inputs, a store error.
    Usage = 2,
    /// The workflow waits for a decision or a signal (or, quarantined,
    /// for a hand to resume it).
    Suspended = 3,
}

impl Exit {
    /// The exit code for a workflow status.
    pub fn of_status(status: &str) -> Exit {
        match status {
            "completed" => Exit::Ok,
            "suspended" | "active" | "pending" | "quarantined" => Exit::Suspended,
            _ => Exit::Failed,
        }
    }
}

/// `--durability`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DurabilityArg {
    /// Survives a crash of the process (WAL, synchronous=NORMAL).
    Normal,
    /// Survives power loss too: every commit is fsynced (synchronous=FULL).
    Full,
}

/// The database options.
#[derive(Debug, Clone, clap::Args)]
pub struct DbArgs {
    /// The database: a libSQL file, or a postgres:// URL of a database
    /// several daemons share (default: $OPCODE_DB, else ~/.opcode/opcode.db).
    #[arg(long, value_name = "PATH|URL", global = true)]
    pub db: Option<PathBuf>,
    /// How hard each commit is made durable.
    #[arg(long, value_enum, default_value_t = DurabilityArg::Normal, global = true)]
    pub durability: DurabilityArg,
    /// A file whose first line is the vault passphrase (default: $OPCODE_VAULT_KEY).
    #[arg(long, value_name = "PATH", global = true)]
    pub vault_key_file: Option<PathBuf>,
}

impl DbArgs {
    /// The database as given.
    pub fn given(&self) -> PathBuf {
        if let Some(db) = &self.db {
            return db.clone();
        }
        if let Some(db) = std::env::var_os("OPCODE_DB") {
            return PathBuf::from(db);
        }
        let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
        home.join(".opcode").join("opcode.db")
    }

    /// A one-shot command's executor over `store` (see [`executor`]).
    pub async fn executor(&self, store: &Arc<dyn EventStore>) -> Result<Executor, Exit> {
        let database = self.database()?;
        let files = OwnFiles {
            db: database.file().map(Path::to_path_buf),
            settings: Settings::file_in(&home()),
            vault_key: self.vault_key_file.clone(),
            others: Vec::new(),
        };
        executor(store.clone(), false, None, &files).await
    }

    /// The database, or why it cannot be one.
    pub fn database(&self) -> Result<Database, Exit> {
        Database::parse(&self.given()).map_err(fail)
    }

    /// Opens the store, or reports why not.
    pub async fn open(&self) -> Result<Arc<dyn EventStore>, Exit> {
        let durability = match self.durability {
            DurabilityArg::Normal => Durability::Normal,
            DurabilityArg::Full => Durability::Full,
        };
        self.database()?.open(durability).await.map_err(fail)
    }
}

/// The home directory (`$HOME`, else the working directory).
pub fn home() -> PathBuf {
    std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from)
}

/// Where one engine of the daemon keeps what it makes: the operator's, or
/// a tenant's (spec/security.md, "Tenants").
#[derive(Debug, Clone)]
pub struct Area {
    /// Its data directory (transcripts, sessions; fresh workspaces when
    /// not root).
    pub data_dir: PathBuf,
    /// Where its delegated agents' homes are made.
    pub agent_calls: PathBuf,
}

impl Area {
    /// The operator's: `~/.opcode`.
    pub fn operator() -> Area {
        let data_dir = home().join(".opcode");
        Area {
            agent_calls: Settings::agent_calls(&data_dir),
            data_dir,
        }
    }
}

/// An executor over `store`, with the vault when a passphrase is set, and
/// the isolation, workspaces and breakers of `settings` (default: the
/// settings file); `adopt` lets it pick up other workflows' due timers and
/// mail while it runs. No step sees `files`.
pub async fn executor(
    store: Arc<dyn EventStore>,
    adopt: bool,
    settings: Option<&Settings>,
    files: &OwnFiles,
) -> Result<Executor, Exit> {
    executor_and_vault(store, adopt, false, settings, files, &Area::operator())
        .await
        .map(|(exec, _)| exec)
}

/// [`executor`], and the vault it reads secrets from (if one is open);
/// `take_over` runs whose lease lapsed (a daemon on a shared database);
/// it keeps what it makes in `area`.
pub async fn executor_and_vault(
    store: Arc<dyn EventStore>,
    adopt: bool,
    take_over: bool,
    settings: Option<&Settings>,
    files: &OwnFiles,
    area: &Area,
) -> Result<(Executor, Option<Arc<Vault>>), Exit> {
    let from_file;
    let settings = if let Some(settings) = settings {
        settings
    } else {
        from_file = Settings::load(&files.settings).map_err(fail)?;
        &from_file
    };
    let workspaces = settings.workspaces(&area.data_dir).map_err(fail)?;
    let mut hidden = files.hidden(&Area::operator().data_dir);
    hidden.push(area.agent_calls.clone());
    let isolation = settings.isolation(hidden, &workspaces).map_err(fail)?;
    let agents = settings
        .agents(&area.data_dir, area.agent_calls.clone())
        .map_err(fail)?;
    // What a killed process left running must not overlap the steps
    // this executor dispatches again.
    let swept = opcode_stdlib::isolation::cgroup::sweep(&isolation.cgroup_root());
    if swept > 0 {
        tracing::info!(
            count = swept,
            "killed what dead processes left running in their sandboxes"
        );
    }
    let breakers = settings.breakers().map_err(fail)?;
    let limits = settings.limits().map_err(fail)?;
    let from_env = std::env::var_os("OPCODE_VAULT_KEY_FILE").map(PathBuf::from);
    let key_file = files.vault_key.clone().or(from_env);
    let vault = open_configured(store.clone(), key_file.as_deref())
        .await
        .map_err(fail)?
        .map(Arc::new);
    let defaults = Config::default();
    let lease_ttl = settings.lease_ttl().map_err(fail)?;
    let priority_aging = settings.priority_aging().map_err(fail)?;
    let config = Config {
        adopt,
        take_over,
        lease_ttl: lease_ttl.unwrap_or(defaults.lease_ttl),
        priority_aging: priority_aging.unwrap_or(defaults.priority_aging),
        base_dir: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
        isolation,
        breakers,
        workspaces: Some(workspaces),
        limits,
        agents,
        ..defaults
    };
    let exec = Executor::new(store, Arc::new(RuntimeSecrets::new(vault.clone())), config);
    Ok((exec, vault))
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A readable report.
    Human,
    /// The summary as JSON.
    Json,
}

/// Prints workflow `id`'s summary; the exit code follows its status.
pub async fn report(store: &dyn EventStore, id: &str, format: Format) -> Exit {
    let summary =
        match opcode_runtime::summary::summary(store, id, &opcode_runtime::summary::View::full())
            .await
        {
            Ok(Some(summary)) => summary,
            Ok(None) => {
                eprintln!("error: {}", unknown_run(store, id).await);
                return Exit::Usage;
            }
            Err(e) => {
                eprintln!("error: {e}");
                return Exit::Usage;
            }
        };
    match format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&summary).unwrap_or_default()
        ),
        Format::Human => {
            println!(
                "workflow: {} {}",
                id,
                summary["name"]
                    .as_str()
                    .filter(|n| !n.is_empty())
                    .map_or(String::new(), |n| format!("({n})"))
            );
            print!("{}", opcode_stdlib::report::human(&summary));
        }
    }
    Exit::of_status(summary["status"].as_str().unwrap_or_default())
}

/// Why run `id` is not in `store`: pruned (with when, and its export),
/// or never there.
pub async fn unknown_run(store: &dyn EventStore, id: &str) -> String {
    let filter = opcode_runtime::store::PrunedFilter {
        id: Some(id.to_owned()),
        ..Default::default()
    };
    match store
        .pruned(filter)
        .await
        .ok()
        .and_then(|mut rows| rows.pop())
    {
        Some(row) => row.describe(),
        None => format!("workflow `{id}` not found"),
    }
}

/// Prints an error and returns the usage exit code.
pub fn fail(message: impl std::fmt::Display) -> Exit {
    eprintln!("error: {message}");
    Exit::Usage
}

/// Parses `--data` style JSON arguments.
pub fn json_arg(text: Option<&str>, flag: &str) -> Result<Option<Value>, Exit> {
    text.map(|t| serde_json::from_str(t).map_err(|e| fail(format!("{flag} is not JSON: {e}"))))
        .transpose()
}

/// Plain-text logs on stderr for the one-shot commands: what workflows log
/// (`workflow.log`) and the runtime's warnings.
pub fn init_text_logs() {
    let filter = tracing_subscriber::EnvFilter::new("warn,workflow=info,opcode_runtime=warn");
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}
