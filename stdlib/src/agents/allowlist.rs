//! The settings' `agent_mcp`: which MCP servers a published agent may
//! bring (spec/registry.md). A `{command}` server's program is in the
//! list; a `{url}` server's address is at or under one of its URLs.

use serde_json::Value;

/// Whether `allowed` allows `server` (`{command, …}` or `{url}`).
pub fn allows(allowed: &[String], server: &Value) -> bool {
    match (server["command"].as_str(), server["url"].as_str()) {
        (Some(command), _) => allowed.iter().any(|a| a == command),
        (None, Some(url)) => allowed.iter().any(|a| url_under(url, a)),
        (None, None) => false,
    }
}

/// What `server` runs or reaches, for messages.
pub fn what(server: &Value) -> &str {
    server["command"]
        .as_str()
        .or_else(|| server["url"].as_str())
        .unwrap_or_default()
}

/// Whether `url` is at or under `prefix` (a URL): the prefix ends where a
/// host, port or path ends, so `https://a.example` does not take in
/// `https://a.example.evil` nor `https://a.example@evil.example`.
fn url_under(url: &str, prefix: &str) -> bool {
    let Some(rest) = url.strip_prefix(prefix) else {
        return false;
    };
    prefix.contains("://")
        && (prefix.ends_with('/') || rest.is_empty() || rest.starts_with(['/', '?', '#', ':']))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn programs_match_whole_and_urls_at_a_boundary() {
        let allowed = ["npx".to_owned(), "https://mcp.example.com".to_owned()];
        assert!(allows(&allowed, &json!({"command": "npx", "args": []})));
        assert!(!allows(&allowed, &json!({"command": "npx2"})));
        assert!(allows(
            &allowed,
            &json!({"url": "https://mcp.example.com/sse"})
        ));
        assert!(allows(
            &allowed,
            &json!({"url": "https://mcp.example.com:8443/x"})
        ));
        assert!(!allows(
            &allowed,
            &json!({"url": "https://mcp.example.com.evil/x"})
        ));
        assert!(!allows(
            &allowed,
            &json!({"url": "https://mcp.example.com@evil.example/"})
        ));
        assert!(!allows(&allowed, &json!({})));
    }
}
