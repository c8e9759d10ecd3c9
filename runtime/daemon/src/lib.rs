//! The `opcode` daemon over the engine (`opcode-runtime`): what reaches
//! agents and people. The engine runs workflows; this crate renders them.
//!
//! - [`api`]: the six MCP tools, independent of any transport;
//! - [`mcp`], [`serve`]: the MCP transports (Streamable HTTP, legacy SSE),
//!   the HTTP routes and their guard;
//! - [`panel`], [`agui`]: the web panel and AG-UI streams;
//! - [`metrics`], [`otel`]: Prometheus metrics and OpenTelemetry traces;
//! - [`plugins`]: MCP servers whose tools become actions;
//! - [`scheduler`]: cron schedules firing runs;
//! - [`settings`]: `~/.opcode/settings.json` and the environment;
//! - [`tenants`]: the settings' tenants, each an engine of its own.
//!
//! The `opcode` binary (`src/main.rs`, `src/cli/`) is a thin shell over these.
#![warn(missing_docs)]

pub mod agui;
pub mod allocator;
pub mod api;
mod headline;
pub mod mcp;
pub mod metrics;
pub mod otel;
pub mod panel;
pub mod plugins;
pub mod retention;
pub mod scheduler;
mod secrets_compared;
pub mod serve;
pub mod settings;
pub mod stopping;
pub mod stream;
pub mod tenants;
