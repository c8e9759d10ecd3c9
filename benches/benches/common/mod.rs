//! What the benchmarks that drive a daemon over HTTP share.

use std::time::Duration;

use serde_json::{Value, json};

/// One stateless (2026-07-28) `tools/call` of `tool` posted by hand.
pub async fn bare_call(http: &reqwest::Client, uri: &str, tool: &str, arguments: &Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool,
        "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        }
    }});
    let answer = http
        .post(uri)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(body.to_string())
        .send()
        .await
        .expect("posts");
    answer.json().await.expect("a JSON answer")
}

/// The `p` quantile of `sorted`.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}
