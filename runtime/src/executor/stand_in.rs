//! Answers given in place of actions: a run's calls that a stand-in
//! answers never reach the action. The conformance suite's replay answers
//! them from a recorded log; workflow tests mock actions this way.

use opcode_vm::effect::Dispatch;
use opcode_vm::error::ActionError;
use serde_json::Value;

/// What a stand-in says about one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Call the action as usual.
    Call,
    /// This is the call's result; the action is not called.
    Give(Result<Value, ActionError>),
    /// This is the call's result, once this long has passed (a mocked
    /// call that takes time; on a virtual clock it passes at once).
    After(std::time::Duration, Result<Value, ActionError>),
    /// The call never finishes by itself: the run's timeouts or a cancel
    /// end it (a recorded call that had not finished).
    Hold,
}

/// Answers some calls instead of the actions.
pub trait StandIn: Send + Sync {
    /// The answer to `dispatch`, a call of run `run_id`. Called once or
    /// twice per call (whether it may run inside the round, then the call);
    /// it must answer the same each time.
    fn answer(&self, run_id: &str, dispatch: &Dispatch) -> Answer;
}
