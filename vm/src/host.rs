//! What the VM needs from outside that is still pure: evaluating CEL.
//!
//! The VM depends on no expression engine; the stdlib implements [`Host`]
//! with the `cel` crate, compiling each of a Program's expressions once.
//! Evaluation is deterministic, so replay gives the same results.

use serde_json::Value;

use crate::error::ActionError;
use crate::instr::ExprId;

/// The CEL variables of one evaluation.
#[derive(Debug, Clone, Copy)]
pub struct Vars<'a> {
    /// `inputs`
    pub inputs: &'a Value,
    /// `steps`: the outputs of the steps the expression reads, by id.
    pub steps: &'a [(&'a str, &'a Value)],
    /// `workflow`
    pub workflow: &'a Value,
    /// `context`
    pub context: &'a Value,
    /// `iter`: the innermost loop's item and index.
    pub iter: Option<(&'a Value, u32)>,
}

/// Evaluates a Program's expressions.
pub trait Host {
    /// Evaluates expression `expr` with `vars`; an error is the failure of
    /// the step that asked (R0103, or R0130 past a bound).
    fn eval(&self, expr: ExprId, vars: &Vars<'_>) -> Result<Value, ActionError>;
}
