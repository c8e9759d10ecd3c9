//! A step naming a published agent (spec/registry.md, "Steps naming a
//! release"): the release read through [`Services`], its role and MCP
//! servers checked again as it runs, and its fields given as defaults
//! under the step's own parameters.

use opcode_vm::error::ActionError;
use serde_json::{Map, Value, json};

use super::AgentsConfig;
use super::allowlist;
use super::role::Role;
use crate::call::{Call, Services};

/// A release a call runs.
#[derive(Debug, Clone)]
pub struct Release {
    /// Exactly which: `name@version`.
    pub pinned: String,
    /// The call with the release's fields under its own, and `agent` the
    /// settings entry the release runs on (none: the default one).
    pub call: Call,
}

/// The release `call`'s `agent` names, when it names no settings entry.
pub async fn of(
    call: &Call,
    role: Role,
    agents: &AgentsConfig,
    services: &dyn Services,
) -> Result<Option<Release>, ActionError> {
    let Some(reference) = call.str("agent") else {
        return Ok(None);
    };
    if agents.entries.contains_key(reference) {
        return Ok(None);
    }
    let found = services.agent_release(reference).await?;
    let definition = &found["definition"];
    let pinned = format!(
        "{}@{}",
        found["name"].as_str().unwrap_or_default(),
        found["version"].as_str().unwrap_or_default()
    );
    if definition["role"].as_str() != Some(role.name()) {
        let theirs = definition["role"].as_str().unwrap_or("?");
        return Err(ActionError::validation(format!(
            "`{pinned}` is a {theirs} agent; `{}` runs a {}",
            role.action(),
            role.name(),
        ))
        .with_details(json!({"code": "E0070", "help": format!("use `agent.{theirs}`")})));
    }
    let servers = definition["mcp"].as_object().into_iter().flatten();
    if let Some(allowed) = &agents.mcp_allowed
        && let Some((name, server)) = servers
            .into_iter()
            .find(|(_, s)| !allowlist::allows(allowed, s))
    {
        return Err(ActionError::validation(format!(
            "`{pinned}` brings the MCP server `{name}` ({}), which the settings' `agent_mcp` \
             does not allow",
            allowlist::what(server)
        ))
        .with_details(json!({
            "code": "E0069",
            "help": format!("the settings' `agent_mcp` allows: {}", allowed.join(", "))
        })));
    }
    Ok(Some(Release {
        call: under(call, definition),
        pinned,
    }))
}

/// `call` with `definition`'s fields under its own ([`defaults`]).
fn under(call: &Call, definition: &Value) -> Call {
    let mut call = call.clone();
    if let Some(params) = call.params.as_object_mut() {
        defaults(definition, params);
    }
    call
}

/// `params` of an `agent.*` call with a release's `definition` under them:
/// `model`, `variant`, the budgets and `permissions` where they give none;
/// its skills and MCP servers added to theirs (theirs win by name);
/// `agent` its `runs_on` (none: the default entry).
pub fn defaults(definition: &Value, params: &mut Map<String, Value>) {
    params.remove("agent");
    if let Some(entry) = definition["runs_on"].as_str() {
        params.insert("agent".into(), entry.into());
    }
    let budgets = &definition["budgets"];
    let fields = [
        ("model", &definition["model"]),
        ("variant", &definition["variant"]),
        ("permissions", &definition["permissions"]),
        ("max_steps", &budgets["max_steps"]),
        ("timeout", &budgets["timeout"]),
    ];
    for (key, value) in fields {
        if !value.is_null() && params.get(key).is_none_or(Value::is_null) {
            params.insert(key.into(), value.clone());
        }
    }
    let skills = merged_skills(definition["skills"].as_array(), params.get("skills"));
    if !skills.is_empty() {
        params.insert("skills".into(), Value::Array(skills));
    }
    let mut mcp: Map<String, Value> = definition["mcp"].as_object().cloned().unwrap_or_default();
    if let Some(own) = params.get("mcp").and_then(Value::as_object) {
        mcp.extend(own.clone());
    }
    if !mcp.is_empty() {
        params.insert("mcp".into(), Value::Object(mcp));
    }
}

