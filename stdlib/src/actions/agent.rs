//! `agent.scout`, `agent.worker`, `agent.runner`: delegated agents
//! (spec/agents.md).

use opcode_vm::catalog::{ActionSpec, Ty};

use super::spec::action;

/// The roles, their actions and what each may do.
pub const ROLES: [(&str, &str); 3] = [
    (
        "agent.scout",
        "Delegates a read-only investigation to a coding agent in a sandbox: it may read the workspace, never change it.",
    ),
    (
        "agent.worker",
        "Delegates a bounded change to a coding agent in a sandbox: it may edit the workspace (not `.git`); one worker per worktree at a time.",
    ),
    (
        "agent.runner",
        "Delegates noisy commands (tests, builds, linters) to a coding agent in a sandbox: read-only workspace plus a scratch directory; their whole output is kept in the transcript and the result says what failed.",
    ),
];

/// Signatures.
pub fn specs() -> Vec<ActionSpec> {
    ROLES
        .iter()
        .map(|(name, doc)| {
            action(name, doc)
                .req("prompt", Ty::String, "the task")
                .opt("agent", Ty::String, "the `agents` settings entry that runs it (default: the default one), or a published agent: `name` (its newest, pinned when the workflow is defined) or `name@version`")
                .opt("workspace", Ty::String, "the directory it works in (default: the run's workspace)")
                .opt("model", Ty::String, "passed to the agent's command line")
                .opt("variant", Ty::String, "passed to the agent's command line")
                .opt("max_steps", Ty::Int, "model steps it may take (4–256; the last 20%, at least two, are for its report)")
                .opt("timeout", Ty::Duration, "wall-clock budget (at least 10s)")
                .opt("files", Ty::array(Ty::String), "workspace files whose text is given with the task")
                .opt("context", Ty::Any, "data given with the task")
                .opt("skills", Ty::array(Ty::object([("name", Ty::String), ("content", Ty::String)])), "skills provisioned in its home as SKILL.md files")
                .opt("mcp", Ty::map(Ty::Any), "MCP servers provisioned in its configuration")
                .opt("env", Ty::map(Ty::String), "environment variables of the agent's process")
                .opt("session", Ty::String, "a session name: earlier turns of steps naming it are given with the task")
                .opt("history", Ty::Int, "turns of the session given in full (0–50, default 10; older ones as a summary)")
                .opt("permissions", Ty::one_of_strings(&["ask", "allow", "deny"]), "what the agent's permission requests get: asked as decisions of the run (default), or allowed or denied at once")
                .opt("permission_timeout", Ty::Duration, "how long a permission decision waits before it is denied (default 5m, never past `timeout`)")
                .output(output())
        })
        .collect()
}

fn output() -> Ty {
    Ty::object([
        ("role", Ty::String),
        ("agent", Ty::String),
        ("release", Ty::String),
        ("status", Ty::String),
        ("summary", Ty::String),
        (
            "files_changed",
            Ty::array(Ty::object([("path", Ty::String), ("change", Ty::String)])),
        ),
        (
            "commands",
            Ty::array(Ty::object([
                ("command", Ty::String),
                ("exit_code", Ty::Any),
            ])),
        ),
        ("tools", Ty::map(Ty::Int)),
        ("errors", Ty::array(Ty::String)),
        ("permissions", Ty::array(Ty::Any)),
        ("steps", Ty::Int),
        ("max_steps", Ty::Int),
        ("duration_ms", Ty::Int),
        ("exit_code", Ty::Int),
        ("tokens", Ty::Any),
        ("cost", Ty::Any),
        ("session", Ty::Any),
        (
            "transcript",
            Ty::object([
                ("path", Ty::String),
                ("bytes", Ty::Int),
                ("lines", Ty::Int),
                ("sha256", Ty::String),
                ("cut", Ty::Bool),
            ]),
        ),
    ])
}
