//! The instruction set: one enum, one file.
//!
//! A step's code is a short sequence: an optional [`Instr::Guard`] followed by
//! exactly one *body* instruction that does the step's work and, when it
//! finishes, completes the step with its value. Blocks (the top level, a
//! branch, a loop body, a parallel branch, a hook) are not code but data in
//! [`crate::program::Block`]: their steps, dependencies and levels.
//!
//! Every operand is an index into a table of the [`crate::Program`]:
//! expressions (`ExprId`), templates (`TemplateId`), blocks (`BlockId`),
//! decisions (`DecisionId`), branch tables (`BranchTableId`), constants
//! (`ConstId`). Nothing is looked up by name at run time.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::policy::{LoopMode, ParallelMode};

/// Index into [`crate::Program::exprs`].
pub type ExprId = u32;
/// Index into [`crate::Program::templates`].
pub type TemplateId = u32;
/// Index into [`crate::Program::blocks`].
pub type BlockId = u32;
/// Index into [`crate::Program::steps`].
pub type StepId = u32;
/// Index into [`crate::Program::decisions`].
pub type DecisionId = u32;
/// Index into [`crate::Program::branch_tables`].
pub type BranchTableId = u32;
/// Index into [`crate::Program::consts`].
pub type ConstId = u32;
/// Index into [`crate::Program::slots`].
pub type SlotId = u32;

/// One instruction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Instr {
    /// A step's `condition` guard.
    ///
    /// # Operation
    /// Evaluates CEL `expr`; `true` goes on to the next instruction, `false`
    /// marks the step `skipped` with output `null`, anything else fails the
    /// attempt (R0103).
    ///
    /// Source: `{"id": "s", "condition": "inputs.env == 'prod'", ...}`.
    Guard {
        /// The guard expression.
        expr: ExprId,
    },

    /// An action step's body.
    ///
    /// # Operation
    /// Renders `params` (slots resolved, secrets left as sites), emits a
    /// `dispatch` effect with the idempotency key
    /// `workflow_id/step_id/attempt` and the step's timeout, and waits for
    /// the result. The result is the step's output. Failures go through the
    /// step's retry policy and `on_error`.
    ///
    /// Source: `{"id": "s", "action": "http.get", "params": {"url": "${{inputs.url}}"}}`.
    Call {
        /// The action's full name.
        action: String,
        /// The params template.
        params: TemplateId,
        /// CEL variables the action needs (`expr.eval`), when it needs any.
        scope: Option<ExprId>,
    },

    /// A condition step's body.
    ///
    /// # Operation
    /// Evaluates CEL `expr`, turns the value into a key (`true`, `prod`,
    /// `2`…), starts the block the table maps it to (or the default), waits
    /// for it, and completes with `{"branch", "output"}` (or `{"branch",
    /// "skipped": true}` when nothing matched).
    ///
    /// Source: `{"type": "condition", "config": {"expression": "inputs.env", "branches": {...}}}`.
    Branch {
        /// The expression whose value picks the branch.
        expr: ExprId,
        /// Key → block, and the default.
        table: BranchTableId,
    },

    /// A `for_each` loop's body.
    ///
    /// # Operation
    /// Evaluates CEL `over` to a list, then runs `body` once per item (up to
    /// `max_iter`), one iteration after the other, with `iter` bound to
    /// `{item, index}`. Completes with `{"iterations", "results", "truncated"}`.
    ///
    /// Source: `{"type": "loop", "config": {"over": "inputs.items", "body": [...]}}`.
    ForEach {
        /// The list expression.
        over: ExprId,
        /// The loop body.
        body: BlockId,
        /// Most iterations.
        max_iter: Option<u64>,
    },

    /// A `while` or `until` loop's body.
    ///
    /// # Operation
    /// `while`: evaluates `cond` before each iteration and stops when it is
    /// false; `until`: runs an iteration, then stops when `cond` is true.
    /// Stops at `max_iter`. Completes like [`Instr::ForEach`].
    ///
    /// Source: `{"type": "loop", "config": {"mode": "until", "condition": "...", "body": [...]}}`.
    Repeat {
        /// `while` or `until`.
        mode: LoopMode,
        /// The loop condition.
        cond: ExprId,
        /// The loop body.
        body: BlockId,
        /// Most iterations.
        max_iter: Option<u64>,
    },

    /// A parallel step's body.
    ///
    /// # Operation
    /// Starts the branch blocks (at most `max_concurrency` at a time). `all`:
    /// completes with `{"mode": "all", "branches": [...]}` when every branch
    /// finished, fails when one fails. `race`: the first branch to complete
    /// wins (`{"mode": "race", "winner", "output"}`) and the others are
    /// cancelled; fails when all failed.
    ///
    /// Source: `{"type": "parallel", "config": {"mode": "all", "branches": [[...], [...]]}}`.
    Fork {
        /// The branches, in order.
        branches: Vec<BlockId>,
        /// `all` or `race`.
        mode: ParallelMode,
        /// Most branches running at once.
        max_concurrency: Option<u64>,
    },

    /// A wait step with a duration only.
    ///
    /// # Operation
    /// Starts a durable timer of `ms` and completes with `{"waited": ms}`
    /// when it fires.
    ///
    /// Source: `{"type": "wait", "config": {"duration": "5s"}}`.
    Sleep {
        /// How long, in milliseconds.
        ms: u64,
    },

    /// A wait step for a named signal.
    ///
    /// # Operation
    /// Takes the earliest matching signal from the run's mailbox, or suspends
    /// until one arrives (matched by `name`, or by the step's id). With
    /// `timeout_ms`, gives up when it passes. Completes with `{"signal",
    /// "payload"}` or `{"signal", "timed_out": true}`.
    ///
    /// Source: `{"type": "wait", "config": {"signal": "approved", "duration": "1h"}}`.
    AwaitSignal {
        /// The signal name.
        name: String,
        /// Longest wait, in milliseconds.
        timeout_ms: Option<u64>,
    },

    /// A reasoning step's body.
    ///
    /// # Operation
    /// Renders the decision's `data_inject`, emits a `request_decision`
    /// effect (and a timer when the decision has a timeout), and suspends
    /// until the decision is resolved; completes with the resolution
    /// `{"choice", "reasoning", "data", "resolved_by"}`.
    ///
    /// Source: `{"type": "reasoning", "config": {"options": [...], "timeout": "1h", "fallback": "reject"}}`.
    Decide {
        /// The decision's description.
        decision: DecisionId,
    },
}

