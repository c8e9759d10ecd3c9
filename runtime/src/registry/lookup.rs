//! What a step's literal `agent` names, for the compiler (spec/registry.md,
//! "Steps naming a release"): an entry of the settings' `agents`, else a
//! published release; the closest known when neither.

use std::collections::BTreeSet;

use opcode_compiler::diagnostics::did_you_mean;
use opcode_compiler::{AgentLookup, AgentRef};
use serde_json::Value;

use super::locate;
use crate::store::{AgentRelease, Registry, StoreError};

/// The settings' entries and the registry's releases, as read once for a
/// compilation.
#[derive(Debug, Clone, Default)]
pub struct Known {
    entries: BTreeSet<String>,
    releases: Vec<AgentRelease>,
}

impl Known {
    /// `entries` (the settings' `agents`) and every release `store` holds.
    pub async fn load(
        store: &dyn Registry,
        entries: impl IntoIterator<Item = String>,
    ) -> Result<Known, StoreError> {
        Ok(Known::of(entries, store.agent_releases(None).await?))
    }

    /// `entries` and `releases`.
    pub fn of(entries: impl IntoIterator<Item = String>, releases: Vec<AgentRelease>) -> Known {
        Known {
            entries: entries.into_iter().collect(),
            releases,
        }
    }

    /// Whether `source` may name an agent at all: the registry is read
    /// only for texts that could.
    pub fn may_name_agents(source: &str) -> bool {
        source.contains("agent.")
    }
}

impl AgentLookup for Known {
    fn lookup(&self, reference: &str) -> AgentRef {
        if self.entries.contains(reference) {
            return AgentRef::Entry;
        }
        let missing = match locate(&self.releases, reference) {
            Ok(release) => {
                let definition: Value =
                    serde_json::from_str(&release.definition).unwrap_or_default();
                return AgentRef::Release {
                    pinned: format!("{}@{}", release.name, release.version),
                    role: definition["role"].as_str().unwrap_or_default().to_owned(),
                };
            }
            Err(missing) => missing,
        };
        let by_name = !reference.contains('@');
        // A bare name may also have meant a settings entry.
        let closest = if by_name {
            let mut names: Vec<&str> = self.entries.iter().map(String::as_str).collect();
            names.extend(missing.known.iter().map(String::as_str));
            did_you_mean(reference, &names).map(str::to_owned)
        } else {
            missing.closest
        };
        let help = match &closest {
            Some(close) => format!("did you mean `{close}`?"),
            None if by_name => self.known_names(),
            None => format!("{}: {}", missing.known_as, missing.known.join(", ")),
        };
        let message = if by_name {
            format!(
                "no agent `{reference}` in the settings' `agents`, and none is published by that name"
            )
        } else {
            missing.message
        };
        AgentRef::Unknown {
            message,
            closest,
            help,
        }
    }
}

impl Known {
    /// What a bare name could have named, in words.
    fn known_names(&self) -> String {
        let mut names: Vec<&str> = self.releases.iter().map(|r| r.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        let entries: Vec<&str> = self.entries.iter().map(String::as_str).collect();
        match (entries.is_empty(), names.is_empty()) {
            (true, true) => "no agent is configured in the daemon's settings (`agents`) nor published (`opcode agent publish FILE`)".into(),
            (false, true) => format!("the settings' `agents`: {}", entries.join(", ")),
            (true, false) => format!("published: {}", names.join(", ")),
            (false, false) => format!(
                "the settings' `agents`: {}; published: {}",
                entries.join(", "),
                names.join(", ")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(name: &str, version: &str, role: &str) -> AgentRelease {
        AgentRelease {
            name: name.into(),
            version: version.into(),
            definition: serde_json::json!({"name": name, "version": version, "role": role})
                .to_string(),
            digest: String::new(),
            published_at: String::new(),
            published_by: None,
        }
    }

    fn known() -> Known {
        Known::of(
            ["opencode".to_owned()],
            vec![
                release("db-analyzer", "1.0.0", "scout"),
                release("db-analyzer", "1.2.0", "scout"),
                release("db-analyzer", "2.0.0-rc.1", "scout"),
                release("db-fixer", "0.1.0", "worker"),
            ],
        )
    }

    #[test]
    fn entries_come_first_then_releases_newest_by_semver() {
        let known = known();
        assert_eq!(known.lookup("opencode"), AgentRef::Entry);
        let pinned = |r: &str| match known.lookup(r) {
            AgentRef::Release { pinned, role } => format!("{pinned} {role}"),
            other => format!("{other:?}"),
        };
        assert_eq!(pinned("db-analyzer"), "db-analyzer@1.2.0 scout");
        assert_eq!(pinned("db-analyzer@1.0.0"), "db-analyzer@1.0.0 scout");
        assert_eq!(pinned("db-fixer"), "db-fixer@0.1.0 worker");
    }

    #[test]
    fn unknown_names_and_versions_offer_the_closest() {
        let known = known();
        let AgentRef::Unknown { closest, .. } = known.lookup("db-analyser") else {
            panic!("known")
        };
        assert_eq!(closest.as_deref(), Some("db-analyzer"));
        let AgentRef::Unknown { closest, .. } = known.lookup("opencod") else {
            panic!("known")
        };
        assert_eq!(closest.as_deref(), Some("opencode"));
        let AgentRef::Unknown {
            closest, message, ..
        } = known.lookup("db-analyzer@1.2.1")
        else {
            panic!("known")
        };
        assert_eq!(closest.as_deref(), Some("db-analyzer@1.2.0"));
        assert_eq!(message, "agent `db-analyzer` has no release 1.2.1");
        let AgentRef::Unknown { closest, help, .. } = known.lookup("zzz") else {
            panic!("known")
        };
        assert_eq!(closest, None);
        assert_eq!(
            help,
            "the settings' `agents`: opencode; published: db-analyzer, db-fixer"
        );
    }
}
