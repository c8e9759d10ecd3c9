//! The opcode engine: runs compiled workflows durably.
//!
//! - [`store`]: the event store contract and its libSQL and in-memory
//!   implementations (schema in `spec/events.md`);
//! - [`executor`]: drives VMs against the store, performs their effects,
//!   recovers interrupted runs, fires durable timers;
//! - [`driver`]: runs one workflow to rest with answers given in advance
//!   (`opcodec run`, the conformance suite);
//! - [`log`]: how VM events and records become log entries;
//! - [`owner`]: which process owns a workflow (leases);
//! - [`vault`]: secrets, encrypted in the store;
//! - [`schedule`]: cron schedules and when they fire next;
//! - [`time`]: the clock and the one timestamp encoding.
//!
//! It knows no HTTP, MCP, HTML or telemetry library: the `opcode` daemon
//! and CLI (`runtime/daemon`, crate `opcode-daemon`) are shells over it.
#![warn(missing_docs)]

pub mod breaker;
pub mod driver;
pub mod executor;
pub mod golden;
pub mod junit;
pub mod log;
pub mod owner;
pub mod registry;
pub mod rerun;
pub mod retention;
#[cfg(feature = "schedule")]
pub mod schedule;
pub mod store;
pub mod summary;
pub mod time;
#[cfg(feature = "vault")]
pub mod vault;
pub mod waiting;
pub mod workspace;

pub use executor::{
    Appended, Config, Delivery, ExecError, Executor, Recovery, StartRequest, Until,
};
pub use store::{Durability, EventStore};
