//! The six tools of the MCP interface (`opcode.define`, `opcode.run`,
//! `opcode.status`, `opcode.signal`, `opcode.query`, `opcode.diagram`),
//! independent of any transport: JSON arguments in, a JSON result or a
//! coded [`ToolError`] out. The contract is `spec/mcp.md`.

mod agent_publish;
mod agents;
mod args;
pub mod debounce;
mod define;
mod deliver;
mod deliver_message;
mod diagram;
mod embedded;
mod listing;
mod outputs;
mod pending;
mod pruned;
mod query;
mod resources;
mod run;
mod schemas;
mod signal;
pub mod skill;
mod status;
mod template_tools;
mod templates;
mod test_cases;
pub(crate) mod view;
pub mod webhook;

use std::sync::Arc;

use opcode_vm::Code;
use opcode_vm::codes;
use serde_json::{Value, json};

use crate::metrics::Metrics;
use crate::plugins::Plugins;
use crate::stopping::Stopping;
use opcode_runtime::executor::{ExecError, Executor};
use opcode_runtime::store::{EventStore, StoreError};

pub use define::check_text;
pub use deliver::{Delivered, Undelivered};
pub use deliver_message::Outcome;
pub use pruned::pruned_json;
pub use query::schedule_json;
pub use resources::{Contents, Listed, TEMPLATES};
pub use run::start_template;
pub use schemas::{Hints, INSTRUCTIONS, ToolSpec, tool, tools};

/// A tool's failure: a stable code, a message, and data an agent can act on.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    /// The code (`R0122`…).
    pub code: Code,
    /// What went wrong.
    pub message: String,
    /// Details (diagnostics, the problems with the inputs…).
    pub details: Option<Value>,
}

impl ToolError {
    /// An error without details.
    pub fn new(code: Code, message: impl Into<String>) -> ToolError {
        ToolError {
            code,
            message: message.into(),
            details: None,
        }
    }

    /// Attaches details.
    pub fn with_details(mut self, details: Value) -> ToolError {
        self.details = Some(details);
        self
    }

    /// The error as the JSON a tool result carries.
    pub fn to_json(&self) -> Value {
        let mut error = json!({
            "code": self.code.id,
            "name": self.code.name,
            "message": self.message,
        });
        if let Some(details) = &self.details {
            error["details"] = details.clone();
        }
        json!({ "error": error })
    }
}

impl From<StoreError> for ToolError {
    fn from(e: StoreError) -> ToolError {
        match e {
            StoreError::NotFound(id) => {
                ToolError::new(codes::R0121, format!("workflow `{id}` not found"))
            }
            StoreError::Backend(_) | StoreError::Closed | StoreError::Schema { .. } => {
                ToolError::new(
                    codes::R0131,
                    format!("{e}; runs carry on by themselves once the store takes writes again"),
                )
            }
            other => ToolError::new(codes::R0109, format!("the store failed: {other}")),
        }
    }
}

impl From<ExecError> for ToolError {
    fn from(e: ExecError) -> ToolError {
        let code = match &e {
            ExecError::NotFound(_) => codes::R0121,
            ExecError::Refused(rejected) => rejected.code,
            ExecError::Ended { .. } | ExecError::Held { .. } | ExecError::Quarantined(_) => {
                codes::R0114
            }
            ExecError::Store(store) => return ToolError::from(store.clone()),
            ExecError::Program(_) | ExecError::Replay { .. } | ExecError::Stopped(_) => {
                codes::R0109
            }
        };
        ToolError::new(code, e.to_string())
    }
}

/// A tool's outcome.
pub type ToolResult = Result<Value, ToolError>;

/// The tools, over one executor and its store.
#[derive(Clone)]
pub struct Api {
    exec: Executor,
    metrics: Arc<Metrics>,
    plugins: Option<Arc<Plugins>>,
    templates: Arc<templates::TemplateCache>,
    inline_limit: usize,
    elicit_decisions: bool,
    /// The highest priority (lowest number) `opcode.run` may ask for.
    priority_highest: u8,
    tools: tokio::sync::broadcast::Sender<()>,
    stopping: Stopping,
    hook_failures: Arc<crate::serve::throttle::Throttle>,
    streams: Arc<crate::stream::stats::Streams>,
    brokers: Arc<crate::stream::trigger::Brokers>,
}

/// Values longer than this (their compact JSON, in bytes) are not inlined
/// in results unless the settings say otherwise.
pub const DEFAULT_INLINE_LIMIT: usize = 4096;

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api").finish_non_exhaustive()
    }
}

impl Api {
    /// The tools over `exec`, counting what it does in metrics of their
    /// own (the first `Api` over an executor is its observer).
    pub fn new(exec: Executor) -> Api {
        let metrics = Arc::new(Metrics::new());
        exec.set_observer(metrics.clone());
        let streams = Arc::new(crate::stream::stats::Streams::new(&metrics));
        Api {
            exec,
            metrics,
            plugins: None,
            templates: Arc::default(),
            inline_limit: DEFAULT_INLINE_LIMIT,
            elicit_decisions: false,
            priority_highest: opcode_vm::limits::PRIORITY,
            tools: tokio::sync::broadcast::channel(16).0,
            stopping: Stopping::default(),
            hook_failures: Arc::default(),
            streams,
            brokers: Arc::default(),
        }
    }

