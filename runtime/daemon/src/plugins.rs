//! Plugins: MCP servers the daemon starts (stdio) or reaches (Streamable
//! HTTP) with the rmcp client. Each tool becomes the action
//! `<plugin>.<tool>`, checked by the compiler against the tool's input
//! schema. A supervisor per plugin connects, lists the tools, checks the
//! server's health, and reconnects with backoff when it goes away; calls
//! while a plugin is down fail with R0128 (retryable).

pub mod schema;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use opcode_stdlib::exec::{BoxFuture, Call, ExternalActions};
use opcode_vm::catalog::ActionSpec;
use opcode_vm::error::ActionError;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use opcode_runtime::executor::Executor;

/// Action families that are built in; no plugin may take their names.
const RESERVED: &[&str] = &[
    "http", "fs", "shell", "crypto", "assert", "expr", "json", "workflow",
];
/// How often a running plugin is asked for its tools (its health check).
const HEALTH_EVERY: Duration = Duration::from_secs(5);
/// How long a health check or a connection may take.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(10);
/// The first and the longest wait before reconnecting.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(250), Duration::from_secs(30));

/// One entry of the `plugins` setting.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginConfig {
    /// The action family: tools are `<name>.<tool>`.
    pub name: String,
    /// The program of a stdio server.
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Its environment, besides the daemon's.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The URL of a Streamable HTTP server (instead of `command`).
    pub url: Option<String>,
}

/// Parses the `plugins` setting.
pub fn parse(value: Option<&Value>) -> Result<Vec<PluginConfig>, String> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let configs = Vec::<PluginConfig>::deserialize(value).map_err(|e| format!("`plugins`: {e}"))?;
    let mut seen = std::collections::HashSet::new();
    for c in &configs {
        let valid_name = !c.name.is_empty()
            && c.name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-');
        if !valid_name || RESERVED.contains(&c.name.as_str()) {
            return Err(format!(
                "`plugins`: `{}` cannot name a plugin (letters, digits, `_`, `-`; not a built-in family)",
                c.name
            ));
        }
        if c.command.is_some() == c.url.is_some() {
            return Err(format!(
                "`plugins.{}`: give either `command` or `url`",
                c.name
            ));
        }
        if !seen.insert(c.name.clone()) {
            return Err(format!("`plugins`: `{}` is configured twice", c.name));
        }
    }
    Ok(configs)
}

/// A plugin's state as reported by `opcode.query` (`resource: plugins`).
#[derive(Debug, Clone, Default)]
struct State {
    status: &'static str,
    peer: Option<Peer<RoleClient>>,
    tools: Vec<String>,
    restarts: u32,
    last_error: Option<String>,
}

/// Every configured plugin.
pub struct Plugins {
    plugins: HashMap<String, Mutex<State>>,
    configs: Vec<PluginConfig>,
}

impl std::fmt::Debug for Plugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugins")
            .field("configs", &self.configs)
            .finish_non_exhaustive()
    }
}

impl Plugins {
    /// Starts a supervisor per plugin; their tools are registered with
    /// `exec` as they are listed. Returns once each plugin is up or has
    /// failed its first start (or `wait` has passed).
    pub async fn start(
        configs: Vec<PluginConfig>,
        exec: &Executor,
        shutdown: &CancellationToken,
        wait: Duration,
    ) -> Arc<Plugins> {
        let plugins = Arc::new(Plugins {
            plugins: configs
                .iter()
                .map(|c| {
                    let state = State {
                        status: "starting",
                        ..State::default()
                    };
                    (c.name.clone(), Mutex::new(state))
                })
                .collect(),
            configs: configs.clone(),
        });
        exec.set_external(plugins.clone());
        let mut first = Vec::new();
        for config in configs {
            let (tx, rx) = tokio::sync::oneshot::channel();
            first.push(rx);
            tokio::spawn(supervise(
                plugins.clone(),
                config,
                exec.clone(),
                shutdown.clone(),
                tx,
            ));
        }
        let _ = tokio::time::timeout(wait, futures::future::join_all(first)).await;
        plugins
    }

