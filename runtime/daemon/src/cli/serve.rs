//! `opcode serve` (also plain `opcode`): the daemon. And `opcode install`,
//! which writes the settings file.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use opcode_daemon::api::Api;
use opcode_daemon::panel::Panel;
use opcode_daemon::plugins::Plugins;
use opcode_daemon::serve::{self, Gate, Guard, SharedGuard};
use opcode_daemon::settings::Settings;
use opcode_daemon::stream::trigger::Brokers;
use opcode_runtime::store::Durability;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::reload;

use super::common::{Database, Exit, home};
use super::stacks::{self, Stack};
use opcode_daemon::plugins::PluginConfig;
use opcode_daemon::serve::tenancy::TenantRoutes;

use super::guarding::{LEVELS, unknown_level_message};
use opcode_daemon::stopping::Stopping;
use opcode_daemon::tenants::Tenant;
use opcode_runtime::Executor;
use opcode_runtime::executor::Background;

/// How long the daemon waits for its plugins to come up before serving.
const PLUGIN_START_WAIT: std::time::Duration = std::time::Duration::from_secs(20);
/// How long the runs get, at shutdown, to note it and give their leases up.
const SHUTDOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long, at shutdown, the MCP requests being served get to answer
/// (those waiting on a run answer R0134 at once) before sessions end.
const ANSWER_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
/// How long, once the sessions end, connections still open are waited
/// for before they are dropped: no stream holds a stop up for ever.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Flags of `serve` and `install` (each overrides settings and environment).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Args {
    /// Address to listen on, `host:port` (default 127.0.0.1:4100);
    /// `--listen-addr` is opcode's spelling.
    #[arg(long, value_name = "ADDR", alias = "listen-addr")]
    listen: Option<String>,
    /// The database: a libSQL file (default ~/.opcode/opcode.db), or a
    /// PostgreSQL server shared by several daemons (`postgres://user@host/db`).
    #[arg(long, value_name = "PATH|URL")]
    db: Option<PathBuf>,
    /// The URL clients reach this daemon by (names the SSE endpoint).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// error, warn, info or debug.
    #[arg(long, value_name = "LEVEL")]
    log_level: Option<String>,
    /// Bearer token clients must send (required off loopback).
    #[arg(long, value_name = "TOKEN")]
    token: Option<String>,
    /// A file whose first line is the vault passphrase (default: $OPCODE_VAULT_KEY).
    #[arg(long, value_name = "PATH")]
    vault_key_file: Option<PathBuf>,
    /// The settings file (default ~/.opcode/settings.json).
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
}

impl Args {
    /// The settings these flags give.
    pub fn flags(&self) -> Settings {
        Settings {
            listen: self.listen.clone(),
            db: self.db.clone(),
            base_url: self.base_url.clone(),
            log_level: self.log_level.clone(),
            // Handed over when the program started itself again without it.
            token: self
                .token
                .clone()
                .or_else(|| opcode_stdlib::environment::var(super::scrub::TOKEN_FLAG)),
            vault_key_file: self.vault_key_file.clone(),
            ..Settings::default()
        }
    }

    /// The settings file they name (or the default one).
    pub fn config_path(&self) -> PathBuf {
        self.config
            .clone()
            .unwrap_or_else(|| Settings::file_in(&home()))
    }

    /// File, then environment, then flags.
    pub(super) fn settings(&self) -> Result<Settings, String> {
        let file = Settings::load(&self.config_path())?;
        let env = Settings::from_env(opcode_stdlib::environment::var);
        Ok(file.overlay(env).overlay(self.flags()))
    }
}

/// The guard the settings describe, for the operator's routes or for
/// `tenant`'s (its tokens instead of the operator's).
fn guard_of(settings: &Settings, listen: &SocketAddr, tenant: Option<&Tenant>) -> Guard {
    let mut hosts = Vec::new();
    let mut origins = settings.allowed_origins.clone();
    if let Some(base) = &settings.base_url {
        let trimmed = base.trim_end_matches('/');
        if let Some((_, authority)) = trimmed.split_once("://") {
            hosts.push(authority.split('/').next().unwrap_or(authority).to_owned());
        }
        origins.push(trimmed.to_owned());
    }
    if !serve::is_loopback(listen) {
        // Reached by any name on the network; the token protects it.
        hosts.push("*".into());
    }
    Guard {
        hosts,
        origins,
        tokens: tenant.map_or_else(
            || settings.token.iter().cloned().collect(),
            |t| t.tokens.clone(),
        ),
        open_probes: settings.open_probes.unwrap_or(false),
    }
}

