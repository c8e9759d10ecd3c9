//! The contracts every opcode crate shares, and the machine that runs them.
//!
//! `opcode-vm` depends on no other project crate. It owns:
//! - [`Code`]: the stable error-code type used by every diagnostic registry
//!   (compiler `E…`/`W…`, runtime `R…` in [`codes`]);
//! - [`catalog`]: action signatures as pure data, produced by the stdlib and
//!   read by the compiler.
//!
//! The VM does no I/O and reads no clock: time, inputs and action results
//! arrive inside events.
#![deny(clippy::disallowed_methods)]
#![warn(missing_docs)]

pub mod catalog;
pub mod codes;
pub mod policy;

pub use codes::Code;
