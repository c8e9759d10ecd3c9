//! Errors: those of actions (data, in events) and those of the VM itself.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Code;
use crate::codes;

/// Why an action (or a step) failed. Travels in events and outputs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionError {
    /// The run-time code, such as `R0100`.
    pub code: String,
    /// opcode's error kind, such as `EXECUTION_ERROR` (what agents used to opcode test).
    pub kind: String,
    /// One sentence.
    pub message: String,
    /// May retrying help?
    pub retryable: bool,
    /// Structured details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

impl ActionError {
    /// An error with a registered code.
    pub fn new(code: Code, kind: &str, message: impl Into<String>, retryable: bool) -> ActionError {
        ActionError {
            code: code.id.to_owned(),
            kind: kind.to_owned(),
            message: message.into(),
            retryable,
            details: None,
        }
    }

    /// Adds details.
    pub fn with_details(mut self, details: Value) -> ActionError {
        self.details = Some(details);
        self
    }

    /// A failed action (retryable).
    pub fn execution(message: impl Into<String>) -> ActionError {
        ActionError::new(codes::R0100, "EXECUTION_ERROR", message, true)
    }

    /// A deadline passed (retryable).
    pub fn timeout(message: impl Into<String>) -> ActionError {
        ActionError::new(codes::R0101, "TIMEOUT_ERROR", message, true)
    }

    /// Invalid parameters for an action (not retryable).
    pub fn validation(message: impl Into<String>) -> ActionError {
        ActionError::new(codes::R0112, "VALIDATION_ERROR", message, false)
    }
}

impl std::fmt::Display for ActionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}] {}", self.code, self.message)
    }
}

/// A step's failure as the run records it: the action error and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepError {
    /// The step instance (`fetch`, `hash[2]`).
    pub step: String,
    /// What went wrong.
    #[serde(flatten)]
    pub error: ActionError,
}

/// An event the VM cannot apply: the runtime must not log it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// The run-time code (R0114 for signals and decisions, R0109 for misuse).
    pub code: Code,
    /// What is wrong.
    pub message: String,
}

impl Rejected {
    /// A rejection with a code.
    pub fn new(code: Code, message: impl Into<String>) -> Rejected {
        Rejected {
            code,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}] {}", self.code, self.message)
    }
}

impl std::error::Error for Rejected {}
