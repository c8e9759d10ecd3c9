//! Stable error codes.
//!
//! A [`Code`] names one kind of problem for ever: `E0001` (compile error),
//! `W0001` (compile warning) or `R0001` (run-time error). Each code has a page
//! in `spec/errors/<CODE>.md` whose text is embedded in the binary, so
//! `opcodec explain CODE` works offline. The compiler's registry lives in
//! `opcode-compiler`; the run-time registry is [`RUNTIME`] below, because the
//! VM must not depend on the compiler.

use std::fmt;

/// One stable, documented error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Code {
    /// The code itself, such as `E0001`.
    pub id: &'static str,
    /// A short kebab-case name, such as `invalid-json`.
    pub name: &'static str,
    /// The page from `spec/errors/<id>.md`.
    pub doc: &'static str,
}

impl Code {
    /// The one-line summary: the page's first heading without the code prefix.
    pub fn summary(&self) -> &'static str {
        let first = self.doc.lines().next().unwrap_or_default();
        let heading = first.trim_start_matches('#').trim();
        heading
            .split_once(':')
            .map_or(heading, |(_, rest)| rest.trim())
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id)
    }
}

/// Declares a registry of codes: one `pub const` per code plus a slice of all.
///
/// The page is read from `spec/errors/<id>.md`, relative to the crate using
/// the macro, so the path is given by the caller.
#[macro_export]
macro_rules! code_registry {
    ($all:ident, $dir:literal; $($(#[$meta:meta])* $id:ident = $name:literal,)*) => {
        $(
            $(#[$meta])*
            pub const $id: $crate::Code = $crate::Code {
                id: stringify!($id),
                name: $name,
                doc: include_str!(concat!($dir, stringify!($id), ".md")),
            };
        )*
        /// Every code of this registry, in declaration order.
        pub const $all: &[$crate::Code] = &[$($id),*];
    };
}

code_registry! { RUNTIME, "../../spec/errors/";
    /// An action failed.
    R0100 = "action-failed",
    /// A step attempt passed its deadline.
    R0101 = "step-timeout",
    /// A reference has no value at run time.
    R0102 = "missing-reference",
    /// A CEL expression failed or gave the wrong type.
    R0103 = "expression-error",
    /// A decision timed out without a fallback.
    R0104 = "decision-timeout",
    /// The run passed its deadline.
    R0105 = "run-timeout",
    /// The run was cancelled.
    R0106 = "cancelled",
    /// A step uses an action this runtime does not have.
    R0107 = "action-unavailable",
    /// The run's inputs do not match `input_schema`.
    R0108 = "invalid-inputs",
    /// A Program cannot be loaded or is misused.
    R0109 = "invalid-program",
    /// `workflow.fail` was called.
    R0110 = "workflow-fail",
    /// An assertion failed.
    R0111 = "assertion-failed",
    /// An action's parameters are invalid at run time.
    R0112 = "invalid-params",
    /// A child workflow failed.
    R0113 = "child-failed",
    /// A decision, signal or command does not fit the run's state.
    R0114 = "rejected",
    /// A tool or command names a template that does not exist.
    R0120 = "template-not-found",
    /// A tool or command names a workflow that does not exist.
    R0121 = "workflow-not-found",
    /// A tool was called with missing or ill-typed arguments.
    R0122 = "invalid-arguments",
    /// `opcode.define` was given a workflow that does not compile.
    R0123 = "invalid-workflow",
    /// The secret vault cannot be opened or read.
    R0124 = "vault-error",
    /// A step needs isolation the host cannot give.
    R0125 = "isolation-unavailable",
    /// A path is outside what the step may read or write.
    R0126 = "path-denied",
    /// An action's circuit breaker is open.
    R0127 = "circuit-open",
    /// A plugin's MCP server is down or its tool failed.
    R0128 = "plugin-unavailable",
    /// A step's isolation block asks for more than the settings allow.
    R0129 = "isolation-refused",
    /// A step reached one of the run-time bounds of spec/limits.md.
    R0130 = "limit-exceeded",
    /// The store refused or failed a write (a full disk, say).
    R0131 = "storage-error",
    /// A worker's worktree has a writer already, or is quarantined.
    R0132 = "worktree-busy",
    /// The run was pruned by the retention settings: only its tombstone
    /// (and its export, if one was made) is left.
    R0133 = "workflow-pruned",
    /// The daemon began to stop while a call waited on a run: the run is
    /// kept and carries on at the next start.
    R0134 = "daemon-stopping",
    /// A run's concurrency key has `limit` runs holding a slot and its
    /// template refuses the newest (`on_limit: refuse_newest`).
    R0135 = "concurrency-limit",
    /// A call was not made: its rate limit's window is full (the step waits
    /// for the next window; it fails with this code only where it cannot).
    R0136 = "throttled",
    /// A broker message a template's `triggers.stream` cannot make into a
    /// run's params: no body, a body that is not JSON, or no id where the
    /// trigger says; it goes to the dead-letter topic.
    R0137 = "unmapped-message",
}

/// Finds a run-time code by its id.
pub fn lookup(id: &str) -> Option<Code> {
    RUNTIME
        .iter()
        .copied()
        .find(|code| code.id.eq_ignore_ascii_case(id))
}
