//! The contracts every opcode crate shares, and the machine that runs them.
//!
//! `opcode-vm` depends on no other project crate. It owns:
//! - [`Code`]: the stable error-code type used by every diagnostic registry
//!   (compiler `E…`/`W…`, runtime `R…` in [`codes`]);
//! - [`catalog`]: action signatures as pure data, produced by the stdlib and
//!   read by the compiler;
//! - [`Program`]: the compiled, versioned workflow ([`program`], [`instr`]);
//! - [`Event`] and [`Effect`]: what goes into and comes out of the [`Vm`];
//! - [`limits`]: the size and nesting every expression is held to.
//!
//! The VM does no I/O and reads no clock: time, inputs and action results
//! arrive inside events.
#![deny(clippy::disallowed_methods)]
#![warn(missing_docs)]

pub mod admission;
pub mod catalog;
pub mod codes;
pub mod effect;
pub mod error;
pub mod event;
pub mod expr_lang;
pub mod host;
pub mod instr;
pub mod limits;
pub mod listing;
pub mod machine;
pub mod plan;
pub mod policy;
pub mod program;
pub mod secret;
mod step_order;
pub mod value;

pub use codes::Code;
pub use effect::{Effect, InstRef, Record};
pub use event::Event;
pub use host::{Host, Vars};
pub use instr::Instr;
pub use machine::{RunStatus, StepStatus, Vm};
pub use plan::Plan;
pub use program::Program;