    /// The brokers templates' `triggers.stream` may name (the settings').
    pub fn with_brokers(mut self, brokers: crate::stream::trigger::Brokers) -> Api {
        self.brokers = Arc::new(brokers);
        self
    }

    /// The brokers templates' `triggers.stream` may name.
    pub fn brokers(&self) -> &crate::stream::trigger::Brokers {
        &self.brokers
    }

    /// What the stream triggers this daemon reads did.
    pub fn streams(&self) -> &crate::stream::stats::Streams {
        &self.streams
    }

    /// Webhook deliveries with a wrong signature or token, by client
    /// network: guessing a webhook's secret is slowed down as guessing the
    /// daemon's token is.
    pub fn hook_failures(&self) -> &crate::serve::throttle::Throttle {
        &self.hook_failures
    }

    /// Says when the tools exposed templates give may have changed.
    pub fn watch_tools(&self) -> tokio::sync::broadcast::Receiver<()> {
        self.tools.subscribe()
    }

    /// Announces that the exposed templates changed.
    fn tools_changed(&self) {
        let _ = self.tools.send(());
    }

    /// The tools, inlining values up to `bytes` in results (spec/mcp.md).
    #[must_use]
    pub fn with_inline_limit(mut self, bytes: usize) -> Api {
        self.inline_limit = bytes;
        self
    }

    /// The tools, ending their waits on runs with R0134 once `stopping`
    /// has begun.
    #[must_use]
    pub fn with_stopping(mut self, stopping: Stopping) -> Api {
        self.stopping = stopping;
        self
    }

    /// The daemon's stop, as these tools see it.
    pub fn stopping(&self) -> &Stopping {
        &self.stopping
    }

    /// `wait`'s outcome, unless the daemon begins to stop first: then
    /// R0134 naming run `id`, which the next start carries on.
    pub async fn unless_stopping<T>(
        &self,
        id: &str,
        wait: impl Future<Output = Result<T, ToolError>>,
    ) -> Result<T, ToolError> {
        tokio::select! {
            outcome = wait => outcome,
            () = self.stopping.begun() => Err(ToolError::new(
                codes::R0134,
                format!("the daemon is stopping: run `{id}` is kept and carries on when the daemon starts again"),
            )
            .with_details(json!({ "workflow_id": id }))),
        }
    }

    /// The tools, asking decisions of agents whose clients show forms
    /// through their sessions (setting `elicit_decisions`, spec/mcp.md).
    #[must_use]
    pub fn with_elicit_decisions(mut self, on: bool) -> Api {
        self.elicit_decisions = on;
        self
    }

    /// The highest priority (lowest number) callers and templates may ask.
    pub fn priority_highest(&self) -> u8 {
        self.priority_highest
    }

    /// Lets `opcode.run` ask for priorities down to `highest` (0 first).
    pub fn with_priority_highest(mut self, highest: u8) -> Api {
        self.priority_highest = highest.min(opcode_vm::limits::PRIORITY_LAST);
        self
    }

    /// Are decisions asked as form elicitations?
    pub fn elicits_decisions(&self) -> bool {
        self.elicit_decisions
    }

    /// The tools, reporting on `plugins` too (`opcode.query` of `plugins`).
    #[must_use]
    pub fn with_plugins(mut self, plugins: Arc<Plugins>) -> Api {
        self.plugins = Some(plugins);
        self
    }

    /// The daemon's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The executor the tools drive.
    pub fn executor(&self) -> &Executor {
        &self.exec
    }

    /// Each plugin's state (`Plugins::report`); empty without plugins.
    pub fn plugins_report(&self) -> Vec<Value> {
        self.plugins
            .as_ref()
            .map(|p| p.report())
            .unwrap_or_default()
    }

    fn store(&self) -> &Arc<dyn EventStore> {
        self.exec.store()
    }

    /// Calls the tool `name` with `args` (a JSON object).
    pub async fn call(&self, name: &str, args: Value) -> ToolResult {
        let args = args::Args::new(args)?;
        if let Some(spec) = tool(name) {
            let known = spec.arguments();
            if let Some(unknown) = args.keys().find(|k| !known.contains(k)) {
                return Err(ToolError::new(
                    codes::R0122,
                    format!(
                        "`{unknown}` is not an argument of {name}: use {}",
                        known.join(", ")
                    ),
                )
                .with_details(json!({ "unknown": unknown, "arguments": known })));
            }
        }
        // The reading tools note their caller here; the others with what
        // they write.
        if matches!(name, "opcode.status" | "opcode.query" | "opcode.diagram") {
            self.seen(args.opt_str("agent_id")?).await?;
        }
        match name {
            "opcode.define" => define::define(self, &args).await,
            "opcode.run" => run::run(self, &args).await,
            "opcode.status" => status::status(self, &args).await,
            "opcode.signal" => signal::signal(self, &args).await,
            "opcode.query" => query::query(self, &args).await,
            "opcode.diagram" => diagram::diagram(self, &args).await,
            other => Err(ToolError::new(
                codes::R0122,
                format!("there is no tool `{other}`"),
            )),
        }
    }

    /// Registers or refreshes the calling agent.
    async fn seen(&self, agent_id: Option<&str>) -> Result<(), ToolError> {
        if let Some(agent) = agent_id {
            let at = opcode_runtime::time::rfc3339(opcode_runtime::time::now_ms());
            self.store().touch_agent(agent, &at).await?;
        }
        Ok(())
    }
}