impl Instr {
    /// Is this a guard (not a body)?
    pub fn is_guard(&self) -> bool {
        matches!(self, Instr::Guard { .. })
    }
}

impl fmt::Display for Instr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Instr::Guard { expr } => write!(f, "guard      e{expr}"),
            Instr::Call {
                action,
                params,
                scope,
            } => {
                write!(f, "call       {action} params=t{params}")?;
                if let Some(scope) = scope {
                    write!(f, " scope=e{scope}")?;
                }
                Ok(())
            }
            Instr::Branch { expr, table } => write!(f, "branch     e{expr} table=bt{table}"),
            Instr::ForEach {
                over,
                body,
                max_iter,
            } => {
                write!(f, "for_each   over=e{over} body=b{body}")?;
                if let Some(max) = max_iter {
                    write!(f, " max_iter={max}")?;
                }
                Ok(())
            }
            Instr::Repeat {
                mode,
                cond,
                body,
                max_iter,
            } => {
                write!(f, "repeat     {mode} cond=e{cond} body=b{body}")?;
                if let Some(max) = max_iter {
                    write!(f, " max_iter={max}")?;
                }
                Ok(())
            }
            Instr::Fork {
                branches,
                mode,
                max_concurrency,
            } => {
                let list: Vec<String> = branches.iter().map(|b| format!("b{b}")).collect();
                write!(f, "fork       {mode} [{}]", list.join(", "))?;
                if let Some(max) = max_concurrency {
                    write!(f, " max_concurrency={max}")?;
                }
                Ok(())
            }
            Instr::Sleep { ms } => write!(f, "sleep      {ms}ms"),
            Instr::AwaitSignal { name, timeout_ms } => {
                write!(f, "await      signal={name:?}")?;
                if let Some(ms) = timeout_ms {
                    write!(f, " timeout={ms}ms")?;
                }
                Ok(())
            }
            Instr::Decide { decision } => write!(f, "decide     d{decision}"),
        }
    }
}
