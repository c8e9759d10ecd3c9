//! The opcode runtime: runs compiled workflows durably.
//!
//! - [`store`]: the event store contract and its libSQL and in-memory
//!   implementations (schema in `spec/events.md`);
//! - [`executor`]: drives VMs against the store, performs their effects,
//!   recovers interrupted runs, fires durable timers;
//! - [`log`]: how VM events and records become log entries;
//! - [`owner`]: which process owns a workflow (leases);
//! - [`time`]: the clock and the one timestamp encoding.
//!
//! The `opcode` binary (`src/main.rs`, `src/cli/`) is a thin shell over these.
#![warn(missing_docs)]

pub mod agui;
pub mod allocator;
pub mod api;
pub mod breaker;
pub mod executor;
pub mod log;
pub mod mcp;
pub mod metrics;
pub mod otel;
pub mod owner;
pub mod panel;
pub mod plugins;
pub mod schedule;
pub mod scheduler;
pub mod serve;
pub mod settings;
pub mod store;
pub mod summary;
pub mod time;
pub mod vault;
pub mod workspace;

pub use executor::{
    Appended, Config, Delivery, ExecError, Executor, Recovery, StartRequest, Until,
};
pub use store::{Durability, EventStore};