    fn state(&self, name: &str) -> Option<std::sync::MutexGuard<'_, State>> {
        self.plugins
            .get(name)
            .map(|m| m.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Each plugin: `{name, status, transport, tools, restarts, last_error}`.
    pub fn report(&self) -> Vec<Value> {
        self.configs
            .iter()
            .filter_map(|c| {
                let state = self.state(&c.name)?;
                Some(json!({
                    "name": c.name,
                    "status": state.status,
                    "transport": if c.url.is_some() { "streamable_http" } else { "stdio" },
                    "tools": state.tools,
                    "restarts": state.restarts,
                    "last_error": state.last_error,
                }))
            })
            .collect()
    }
}

impl ExternalActions for Plugins {
    fn handles(&self, action: &str) -> bool {
        action
            .split_once('.')
            .is_some_and(|(family, _)| self.plugins.contains_key(family))
    }

    fn run<'a>(&'a self, call: &'a Call) -> BoxFuture<'a, Result<Value, ActionError>> {
        Box::pin(async move {
            let (plugin, tool) = call.action.split_once('.').unwrap_or_default();
            let peer = self.state(plugin).and_then(|s| s.peer.clone());
            let Some(peer) = peer else {
                let why = self
                    .state(plugin)
                    .and_then(|s| s.last_error.clone())
                    .unwrap_or_else(|| "it is starting".into());
                return Err(unavailable(
                    format!("plugin `{plugin}` is down ({why})"),
                    true,
                ));
            };
            let arguments = match &call.params {
                Value::Object(map) => Some(map.clone()),
                _ => None,
            };
            let mut request = CallToolRequestParams::new(tool.to_owned());
            if let Some(arguments) = arguments {
                request = request.with_arguments(arguments);
            }
            let result = peer.call_tool(request).await.map_err(|e| {
                unavailable(format!("plugin `{plugin}` failed the call: {e}"), true)
            })?;
            let text: Vec<&str> = result
                .content
                .iter()
                .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
                .collect();
            let output = json!({
                "text": text.join("\n"),
                "content": serde_json::to_value(&result.content).unwrap_or(Value::Null),
                "structured": result.structured_content,
            });
            if result.is_error == Some(true) {
                return Err(unavailable(
                    format!(
                        "`{}` answered with an error: {}",
                        call.action,
                        text.join(" ")
                    ),
                    false,
                )
                .with_details(output));
            }
            Ok(output)
        })
    }
}

fn unavailable(message: String, retryable: bool) -> ActionError {
    ActionError::new(opcode_vm::codes::R0128, "PLUGIN_ERROR", message, retryable)
}

/// Connects, serves, and reconnects with backoff until shutdown.
async fn supervise(
    plugins: Arc<Plugins>,
    config: PluginConfig,
    exec: Executor,
    shutdown: CancellationToken,
    first: tokio::sync::oneshot::Sender<()>,
) {
    let mut first = Some(first);
    let mut backoff = BACKOFF.0;
    loop {
        let outcome = tokio::select! {
            () = shutdown.cancelled() => return,
            outcome = tokio::time::timeout(HEALTH_TIMEOUT, connect(&config)) => outcome,
        };
        match outcome {
            Ok(Ok((service, tools))) => {
                let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
                tracing::info!(target: "plugin", plugin = %config.name, tools = ?names, "plugin is up");
                exec.set_external_actions(&config.name, specs(&config.name, &tools));
                if let Some(mut state) = plugins.state(&config.name) {
                    state.status = "up";
                    state.peer = Some(service.peer().clone());
                    // `last_error` stays: why it went down last, once it is back.
                    state.tools = names;
                }
                if let Some(tx) = first.take() {
                    let _ = tx.send(());
                }
                backoff = BACKOFF.0;
                let why = watch(service, &shutdown).await;
                if shutdown.is_cancelled() {
                    return;
                }
                tracing::warn!(target: "plugin", plugin = %config.name, "plugin went down: {why}");
                mark_down(&plugins, &config.name, why);
            }
            Ok(Err(e)) => mark_down(&plugins, &config.name, e),
            Err(_) => mark_down(&plugins, &config.name, "it did not answer in time".into()),
        }
        if let Some(tx) = first.take() {
            let _ = tx.send(());
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(BACKOFF.1);
        if let Some(mut state) = plugins.state(&config.name) {
            state.restarts += 1;
            state.status = "restarting";
        }
    }
}

fn mark_down(plugins: &Plugins, name: &str, why: String) {
    if let Some(mut state) = plugins.state(name) {
        state.status = "down";
        state.peer = None;
        state.last_error = Some(why);
    }
}

type Service = RunningService<RoleClient, ()>;

/// Starts or reaches the plugin once, lists its tools and lets it go
/// (what `opcode doctor` checks).
pub async fn probe(config: &PluginConfig) -> Result<Vec<String>, String> {
    let (service, tools) = tokio::time::timeout(HEALTH_TIMEOUT, connect(config))
        .await
        .map_err(|_| "it did not answer in time".to_owned())??;
    let _ = service.cancel().await;
    Ok(tools.iter().map(|t| t.name.to_string()).collect())
}

/// Starts or reaches the server, and lists its tools.
async fn connect(config: &PluginConfig) -> Result<(Service, Vec<rmcp::model::Tool>), String> {
    let service = if let Some(url) = &config.url {
        ().serve(StreamableHttpClientTransport::from_uri(url.clone()))
            .await
            .map_err(|e| format!("cannot reach {url}: {e}"))?
    } else {
        let program = config.command.clone().unwrap_or_default();
        let mut command = tokio::process::Command::new(&program);
        for name in opcode_stdlib::environment::not_inherited() {
            command.env_remove(name);
        }
        command.args(&config.args).envs(&config.env);
        let (transport, stderr) = TokioChildProcess::builder(command)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start `{program}`: {e}"))?;
        if let Some(stderr) = stderr {
            tokio::spawn(forward_stderr(config.name.clone(), stderr));
        }
        ().serve(transport)
            .await
            .map_err(|e| format!("`{program}` did not initialize: {e}"))?
    };
    let tools = service
        .list_all_tools()
        .await
        .map_err(|e| format!("cannot list its tools: {e}"))?;
    Ok((service, tools))
}

/// The plugin's standard error, as log lines.
async fn forward_stderr(plugin: String, stderr: tokio::process::ChildStderr) {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(target: "plugin", plugin = %plugin, "{line}");
    }
}

/// Waits until the server goes away or fails a health check; why.
async fn watch(service: Service, shutdown: &CancellationToken) -> String {
    let peer = service.peer().clone();
    let ended = service.waiting();
    tokio::pin!(ended);
    let mut every = tokio::time::interval(HEALTH_EVERY);
    every.tick().await;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return "shutting down".into(),
            quit = &mut ended => return format!("the connection closed ({quit:?})"),
            _ = every.tick() => {
                match tokio::time::timeout(HEALTH_TIMEOUT, peer.list_all_tools()).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => return format!("the health check failed: {e}"),
                    Err(_) => return "the health check timed out".into(),
                }
            }
        }
    }
}

fn specs(plugin: &str, tools: &[rmcp::model::Tool]) -> Vec<ActionSpec> {
    tools
        .iter()
        .map(|t| {
            schema::action_spec(
                format!("{plugin}.{}", t.name),
                t.description.as_deref().unwrap_or_default(),
                &t.input_schema,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked() {
        let ok = parse(Some(
            &json!([{"name": "everything", "command": "npx", "args": ["x"]}]),
        ))
        .unwrap();
        assert_eq!(ok[0].args, ["x"]);
        for bad in [
            json!([{"name": "http", "command": "x"}]),
            json!([{"name": "a b", "command": "x"}]),
            json!([{"name": "p"}]),
            json!([{"name": "p", "command": "x", "url": "http://h"}]),
            json!([{"name": "p", "command": "x"}, {"name": "p", "url": "http://h"}]),
            json!([{"name": "p", "comand": "x"}]),
        ] {
            assert!(parse(Some(&bad)).is_err(), "{bad}");
        }
    }
}