/// The release's skills, each replaced by the step's of the same name,
/// then the step's others.
fn merged_skills(release: Option<&Vec<Value>>, own: Option<&Value>) -> Vec<Value> {
    let own: Vec<Value> = own.and_then(Value::as_array).cloned().unwrap_or_default();
    let named = |skill: &Value| skill["name"].as_str().map(str::to_owned);
    let mut out: Vec<Value> = release
        .into_iter()
        .flatten()
        .filter(|skill| {
            !own.iter()
                .any(|o| named(o).is_some() && named(o) == named(skill))
        })
        .cloned()
        .collect();
    out.extend(own);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::testing::Turns;

    #[test]
    fn the_step_s_own_parameters_win_and_lists_are_merged() {
        let call = Call {
            params: json!({
                "agent": "db-analyzer@1.2.0",
                "prompt": "look",
                "model": "mine",
                "skills": [{"name": "style", "content": "terse"}],
                "mcp": {"fs": {"command": "fs-mcp"}},
            }),
            ..Call::default()
        };
        let definition = json!({
            "role": "scout",
            "runs_on": "opencode",
            "model": "theirs",
            "variant": "high",
            "skills": [
                {"name": "db", "content": "schemas"},
                {"name": "style", "content": "verbose"},
            ],
            "mcp": {"pg": {"command": "npx"}},
            "budgets": {"max_steps": 24, "timeout": "8m"},
            "permissions": "deny",
        });
        let params = under(&call, &definition).params;
        assert_eq!(
            params,
            json!({
                "agent": "opencode",
                "prompt": "look",
                "model": "mine",
                "variant": "high",
                "permissions": "deny",
                "max_steps": 24,
                "timeout": "8m",
                "skills": [
                    {"name": "db", "content": "schemas"},
                    {"name": "style", "content": "terse"},
                ],
                "mcp": {"pg": {"command": "npx"}, "fs": {"command": "fs-mcp"}},
            })
        );
    }

    fn registry() -> Turns {
        Turns(
            std::sync::Mutex::default(),
            Some(
                json!({"name": "db-analyzer", "version": "1.2.0", "definition": {
                    "role": "scout", "runs_on": "oc", "model": "m",
                    "mcp": {"pg": {"command": "npx"}, "docs": {"url": "https://mcp.example.com/docs"}},
                }}),
            ),
        )
    }

    fn agents(allowed: Option<&[&str]>) -> AgentsConfig {
        let entry: super::super::Entry =
            serde_json::from_value(json!({"protocol": "plain", "command": ["agent"]})).unwrap();
        AgentsConfig {
            entries: [("oc".to_owned(), entry)].into(),
            mcp_allowed: allowed.map(|a| a.iter().map(|s| (*s).to_owned()).collect()),
            ..AgentsConfig::default()
        }
    }

    fn call(action: &str, agent: &str) -> Call {
        Call {
            action: action.into(),
            params: json!({"agent": agent, "prompt": "p"}),
            ..Call::default()
        }
    }

    #[tokio::test]
    async fn a_release_runs_on_its_entry_and_an_entry_is_no_release() {
        let (services, agents) = (registry(), agents(None));
        let found = of(
            &call("agent.scout", "db-analyzer"),
            Role::Scout,
            &agents,
            &services,
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(found.pinned, "db-analyzer@1.2.0");
        assert_eq!(found.call.params["agent"], "oc");
        assert_eq!(found.call.params["model"], "m");
        let entry = of(&call("agent.scout", "oc"), Role::Scout, &agents, &services).await;
        assert!(entry.unwrap().is_none());
    }

    #[tokio::test]
    async fn the_role_and_the_allowlist_are_checked_again_when_it_runs() {
        let services = registry();
        let worker = of(
            &call("agent.worker", "db-analyzer"),
            Role::Worker,
            &agents(None),
            &services,
        )
        .await
        .unwrap_err();
        assert_eq!(worker.details.unwrap()["code"], "E0070");
        // The operator narrowed `agent_mcp` after the publish.
        let narrowed = agents(Some(&["npx"]));
        let refused = of(
            &call("agent.scout", "db-analyzer"),
            Role::Scout,
            &narrowed,
            &services,
        )
        .await
        .unwrap_err();
        assert!(refused.message.contains("`docs`"), "{}", refused.message);
        assert_eq!(refused.details.unwrap()["code"], "E0069");
        let allowed = agents(Some(&["npx", "https://mcp.example.com"]));
        let ran = of(
            &call("agent.scout", "db-analyzer"),
            Role::Scout,
            &allowed,
            &services,
        )
        .await;
        assert!(ran.unwrap().is_some());
        let unknown = of(
            &call("agent.scout", "nobody"),
            Role::Scout,
            &allowed,
            &services,
        )
        .await;
        assert!(unknown.is_err());
    }

    #[test]
    fn a_release_with_no_entry_runs_on_the_default_one() {
        let call = Call {
            params: json!({"agent": "x", "prompt": "p"}),
            ..Call::default()
        };
        let params = under(&call, &json!({"role": "scout"})).params;
        assert_eq!(params, json!({"prompt": "p"}));
    }
}
