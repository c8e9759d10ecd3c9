//! The opcode standard library of actions.
//!
//! [`catalog()`] describes every built-in action as data (parameters, types,
//! output shape, documentation). The compiler checks workflows against it
//! and editors show it; it never needs the implementations.
#![warn(missing_docs)]

pub mod actions;
#[cfg(feature = "runtime")]
pub mod agents;
#[cfg(feature = "runtime")]
pub mod call;
#[cfg(feature = "runtime")]
pub mod cel;
#[cfg(feature = "runtime")]
pub mod environment;
#[cfg(feature = "runtime")]
pub mod evaluator;
#[cfg(feature = "runtime")]
pub mod exec;
#[cfg(feature = "runtime")]
pub mod expr_lang;
#[cfg(feature = "runtime")]
pub mod helpers;
#[cfg(feature = "runtime")]
pub mod inputs;
#[cfg(feature = "runtime")]
pub mod isolation;
#[cfg(feature = "runtime")]
pub mod jq;
#[cfg(feature = "runtime")]
pub mod limits;
#[cfg(feature = "runtime")]
pub mod redact;
#[cfg(feature = "runtime")]
pub mod report;
#[cfg(feature = "runtime")]
pub mod targets;

use opcode_vm::catalog::{ActionSpec, Catalog};

/// The signatures of every built-in action.
pub fn catalog() -> Vec<ActionSpec> {
    actions::specs()
}

/// The built-in actions as a [`Catalog`].
pub fn builtin_catalog() -> Catalog {
    Catalog::new(catalog())
}
