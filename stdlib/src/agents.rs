//! Delegated agents: `agent.scout`, `agent.worker` and `agent.runner` run
//! a coding agent, named in the settings, in a sandbox fixed by its role,
//! within a budget, and return what it did (spec/agents.md).

pub mod allowlist;
mod drive;
pub mod entry;
mod home;
pub mod observed;
pub mod permission;
pub mod protocol;
mod reader;
pub mod release;
mod role;
mod run;
pub mod session;
pub mod snapshot;
mod task;
mod transcript;
pub mod worktree;

use std::collections::BTreeMap;
use std::path::PathBuf;

use opcode_vm::error::ActionError;

pub use self::entry::Entry;
pub use self::role::Role;
pub use self::run::run;

/// What the embedding configures: the agents, where transcripts are kept,
/// where each call's home and scratch directory are made, and where
/// sessions' turns are kept. The default keeps all three in the system's
/// temporary directory.
#[derive(Debug, Clone)]
pub struct AgentsConfig {
    /// The settings' `agents`, by name.
    pub entries: BTreeMap<String, Entry>,
    /// Where transcripts are written (`<dir>/<run>/<step>.<attempt>.jsonl`).
    pub transcripts: PathBuf,
    /// Where calls' homes are made: a directory the sandbox user can
    /// reach, hidden from other sandboxes (and worktrees' lock files, in
    /// `.worktrees`).
    pub calls: PathBuf,
    /// Where sessions' turns are kept.
    pub sessions: PathBuf,
    /// The settings' `agent_mcp`: the MCP servers a published agent may
    /// bring (none: any).
    pub mcp_allowed: Option<Vec<String>>,
}

impl Default for AgentsConfig {
    fn default() -> AgentsConfig {
        let temporary = std::env::temp_dir();
        AgentsConfig {
            entries: BTreeMap::new(),
            transcripts: temporary.join("opcode-agent-transcripts"),
            calls: temporary.join("opcode-agent-calls"),
            sessions: temporary.join("opcode-agent-sessions"),
            mcp_allowed: None,
        }
    }
}

impl AgentsConfig {
    /// The settings' `agents` object, checked.
    pub fn parse(value: Option<&serde_json::Value>) -> Result<BTreeMap<String, Entry>, String> {
        let Some(value) = value else {
            return Ok(BTreeMap::new());
        };
        let entries: BTreeMap<String, Entry> = serde_json::from_value(value.clone())
            .map_err(|e| format!("`agents` in the settings: {e}"))?;
        for (name, entry) in &entries {
            entry
                .check()
                .map_err(|e| format!("`agents.{name}` in the settings: {e}"))?;
        }
        let defaults = entries.values().filter(|e| e.default).count();
        if defaults > 1 {
            return Err(
                "`agents` in the settings: only one entry may be `\"default\": true`".into(),
            );
        }
        Ok(entries)
    }

    /// The transcript file of `attempt` of `step` of `run`.
    pub fn transcript_of(&self, run: &str, step: &str, attempt: u32) -> PathBuf {
        transcript::path(&self.transcripts, run, step, &attempt.to_string())
    }

    /// The entry `name` names, or the default one.
    pub fn entry(&self, name: Option<&str>) -> Result<(&str, &Entry), ActionError> {
        let found = match name {
            Some(name) => self.entries.get_key_value(name),
            None if self.entries.len() == 1 => self.entries.iter().next(),
            None => self.entries.iter().find(|(_, e)| e.default),
        };
        found.map(|(n, e)| (n.as_str(), e)).ok_or_else(|| {
            let known: Vec<&str> = self.entries.keys().map(String::as_str).collect();
            let message = match (name, known.is_empty()) {
                (_, true) => {
                    "no agent is configured: add one to `agents` in the daemon's settings \
                              (spec/agents.md)"
                        .to_owned()
                }
                (Some(name), false) => format!(
                    "no agent `{name}` in the settings; configured: {}",
                    known.join(", ")
                ),
                (None, false) => format!(
                    "the step names no `agent` and none is `\"default\": true` in the settings; \
                     configured: {}",
                    known.join(", ")
                ),
            };
            ActionError::validation(message)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn entries_are_checked_and_the_default_is_found() {
        let entries = AgentsConfig::parse(Some(&json!({
            "a": {"protocol": "plain", "command": ["a"]},
            "b": {"protocol": "opencode", "command": ["b", "{prompt}"], "default": true}
        })))
        .unwrap();
        let config = AgentsConfig {
            entries,
            ..AgentsConfig::default()
        };
        assert_eq!(config.entry(None).unwrap().0, "b");
        assert_eq!(config.entry(Some("a")).unwrap().0, "a");
        let missing = config.entry(Some("c")).unwrap_err();
        assert!(
            missing.message.contains("configured: a, b"),
            "{}",
            missing.message
        );
        let typo = AgentsConfig::parse(Some(&json!({"a": {"protocol": "plain", "comand": ["a"]}})))
            .unwrap_err();
        assert!(typo.contains("comand"), "{typo}");
        let none = AgentsConfig::default().entry(None).unwrap_err();
        assert!(none.message.contains("no agent is configured"));
    }
}
