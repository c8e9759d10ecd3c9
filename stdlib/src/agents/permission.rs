//! An agent's permission requests (spec/agents.md, "Permission requests"):
//! answered at once by the step's `permissions` policy, or asked as a
//! decision of the run that a person or an agent answers.

use std::time::Duration;

use opcode_vm::error::ActionError;
use opcode_vm::event::Ask;
use opcode_vm::program::DecisionOption;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::role::Role;
use super::task::Budget;
use crate::call::Call;

/// How long a permission decision waits by default.
const DEFAULT_TIMEOUT: Duration = Duration::from_mins(5);

/// The answer given when nobody answers.
pub const DENY: &str = "deny";
/// The answer that lets the agent go on.
pub const ALLOW: &str = "allow";

/// What a permission request gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Asked as a decision of the run.
    Ask,
    /// Allowed at once.
    Allow,
    /// Denied at once.
    Deny,
}

impl Policy {
    /// The answer given at once, unless the request is to be asked.
    pub fn immediate(self) -> Option<&'static str> {
        match self {
            Policy::Allow => Some(ALLOW),
            Policy::Deny => Some(DENY),
            Policy::Ask => None,
        }
    }
}

/// A call's permission policy and how long its questions wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permissions {
    /// What a request gets.
    pub policy: Policy,
    /// How long a question waits for its answer (never past the agent's
    /// own time).
    pub timeout: Duration,
}

impl Permissions {
    /// The permissions of `call` (`permissions`, `permission_timeout`).
    pub fn of(call: &Call, budget: &Budget) -> Result<Permissions, ActionError> {
        let policy = match call.str("permissions") {
            None | Some("ask") => Policy::Ask,
            Some("allow") => Policy::Allow,
            Some("deny") => Policy::Deny,
            Some(other) => {
                return Err(ActionError::validation(format!(
                    "`permissions` is ask, allow or deny, not `{other}`"
                )));
            }
        };
        let timeout = match call.str("permission_timeout") {
            None => DEFAULT_TIMEOUT,
            Some(text) => crate::call::parse_duration(text).map_err(|e| {
                ActionError::validation(format!(
                    "`permission_timeout` {text:?} is not a duration: {e}"
                ))
            })?,
        };
        Ok(Permissions {
            policy,
            timeout: timeout.min(budget.timeout),
        })
    }
}

/// The key of a request: the same action and detail asked again (by a
/// re-run of the call) have the same one, whatever id the agent gives it.
pub fn key(action: &str, detail: &Value) -> String {
    let mut digest = Sha256::new();
    digest.update(action.as_bytes());
    digest.update([0]);
    digest.update(detail.to_string().as_bytes());
    crate::actions::crypto::hex(&digest.finalize()[..8])
}

/// The question a request asks of the run: allow or deny, deny when
/// nobody answers within `timeout` (at most `left`, the agent's time).
pub fn question(
    call: &Call,
    role: Role,
    agent: &str,
    (action, detail): (&str, &Value),
    timeout: Duration,
) -> Ask {
    let option = |id: &str, description: &str| DecisionOption {
        id: id.to_owned(),
        description: Some(description.to_owned()),
        description_template: None,
    };
    let shown = match detail {
        Value::Null => String::new(),
        Value::String(s) => format!(" ({s})"),
        other => format!(" ({other})"),
    };
    Ask {
        effect: call.effect,
        key: key(action, detail),
        prompt: format!(
            "The {} agent `{agent}` of step `{}` asks permission: {action}{shown}",
            role.name(),
            call.step
        ),
        options: vec![
            option(ALLOW, "let the agent do it"),
            option(DENY, "refuse; the agent goes on without it"),
        ],
        data: json!({
            "kind": "agent_permission",
            "agent": agent,
            "role": role.name(),
            "action": action,
            "detail": detail,
        }),
        timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        default: DENY.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(secs: u64) -> Budget {
        Budget {
            max_steps: 16,
            reserve: 3,
            timeout: Duration::from_secs(secs),
        }
    }

    fn call(params: Value) -> Call {
        Call {
            step: "fix".into(),
            effect: 7,
            params,
            ..Call::default()
        }
    }

    #[test]
    fn the_same_request_has_the_same_key_and_another_another() {
        let detail = json!({"pattern": "rm -rf build"});
        assert_eq!(key("bash", &detail), key("bash", &detail));
        assert_ne!(key("bash", &detail), key("bash", &json!("rm -rf /")));
        assert_ne!(key("bash", &detail), key("edit", &detail));
        assert_eq!(key("bash", &detail).len(), 16);
    }

    #[test]
    fn the_policy_defaults_to_ask_and_the_timeout_never_outlives_the_agent() {
        let asked = Permissions::of(&call(json!({})), &budget(600)).unwrap();
        assert_eq!(asked.policy, Policy::Ask);
        assert_eq!(asked.timeout, DEFAULT_TIMEOUT);
        let short = Permissions::of(&call(json!({"permission_timeout": "1h"})), &budget(60));
        assert_eq!(short.unwrap().timeout, Duration::from_mins(1));
        let allow = Permissions::of(&call(json!({"permissions": "allow"})), &budget(60));
        assert_eq!(allow.unwrap().policy, Policy::Allow);
        assert!(Permissions::of(&call(json!({"permissions": "maybe"})), &budget(60)).is_err());
    }

    #[test]
    fn a_question_offers_allow_and_deny_and_denies_by_default() {
        let asked = question(
            &call(json!({})),
            Role::Worker,
            "script",
            ("rm -rf build", &json!({"pattern": "rm -rf build"})),
            Duration::from_secs(30),
        );
        assert_eq!(asked.effect, 7);
        assert_eq!(asked.default, DENY);
        assert!(asked.problem().is_none(), "{:?}", asked.problem());
        assert!(asked.prompt.contains("rm -rf build") && asked.prompt.contains("`fix`"));
        assert_eq!(asked.timeout_ms, 30_000);
    }
}
