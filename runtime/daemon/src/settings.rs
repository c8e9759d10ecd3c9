//! The daemon's settings: `~/.opcode/settings.json`, overridden by
//! `OPCODE_*` environment variables, overridden by command-line flags.

use std::net::SocketAddr;

use std::path::{Path, PathBuf};

use opcode_stdlib::agents::AgentsConfig;
use opcode_stdlib::isolation::{Block, IsolationConfig};
use opcode_stdlib::limits::Limits;

use serde::{Deserialize, Serialize};

use crate::plugins::PluginConfig;
use opcode_runtime::breaker::BreakerConfig;
use opcode_runtime::workspace::Workspaces;

/// The files of a daemon (or a one-shot command) that no step may see.
#[derive(Debug, Clone, Default)]
pub struct OwnFiles {
    /// The database file (none for a database on a server).
    pub db: Option<PathBuf>,
    /// The settings file.
    pub settings: PathBuf,
    /// The vault's passphrase file.
    pub vault_key: Option<PathBuf>,
    /// Other tenants' folders (spec/security.md, "Tenants").
    pub others: Vec<PathBuf>,
}

/// A database file with its WAL, shared memory and journal.
pub fn database_files(db: &Path) -> Vec<PathBuf> {
    ["", "-wal", "-shm", "-journal"]
        .iter()
        .map(|suffix| {
            let mut name = db.as_os_str().to_owned();
            name.push(suffix);
            PathBuf::from(name)
        })
        .collect()
}

impl OwnFiles {
    /// The paths to hide: these files (the database with its journal,
    /// WAL and shared memory), the data directory, and other tenants'
    /// folders.
    pub fn hidden(&self, data_dir: &Path) -> Vec<PathBuf> {
        let mut paths = vec![data_dir.to_path_buf(), self.settings.clone()];
        if let Some(db) = &self.db {
            paths.extend(database_files(db));
        }
        paths.extend(self.vault_key.iter().cloned());
        paths.extend(self.others.iter().cloned());
        let absolute = |p: PathBuf| {
            if p.is_absolute() {
                p
            } else {
                std::env::current_dir().unwrap_or_default().join(p)
            }
        };
        paths.into_iter().map(absolute).collect()
    }
}

/// Where the daemon listens unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:4100";

/// Every setting; `None` (or empty) leaves the default or the layer below.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// `host:port` to listen on (`OPCODE_LISTEN`; default 127.0.0.1:4100).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// The database file (`OPCODE_DB`; default ~/.opcode/opcode.db).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db: Option<PathBuf>,
    /// The URL clients reach the daemon by (`OPCODE_BASE_URL`); names the
    /// SSE `endpoint` and is an accepted host and origin.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// `error`, `warn`, `info` or `debug` (`OPCODE_LOG_LEVEL`; default info).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_level: Option<String>,
    /// The bearer token HTTP clients must send (`OPCODE_TOKEN`); required
    /// when listening on a non-loopback address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Browser origins allowed besides loopback ones (`OPCODE_ALLOWED_ORIGINS`,
    /// comma-separated).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_origins: Vec<String>,
    /// `normal` or `full` (`OPCODE_DURABILITY`; default normal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub durability: Option<String>,
    /// A file whose first line is the vault passphrase
    /// (`OPCODE_VAULT_KEY_FILE`; default: the `OPCODE_VAULT_KEY` variable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vault_key_file: Option<PathBuf>,
    /// Serve the web panel (`OPCODE_PANEL`: `true`/`1` or `false`/`0`;
    /// default on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub panel: Option<bool>,
    /// Export traces to this OTLP/HTTP collector, such as
    /// `http://localhost:4318` (`OTEL_EXPORTER_OTLP_ENDPOINT`; default off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub otel_endpoint: Option<String>,
    /// Isolation defaults for `shell.exec` and path rules for `fs.*` (file
    /// only; see spec/isolation.md). Isolation is on unless `enabled: false`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub isolation: Option<serde_json::Value>,
    /// Circuit breakers, one per target: `{"default": {...}, "<target or
    /// action>": {...}}` with `threshold`, `cooldown`, `half_open_probes`
    /// (file only; spec/breakers.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breakers: Option<serde_json::Value>,
    /// MCP servers whose tools become actions: `[{name, command, args, env}]`
    /// (stdio) or `[{name, url}]` (Streamable HTTP) (file only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugins: Option<serde_json::Value>,
    /// The run-time bounds of spec/limits.md, raised (file only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<serde_json::Value>,
    /// How long a run's lease lasts without renewal, such as `10s`
    /// (`OPCODE_LEASE_TTL`; default 10 s, renewed every third of it): how
    /// soon another daemon on a shared database takes over the runs of one
    /// that died or froze (spec/scale-out.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_ttl: Option<String>,
    /// The largest value, in bytes of compact JSON, that tool results
    /// inline (`OPCODE_INLINE_LIMIT`; default 4096): a bigger step output
    /// comes as `{bytes, uri}`, a resource to read (spec/mcp.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inline_limit: Option<serde_json::Value>,
    /// Ask a run's pending decisions of its agent as form elicitations,
    /// where the agent's session supports them (`OPCODE_ELICIT_DECISIONS`;
    /// default false; spec/mcp.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elicit_decisions: Option<bool>,
    /// Let `/livez` and `/readyz` answer requests without the token (for
    /// an orchestrator's probes; `OPCODE_OPEN_PROBES`; default false).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_probes: Option<bool>,
    /// The highest priority (lowest number, 0 to 9) an `opcode.run` may
    /// ask for; lower priorities (larger numbers) are always allowed
    /// (file only; default 5, the default priority: spec/flow-control.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority_highest: Option<u8>,
    /// How long a waiting action call takes to rise one priority level
    /// (`90s`; file only; default 1 minute: spec/flow-control.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority_aging: Option<String>,
    /// The delegated agents `agent.*` steps run: `{name: {command,
    /// protocol, …}}` (file only; spec/agents.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agents: Option<serde_json::Value>,
    /// The MCP servers a published agent may name: a server's `command`
    /// (the program), or the start of its `url` (file only;
    /// spec/registry.md). Any server without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_mcp: Option<Vec<String>>,
    /// The brokers templates' `triggers.stream` may read, by name:
    /// `{"events": {"redis": "redis://host:port/db"}}` or `{"js": {"nats":
    /// "nats://host:port"}}` (file only; spec/triggers-stream.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub brokers: Option<serde_json::Value>,
    /// Tenants: `{name: {tokens, db?, grants?}}`, each with a database and
    /// everything in it of its own (file only; spec/security.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenants: Option<serde_json::Value>,
    /// How long finished runs are kept: `{days, keep_last, export,
    /// every}` (file only; spec/store.md, "Retention"). Kept forever
    /// without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention: Option<serde_json::Value>,
}

