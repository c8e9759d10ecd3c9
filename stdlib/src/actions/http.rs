//! `http.request`, `http.get`, `http.post`.

use opcode_vm::catalog::{ActionSpec, Ty};

use super::spec::action;

fn with_common(b: super::spec::Builder) -> super::spec::Builder {
    b.req("url", Ty::String, "absolute http:// or https:// URL")
        .opt("headers", Ty::map(Ty::Any), "request headers; values are sent as text")
        .opt("body", Ty::Any, "request body; omitted or null sends none")
        .opt("body_encoding", Ty::one_of_strings(&["json", "form", "text", "raw"]), "how `body` is encoded (default json)")
        .opt("auth", Ty::object([("type", Ty::one_of_strings(&["bearer", "basic", "api_key"]))]), "{type: bearer, token} | {type: basic, username, password} | {type: api_key, header_name, header_value}")
        .opt("timeout", Ty::Duration, "request timeout (default 30s)")
        .opt("follow_redirects", Ty::Bool, "follow 3xx responses (default true)")
        .opt("max_redirects", Ty::Int, "most redirects to follow (default 10)")
        .opt("tls_skip_verify", Ty::Bool, "accept any TLS certificate (default false)")
        .opt("fail_on_error_status", Ty::Bool, "fail on status >= 400 (default false: the status is data)")
}

/// The HTTP response as a step output.
pub fn output() -> Ty {
    Ty::object([
        ("status_code", Ty::Int),
        ("status", Ty::String),
        ("headers", Ty::map(Ty::String)),
        ("body", Ty::Any),
        ("content_type", Ty::String),
        ("duration_ms", Ty::Int),
    ])
}

/// Signatures.
pub fn specs() -> Vec<ActionSpec> {
    vec![
        with_common(action("http.request", "Sends an HTTP request. The body is parsed as JSON when the response says application/json. Non-2xx responses are data, not failures, unless `fail_on_error_status` is set."))
            .opt("method", Ty::String, "HTTP method (default GET)")
            .output(output()),
        with_common(action("http.get", "Sends a GET request; see http.request.")).output(output()),
        with_common(action("http.post", "Sends a POST request; see http.request.")).output(output()),
    ]
}