type LogHandle = reload::Handle<EnvFilter, tracing_subscriber::Registry>;

/// JSON-lines logs on stderr, at the settings' level.
fn init_logs(level: Option<&str>) -> Option<LogHandle> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let (filter, handle) = reload::Layer::new(filter_of(level));
    let fmt = tracing_subscriber::fmt::layer()
        .json()
        .with_writer(std::io::stderr);
    tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .try_init()
        .ok()
        .map(|()| handle)
}

/// Says why the daemon does not start — a plain sentence to a person at a
/// terminal, a JSON log line to whatever collects the logs — and returns
/// the usage exit code.
fn refuse(message: impl std::fmt::Display) -> Exit {
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!("opcode serve: {message}");
    } else {
        tracing::error!("{message}");
    }
    Exit::Usage
}

fn filter_of(level: Option<&str>) -> EnvFilter {
    let level = level.unwrap_or("info");
    // Our own events at the level asked; libraries' only when debugging.
    let directive = if level == "debug" || level == "trace" {
        level.to_owned()
    } else {
        format!("warn,opcode={level},opcode_runtime={level},workflow={level}")
    };
    EnvFilter::try_new(&directive).unwrap_or_else(|_| EnvFilter::new("info"))
}

/// Runs the daemon until SIGTERM or Ctrl-C.
pub async fn serve(args: Args) -> Exit {
    let settings = args.settings();
    let level = settings.as_ref().ok().and_then(|s| s.log_level.as_deref());
    let unknown_level = level.filter(|l| !LEVELS.contains(l)).map(str::to_owned);
    // Logs start first, so that even a refusal to start is a JSON line.
    let logs = init_logs(level.filter(|_| unknown_level.is_none()));
    let settings = match settings {
        Ok(settings) => settings,
        Err(e) => return refuse(e),
    };
    if let Some(level) = unknown_level {
        return refuse(unknown_level_message(&level));
    }
    let listen = match settings.listen_addr() {
        Ok(listen) => listen,
        Err(e) => return refuse(e),
    };
    let tenants = match super::guarding::checked(&listen, &settings) {
        Ok(tenants) => tenants,
        Err(e) => return refuse(e),
    };
    let durability = match durability_of(&settings) {
        Ok(durability) => durability,
        Err(message) => return refuse(message),
    };
    let db = match database_of(&settings) {
        Ok(db) => db,
        Err(message) => return refuse(message),
    };
    // Checked before any engine starts; each engine reads it with its own folder.
    if let Err(e) = settings.retention(Path::new("/"), None) {
        return refuse(e);
    }
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(listener) => listener,
        Err(e) => return refuse(bind_error(listen, &e)),
    };
    let plugins = match settings.plugins() {
        Ok(plugins) => plugins,
        Err(e) => return refuse(e),
    };
    let inline_limit = match settings.inline_limit() {
        Ok(limit) => limit.unwrap_or(opcode_daemon::api::DEFAULT_INLINE_LIMIT),
        Err(e) => return refuse(e),
    };
    let brokers = match Brokers::parse(settings.brokers.as_ref()) {
        Ok(brokers) => brokers,
        Err(e) => return refuse(e),
    };
    // Every engine is made (and what dead processes left in sandboxes
    // swept) before any of them recovers a run.
    let stacks = match stacks::open(
        &settings,
        db.clone(),
        durability,
        &args.config_path(),
        tenants,
    )
    .await
    {
        Ok(stacks) => stacks,
        Err(exit) => return exit,
    };
    let shutdown = CancellationToken::new();
    let stopping = Stopping::default();
    let surroundings = Surroundings {
        settings: &settings,
        listen,
        plugins: &plugins,
        inline_limit,
        brokers: &brokers,
        shutdown: &shutdown,
        stopping: &stopping,
    };
    let mut served = Vec::with_capacity(stacks.len());
    for stack in stacks {
        match surroundings.serve(stack).await {
            Ok(one) => served.push(one),
            Err(exit) => return exit,
        }
    }
    let Some((operator, tenants)) = served.split_first() else {
        return refuse("no engine to serve");
    };
    let app = serve::tenancy::router(
        operator.routes.clone(),
        tenants
            .iter()
            .map(|t| TenantRoutes {
                name: t.tenant.clone().unwrap_or_default(),
                gate: t.gate.clone(),
                routes: t.routes.clone(),
            })
            .collect(),
    );
    let gates: Vec<(Option<String>, SharedGuard)> = served
        .iter()
        .map(|s| (s.tenant.clone(), s.gate.clone()))
        .collect();
    tokio::spawn(reload_on_hangup(args.clone(), listen, gates, logs));
    // The address bound (port 0 asks the system for a free one).
    let bound = listener.local_addr().unwrap_or(listen);
    tracing::info!(
        listen = %bound,
        db = %db.shown(),
        panel = settings.panel.unwrap_or(true),
        "opcode is listening on http://{bound}: MCP at /mcp (Streamable HTTP) and /sse (legacy SSE){}",
        if settings.panel.unwrap_or(true) { ", the panel at /" } else { "" }
    );
    let stop = shutdown.clone();
    let app = app.into_make_service_with_connect_info::<SocketAddr>();
    let serving =
        axum::serve(serve::without_delay(listener), app).with_graceful_shutdown(async move {
            terminated().await;
            tracing::info!(
                "shutting down: in-flight steps are recorded and resume at the next start"
            );
            // Calls waiting on runs answer (R0134) before the sessions end.
            stopping.begin(ANSWER_WAIT).await;
            stop.cancel();
        });
    let overdue = async {
        shutdown.cancelled().await;
        tokio::time::sleep(CLOSE_WAIT).await;
        tracing::warn!(
            "connections still open {}s after the stop began: closing them",
            CLOSE_WAIT.as_secs()
        );
    };
    let result = tokio::select! {
        result = serving.into_future() => result,
        () = overdue => Ok(()),
    };
    futures::future::join_all(served.iter().map(|s| s.exec.shutdown(SHUTDOWN_WAIT))).await;
    match result {
        Ok(()) => Exit::Ok,
        Err(e) => refuse(format!("the server stopped: {e}")),
    }
}

