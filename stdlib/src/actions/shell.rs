//! `shell.exec`.

use opcode_vm::catalog::{ActionSpec, Ty};

use super::spec::action;

/// Signatures.
pub fn specs() -> Vec<ActionSpec> {
    vec![
        action("shell.exec", "Runs a program. A non-zero exit code is data (`exit_code`), not a failure, unless `fail_on_nonzero` is set. Standard output that is valid JSON is parsed into `stdout`; `stdout_raw` keeps the text.")
            .req("command", Ty::String, "program to run (or shell command line with `shell: true`)")
            .opt("args", Ty::array(Ty::Any), "arguments; non-strings are passed as JSON text")
            .opt("env", Ty::map(Ty::Any), "environment variables for the process")
            .opt("cwd", Ty::String, "working directory")
            .opt("stdin", Ty::Any, "standard input; non-strings are passed as JSON")
            .opt("timeout", Ty::Duration, "kill the process after this long (default 30s)")
            .opt("shell", Ty::Bool, "run through /bin/sh -c (default false)")
            .opt("fail_on_nonzero", Ty::Bool, "fail the step on a non-zero exit code (default false)")
            .output(Ty::object([
                ("stdout", Ty::Any),
                ("stdout_raw", Ty::String),
                ("stderr", Ty::String),
                ("exit_code", Ty::Int),
                ("duration_ms", Ty::Int),
                ("killed", Ty::Bool),
                ("truncated", Ty::Bool),
            ])),
    ]
}