impl Settings {
    /// The settings file in `home` (`~/.opcode/settings.json`).
    pub fn file_in(home: &Path) -> PathBuf {
        home.join(".opcode").join("settings.json")
    }

    /// Reads a settings file; a missing file is empty settings.
    pub fn load(path: &Path) -> Result<Settings, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| format!("{} is not valid settings: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Settings::default()),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    }

    /// The settings the `OPCODE_*` variables give, read through `var`.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Settings {
        let get = |name: &str| var(name).filter(|v| !v.is_empty());
        Settings {
            listen: get("OPCODE_LISTEN"),
            db: get("OPCODE_DB").map(PathBuf::from),
            base_url: get("OPCODE_BASE_URL"),
            log_level: get("OPCODE_LOG_LEVEL"),
            token: get("OPCODE_TOKEN"),
            allowed_origins: get("OPCODE_ALLOWED_ORIGINS")
                .map(|v| {
                    v.split(',')
                        .map(str::trim)
                        .filter(|o| !o.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            durability: get("OPCODE_DURABILITY"),
            vault_key_file: get("OPCODE_VAULT_KEY_FILE").map(PathBuf::from),
            panel: get("OPCODE_PANEL").map(|v| matches!(v.as_str(), "true" | "1" | "yes" | "on")),
            otel_endpoint: get("OTEL_EXPORTER_OTLP_ENDPOINT"),
            isolation: None,
            breakers: None,
            plugins: None,
            limits: None,
            lease_ttl: get("OPCODE_LEASE_TTL"),
            inline_limit: get("OPCODE_INLINE_LIMIT").map(serde_json::Value::String),
            elicit_decisions: get("OPCODE_ELICIT_DECISIONS")
                .map(|v| matches!(v.as_str(), "true" | "1" | "yes" | "on")),
            open_probes: get("OPCODE_OPEN_PROBES")
                .map(|v| matches!(v.as_str(), "true" | "1" | "yes" | "on")),
            priority_highest: None,
            priority_aging: None,
            agents: None,
            agent_mcp: None,
            brokers: None,
            tenants: None,
            retention: None,
        }
    }

    /// These settings with `over`'s set values on top.
    pub fn overlay(self, over: Settings) -> Settings {
        Settings {
            listen: over.listen.or(self.listen),
            db: over.db.or(self.db),
            base_url: over.base_url.or(self.base_url),
            log_level: over.log_level.or(self.log_level),
            token: over.token.or(self.token),
            allowed_origins: if over.allowed_origins.is_empty() {
                self.allowed_origins
            } else {
                over.allowed_origins
            },
            durability: over.durability.or(self.durability),
            vault_key_file: over.vault_key_file.or(self.vault_key_file),
            panel: over.panel.or(self.panel),
            otel_endpoint: over.otel_endpoint.or(self.otel_endpoint),
            isolation: over.isolation.or(self.isolation),
            breakers: over.breakers.or(self.breakers),
            plugins: over.plugins.or(self.plugins),
            limits: over.limits.or(self.limits),
            lease_ttl: over.lease_ttl.or(self.lease_ttl),
            inline_limit: over.inline_limit.or(self.inline_limit),
            elicit_decisions: over.elicit_decisions.or(self.elicit_decisions),
            open_probes: over.open_probes.or(self.open_probes),
            priority_highest: over.priority_highest.or(self.priority_highest),
            priority_aging: over.priority_aging.or(self.priority_aging),
            agents: over.agents.or(self.agents),
            agent_mcp: over.agent_mcp.or(self.agent_mcp),
            brokers: over.brokers.or(self.brokers),
            tenants: over.tenants.or(self.tenants),
            retention: over.retention.or(self.retention),
        }
    }

    /// The time a waiting action call takes to rise one priority level, if
    /// set: a duration of at least a second.
    pub fn priority_aging(&self) -> Result<Option<std::time::Duration>, String> {
        second_or_more("priority_aging", self.priority_aging.as_deref(), "1m")
    }

    /// The lease time to live (`None`: the engine's default).
    pub fn lease_ttl(&self) -> Result<Option<std::time::Duration>, String> {
        second_or_more("lease_ttl", self.lease_ttl.as_deref(), "10s")
    }

    /// The inline limit of results, in bytes (`None`: the default): a
    /// number, or its digits as text.
    pub fn inline_limit(&self) -> Result<Option<usize>, String> {
        let Some(value) = &self.inline_limit else {
            return Ok(None);
        };
        let bytes = match value {
            serde_json::Value::Number(n) => n.as_u64(),
            serde_json::Value::String(s) => s.trim().parse().ok(),
            _ => None,
        };
        match bytes.and_then(|b| usize::try_from(b).ok()) {
            Some(bytes) if bytes >= 64 => Ok(Some(bytes)),
            _ => Err(format!(
                "inline_limit `{value}` is not a number of bytes of at least 64, such as 4096"
            )),
        }
    }

    /// The isolation the runtime applies: these settings' block (on
    /// unless it says `enabled: false`), this program as the sandbox
    /// helper, and `hidden` (the daemon's own files) out of every step's
    /// reach; fresh workspaces' root is hidden from sandboxes but for each
    /// one's own workspace.
    pub fn isolation(
        &self,
        hidden: Vec<PathBuf>,
        workspaces: &Workspaces,
    ) -> Result<IsolationConfig, String> {
        let mut defaults = Block::parse(self.isolation.as_ref())?;
        defaults.enabled = Some(defaults.enabled.unwrap_or(true));
        defaults.workspace_root = workspaces.root().map(Path::to_path_buf);
        Ok(IsolationConfig::new(
            defaults,
            std::env::current_exe().ok(),
            hidden,
        ))
    }

    /// Where runs work: the settings' `isolation.workspace` for every run,
    /// else a fresh one each under `isolation.workspace_root` (default
    /// [`Workspaces::default_root`] of `data_dir`), owned by the sandbox user.
    pub fn workspaces(&self, data_dir: &Path) -> Result<Workspaces, String> {
        let block = Block::parse(self.isolation.as_ref())?;
        let absolute = |p: PathBuf| {
            if p.is_absolute() {
                p
            } else {
                std::env::current_dir().unwrap_or_default().join(p)
            }
        };
        if let Some(fixed) = block.workspace {
            return Ok(Workspaces::Fixed(absolute(fixed)));
        }
        let root = block
            .workspace_root
            .map_or_else(|| Workspaces::default_root(data_dir), absolute);
        let id = |v: Option<u32>| v.unwrap_or(opcode_stdlib::isolation::DEFAULT_SANDBOX_ID);
        Ok(Workspaces::Fresh {
            root,
            owner: Some((id(block.uid), id(block.gid))),
        })
    }

    /// The delegated agents: the settings' entries, transcripts and
    /// sessions kept in `<data_dir>/agents/`, calls' homes in `calls`
    /// ([`Settings::agent_calls`] for the operator's).
    pub fn agents(&self, data_dir: &Path, calls: PathBuf) -> Result<AgentsConfig, String> {
        Ok(AgentsConfig {
            entries: AgentsConfig::parse(self.agents.as_ref())?,
            transcripts: data_dir.join("agents").join("transcripts"),
            calls,
            sessions: data_dir.join("agents").join("sessions"),
            mcp_allowed: self.agent_mcp.clone(),
        })
    }

    /// Where delegated agents' homes are made: beside the default
    /// workspaces (a path the sandbox user can reach), hidden from every
    /// other sandbox.
    pub fn agent_calls(data_dir: &Path) -> PathBuf {
        Workspaces::default_root(data_dir).with_file_name("agent-calls")
    }

    /// The circuit breakers' settings.
    pub fn breakers(&self) -> Result<BreakerConfig, String> {
        BreakerConfig::parse(self.breakers.as_ref())
    }

    /// The run-time bounds (spec/limits.md).
    pub fn limits(&self) -> Result<Limits, String> {
        Limits::parse(self.limits.as_ref())
    }

    /// The tenants (none unless the settings name some).
    pub fn tenants(&self) -> Result<Vec<crate::tenants::Tenant>, String> {
        crate::tenants::parse(self.tenants.as_ref(), self.token.as_deref())
    }

    /// The retention of the engine whose data directory is `data_dir`
    /// (`tenant`: whose it is); `None` when runs are kept forever.
    pub fn retention(
        &self,
        data_dir: &Path,
        tenant: Option<&str>,
    ) -> Result<Option<crate::retention::Sweeps>, String> {
        crate::retention::parse(self.retention.as_ref(), data_dir, tenant)
    }

    /// The configured plugins.
    pub fn plugins(&self) -> Result<Vec<PluginConfig>, String> {
        crate::plugins::parse(self.plugins.as_ref())
    }

    /// The address to listen on.
    pub fn listen_addr(&self) -> Result<SocketAddr, String> {
        let text = self.listen.as_deref().unwrap_or(DEFAULT_LISTEN);
        let text = text
            .strip_prefix(':')
            .map_or_else(|| text.to_owned(), |port| format!("127.0.0.1:{port}"));
        text.parse()
            .map_err(|_| format!("`{text}` is not a listen address such as 127.0.0.1:4100"))
    }
}

/// Setting `name`'s duration, `text` if set: at least a second (`example`
/// shows one in the error).
fn second_or_more(
    name: &str,
    text: Option<&str>,
    example: &str,
) -> Result<Option<std::time::Duration>, String> {
    let Some(text) = text else {
        return Ok(None);
    };
    match humantime::parse_duration(text) {
        Ok(took) if took >= std::time::Duration::from_secs(1) => Ok(Some(took)),
        Ok(_) => Err(format!("{name} `{text}` is under a second")),
        Err(e) => Err(format!(
            "{name} `{text}` is not a duration such as {example}: {e}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_beat_environment_beat_file() {
        let file: Settings =
            serde_json::from_str(r#"{"listen": "127.0.0.1:1", "db": "/f.db", "token": "file"}"#)
                .unwrap();
        let env = Settings::from_env(|name| match name {
            "OPCODE_LISTEN" => Some("127.0.0.1:2".into()),
            "OPCODE_ALLOWED_ORIGINS" => Some("https://a.example, https://b.example".into()),
            _ => None,
        });
        let flags = Settings {
            listen: Some("127.0.0.1:3".into()),
            ..Settings::default()
        };
        let merged = file.overlay(env).overlay(flags);
        assert_eq!(merged.listen.as_deref(), Some("127.0.0.1:3"));
        assert_eq!(merged.db.as_deref(), Some(Path::new("/f.db")));
        assert_eq!(merged.token.as_deref(), Some("file"));
        assert_eq!(merged.allowed_origins.len(), 2);
    }

    #[test]
    fn priority_aging_is_a_duration_of_a_second_or_more() {
        let with = |text: &str| Settings {
            priority_aging: Some(text.into()),
            ..Settings::default()
        };
        assert_eq!(
            with("90s").priority_aging(),
            Ok(Some(std::time::Duration::from_secs(90)))
        );
        assert!(
            with("10ms")
                .priority_aging()
                .unwrap_err()
                .contains("under a second")
        );
        assert!(
            with("soon")
                .priority_aging()
                .unwrap_err()
                .contains("priority_aging")
        );
        assert_eq!(Settings::default().priority_aging(), Ok(None));
    }

    #[test]
    fn unknown_keys_and_bad_addresses_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        std::fs::write(&path, r#"{"lisen": "x"}"#).unwrap();
        assert!(Settings::load(&path).unwrap_err().contains("lisen"));
        assert_eq!(
            Settings::load(&dir.path().join("none.json")).unwrap(),
            Settings::default()
        );
        let bad = Settings {
            listen: Some("nowhere".into()),
            ..Settings::default()
        };
        assert!(bad.listen_addr().is_err());
        let port_only = Settings {
            listen: Some(":4200".into()),
            ..Settings::default()
        };
        assert_eq!(port_only.listen_addr().unwrap().port(), 4200);
        assert_eq!(Settings::default().listen_addr().unwrap().port(), 4100);
    }
}