/// What every engine of the daemon is served with.
struct Surroundings<'a> {
    settings: &'a Settings,
    listen: SocketAddr,
    plugins: &'a [PluginConfig],
    inline_limit: usize,
    /// The settings' brokers: the operator's engine reads them, tenants'
    /// none.
    brokers: &'a Brokers,
    shutdown: &'a CancellationToken,
    stopping: &'a Stopping,
}

/// One engine, served: its routes behind its guard.
struct Served {
    tenant: Option<String>,
    exec: Executor,
    gate: SharedGuard,
    routes: axum::Router,
    _background: Background,
}

impl Surroundings<'_> {
    /// Starts `stack` (its plugins, background loop, recovery, traces and
    /// scheduler) and makes its routes.
    async fn serve(&self, stack: Stack) -> Result<Served, Exit> {
        let Stack {
            tenant,
            exec,
            vault,
            db,
            data_dir,
        } = stack;
        if let Some(tenant) = &tenant {
            tracing::info!(tenant = %tenant.name, db = %db.shown(), "serving a tenant");
        }
        let name = tenant.as_ref().map(|t| t.name.clone());
        // Plugins first: recovered workflows may call their tools.
        let plugins = Plugins::start(
            self.plugins.to_vec(),
            &exec,
            self.shutdown,
            PLUGIN_START_WAIT,
        )
        .await;
        let background = exec.background();
        // Recovery runs beside serving: a start after a crash with thousands
        // of runs to resume answers at once, and a call naming a run not
        // yet resumed loads it itself.
        tokio::spawn(recover(exec.clone(), name.clone(), self.shutdown.clone()));
        if let Some(endpoint) = &self.settings.otel_endpoint {
            match opcode_daemon::otel::start(&exec, endpoint, self.shutdown.clone()) {
                Ok(()) => tracing::info!(tenant = name.as_deref(), %endpoint, "exporting traces"),
                Err(e) => return Err(refuse(e)),
            }
        }
        let gate: SharedGuard = Gate::new(guard_of(self.settings, &self.listen, tenant.as_ref()));
        let api = Api::new(exec.clone())
            .with_plugins(plugins)
            .with_inline_limit(self.inline_limit)
            .with_elicit_decisions(self.settings.elicit_decisions.unwrap_or(false))
            .with_priority_highest(
                self.settings
                    .priority_highest
                    .unwrap_or(opcode_vm::limits::PRIORITY),
            )
            .with_stopping(self.stopping.clone());
        let brokers = match &tenant {
            None => self.brokers.clone(),
            Some(_) => Brokers::default(),
        };
        let api = api.with_brokers(brokers.clone());
        if !brokers.0.is_empty() {
            tokio::spawn(opcode_daemon::stream::supervisor::run(
                api.clone(),
                brokers,
                opcode_runtime::owner::current().to_owned(),
                self.shutdown.clone(),
            ));
        }
        tokio::spawn(opcode_daemon::scheduler::run(
            exec.clone(),
            api.metrics().clone(),
            self.shutdown.clone(),
        ));
        let retention = self
            .settings
            .retention(&data_dir, name.as_deref())
            .map_err(refuse)?;
        if let Some(sweeps) = retention {
            tokio::spawn(opcode_daemon::retention::run(
                exec.clone(),
                sweeps,
                self.shutdown.clone(),
            ));
        }
        let panel = self.settings.panel.unwrap_or(true).then(|| {
            Panel::new(
                api.clone(),
                vault,
                gate.clone(),
                secure_cookies(self.settings),
            )
        });
        let routes = serve::router(
            api,
            self.settings.base_url.clone(),
            gate.clone(),
            self.shutdown,
            panel,
        );
        Ok(Served {
            tenant: name,
            exec,
            gate,
            routes,
            _background: background,
        })
    }
}

