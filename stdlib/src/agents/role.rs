//! The three roles and what each may do.

use std::time::Duration;

use opcode_vm::error::ActionError;

/// What a delegated agent may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Reads the workspace, changes nothing.
    Scout,
    /// Edits the workspace (not `.git`), one per worktree.
    Worker,
    /// Runs commands: read-only workspace, a scratch directory.
    Runner,
}

/// The fewest steps a budget may give (the reserve needs two).
pub const MIN_STEPS: i64 = opcode_vm::limits::AGENT_MIN_STEPS;
/// The most steps a budget may give.
pub const MAX_STEPS: i64 = opcode_vm::limits::AGENT_MAX_STEPS;
/// The shortest wall-clock budget.
pub const MIN_TIMEOUT: Duration = Duration::from_millis(opcode_vm::limits::AGENT_MIN_TIMEOUT_MS);

impl Role {
    /// The role of `action`.
    pub fn of(action: &str) -> Result<Role, ActionError> {
        match action {
            "agent.scout" => Ok(Role::Scout),
            "agent.worker" => Ok(Role::Worker),
            "agent.runner" => Ok(Role::Runner),
            other => Err(ActionError::validation(format!(
                "`{other}` is not an agent role; use agent.scout, agent.worker or agent.runner"
            ))),
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Role::Scout => "scout",
            Role::Worker => "worker",
            Role::Runner => "runner",
        }
    }

    /// May it write its workspace?
    pub fn writes(self) -> bool {
        self == Role::Worker
    }

    /// Its action's name.
    pub fn action(self) -> &'static str {
        match self {
            Role::Scout => "agent.scout",
            Role::Worker => "agent.worker",
            Role::Runner => "agent.runner",
        }
    }

    /// Steps and time unless the step says.
    fn defaults(self) -> (i64, u64) {
        opcode_vm::limits::agent_defaults(self.action()).unwrap_or((MIN_STEPS, 0))
    }

    /// Steps unless the step says.
    pub fn default_steps(self) -> i64 {
        self.defaults().0
    }

    /// Time unless the step says.
    pub fn default_timeout(self) -> Duration {
        Duration::from_millis(self.defaults().1)
    }

    /// The rules the agent is told.
    pub fn rules(self) -> &'static str {
        match self {
            Role::Scout => {
                "You are a scout: investigate the workspace and answer. The workspace is \
                 read-only; you cannot change any file. Report what you found, with file \
                 paths and names, concisely."
            }
            Role::Worker => {
                "You are a worker: make the change asked for, in the workspace only. `.git` is \
                 read-only: do not commit or run git commands that change the repository. \
                 Keep the change as small as the task allows, and report what you changed."
            }
            Role::Runner => {
                "You are a runner: run the commands the task asks for and analyse their \
                 output. The workspace is read-only; write scratch files under \
                 $OPCODE_AGENT_SCRATCH. Report concisely which commands failed and why, \
                 quoting the relevant error lines, not the whole output."
            }
        }
    }
}

/// The steps kept for the final report: 20% of the budget, at least two.
pub fn reserve_steps(max_steps: i64) -> i64 {
    (max_steps / 5).max(2)
}
