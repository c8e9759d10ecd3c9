//! What a call depends on outside this machine: the target a circuit
//! breaker guards (spec/breakers.md, "Targets"). An HTTP call's target is
//! the origin of its URL, a plugin's action the plugin's server, a
//! delegated agent's call the settings entry that runs it. Actions that work
//! on this machine alone (shell, files, hashing, expressions) have none: a
//! command's own failure says nothing about anything another run shares.

use serde_json::Value;

/// The target of a call of `action` with `params`: `plugin` names the
/// plugin that provides the action, if one does; `agent` resolves a
/// delegated agent's `agent` parameter to its settings entry.
pub fn target_of(
    action: &str,
    params: &Value,
    plugin: Option<&str>,
    agent: impl FnOnce(Option<&str>) -> Option<String>,
) -> Option<String> {
    if let Some(plugin) = plugin {
        return Some(format!("plugin:{plugin}"));
    }
    let text = |name: &str| params.get(name).and_then(Value::as_str);
    match action.split_once('.').map_or(action, |(family, _)| family) {
        "http" => origin(text("url")?),
        "agent" => agent(text("agent")).map(|entry| format!("agent:{entry}")),
        _ => None,
    }
}

/// `scheme://host[:port]` of an absolute http(s) URL (no user, path or
/// query: nothing a secret in them would show through).
fn origin(url: &str) -> Option<String> {
    let url = reqwest::Url::parse(url).ok()?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return None;
    }
    Some(url.origin().ascii_serialization())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn of(action: &str, params: &Value) -> Option<String> {
        target_of(action, params, None, |name| {
            Some(name.unwrap_or("default").to_owned())
        })
    }

    #[test]
    fn an_http_call_is_guarded_by_its_origin() {
        let url = "https://user:pw@API.example.com:443/v1/items?key=SECRET#x";
        assert_eq!(
            of("http.get", &json!({"url": url})).as_deref(),
            Some("https://api.example.com")
        );
        assert_eq!(
            of("http.request", &json!({"url": "http://127.0.0.1:8080/a"})).as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(of("http.post", &json!({"url": "file:///etc/passwd"})), None);
        assert_eq!(of("http.post", &json!({"url": "not a url"})), None);
        assert_eq!(of("http.get", &json!({})), None);
    }

    #[test]
    fn plugins_and_agents_are_guarded_by_what_runs_them() {
        assert_eq!(
            target_of("github.create_issue", &json!({}), Some("github"), |_| None).as_deref(),
            Some("plugin:github")
        );
        assert_eq!(
            of("agent.worker", &json!({"agent": "coder"})).as_deref(),
            Some("agent:coder")
        );
        assert_eq!(
            of("agent.scout", &json!({})).as_deref(),
            Some("agent:default")
        );
    }

    #[test]
    fn work_on_this_machine_has_no_target() {
        for action in [
            "shell.exec",
            "fs.read",
            "crypto.hash",
            "expr.eval",
            "json.transform",
        ] {
            assert_eq!(of(action, &json!({"command": "test"})), None, "{action}");
        }
    }
}