/// Resumes the runs a dead process left (`Executor::recover`), until done
/// or until the daemon begins to stop.
async fn recover(exec: Executor, tenant: Option<String>, shutdown: CancellationToken) {
    let began = std::time::Instant::now();
    tokio::select! {
        () = shutdown.cancelled() => {}
        recovered = exec.recover() => match recovered {
            Ok(resumed) if !resumed.is_empty() => {
                let took_ms = began.elapsed().as_millis() as u64;
                tracing::info!(tenant = tenant.as_deref(), count = resumed.len(), took_ms, workflows = ?resumed, "resumed interrupted workflows");
            }
            Ok(_) => {}
            Err(e) => tracing::error!(tenant = tenant.as_deref(), error = %e, "recovery failed"),
        },
    }
}

/// The settings' `durability`.
pub(super) fn durability_of(settings: &Settings) -> Result<Durability, String> {
    match settings.durability.as_deref() {
        None | Some("normal") => Ok(Durability::Normal),
        Some("full") => Ok(Durability::Full),
        Some(other) => Err(format!("durability must be normal or full, not `{other}`")),
    }
}

/// The settings' database (default ~/.opcode/opcode.db).
pub(super) fn database_of(settings: &Settings) -> Result<Database, String> {
    let given = settings
        .db
        .clone()
        .unwrap_or_else(|| home().join(".opcode").join("opcode.db"));
    Database::parse(&given)
}

/// What to tell the operator when `listen` cannot be bound.
pub(super) fn bind_error(listen: SocketAddr, e: &std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::AddrInUse {
        format!(
            "{listen} is already in use: is another opcode daemon running? \
             Stop it, or choose another address with --listen 127.0.0.1:{}",
            listen.port().wrapping_add(1)
        )
    } else {
        format!("cannot listen on {listen}: {e}")
    }
}

/// Are the panel's cookies `Secure`? When clients reach it over https.
fn secure_cookies(settings: &Settings) -> bool {
    settings
        .base_url
        .as_deref()
        .is_some_and(|url| url.to_ascii_lowercase().starts_with("https://"))
}

/// SIGTERM or SIGINT.
async fn terminated() {
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// On SIGHUP, reads the settings again and applies what can change live:
/// the tokens (the operator's and each tenant's), the allowed origins and
/// hosts, and the log level.
async fn reload_on_hangup(
    args: Args,
    listen: SocketAddr,
    gates: Vec<(Option<String>, SharedGuard)>,
    logs: Option<LogHandle>,
) {
    let Ok(mut hangups) = signal(SignalKind::hangup()) else {
        return;
    };
    let served: Vec<Option<String>> = gates.iter().map(|(name, _)| name.clone()).collect();
    while hangups.recv().await.is_some() {
        match super::guarding::reloaded(args.settings(), &listen, &served) {
            Ok((settings, tenants)) => {
                for (name, gate) in &gates {
                    let tenant = name
                        .as_ref()
                        .and_then(|n| tenants.iter().find(|t| &t.name == n));
                    gate.replace(guard_of(&settings, &listen, tenant));
                }
                if let Some(logs) = &logs {
                    let _ = logs.reload(filter_of(settings.log_level.as_deref()));
                }
                tracing::info!(
                    "settings reloaded (token, origins, open probes, log level; restart for the rest)"
                );
            }
            Err(e) => tracing::error!(error = %e, "settings not reloaded"),
        }
    }
}
