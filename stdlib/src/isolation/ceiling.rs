//! The most a step may ask for: the settings' block, widened only by the
//! operator's grants for the step's template or agent. A step's own block
//! may only narrow it; a widening is refused at define time (E0052) and,
//! should the settings change after, when the step runs (R0129).

use std::path::{Component, Path, PathBuf};

use super::block::{Block, Grant};
use super::{DEFAULT_DISK, DEFAULT_MAX_FILE, DEFAULT_MAX_OUTPUT, DEFAULT_PIDS};

/// The ceiling for the steps of one template and agent.
#[derive(Debug, Clone, PartialEq)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "independent allowances of the operator"
)]
pub struct Ceiling {
    /// May a step turn isolation off?
    pub unisolated: bool,
    /// May a step keep the host network?
    pub network: bool,
    /// May a step write its workspace?
    pub writable: bool,
    /// Workspaces a step may name by absolute path (besides directories
    /// inside the run's own workspace).
    pub workspaces: Vec<PathBuf>,
    /// The most memory (none: no limit).
    pub memory: Option<u64>,
    /// The most processes.
    pub pids: u64,
    /// The most CPU (none: no limit).
    pub cpu: Option<f64>,
    /// The most output kept per stream.
    pub max_output: u64,
    /// The largest file written.
    pub max_file_size: u64,
    /// The most the places a call writes may hold.
    pub disk: u64,
}

/// One way a step's block goes past the ceiling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Widening {
    /// The `isolation` key.
    pub key: &'static str,
    /// Why, in one sentence.
    pub message: String,
    /// The grant that would allow it, as settings JSON.
    pub grant: String,
}

impl Ceiling {
    /// The ceiling `settings` set for runs of `template` by `agent`.
    pub fn of(settings: &Block, template: Option<&str>, agent: Option<&str>) -> Ceiling {
        let mut ceiling = Ceiling {
            unisolated: settings.enabled == Some(false),
            network: settings.network.unwrap_or(false),
            writable: settings.writable.unwrap_or(true),
            workspaces: settings.workspace.iter().cloned().collect(),
            memory: settings.memory.map(|s| s.0),
            pids: settings.pids.unwrap_or(DEFAULT_PIDS),
            cpu: settings.cpu,
            max_output: settings.max_output.map_or(DEFAULT_MAX_OUTPUT, |s| s.0),
            max_file_size: settings.max_file_size.map_or(DEFAULT_MAX_FILE, |s| s.0),
            disk: settings.disk.map_or(DEFAULT_DISK, |s| s.0),
        };
        for grant in settings
            .grants
            .iter()
            .filter(|g| g.applies(template, agent))
        {
            ceiling.widen(grant);
        }
        ceiling
    }

    fn widen(&mut self, grant: &Grant) {
        self.unisolated |= grant.enabled == Some(false);
        self.network |= grant.network == Some(true);
        self.writable |= grant.writable == Some(true);
        self.workspaces.extend(grant.workspaces.iter().cloned());
        if let (Some(limit), Some(granted)) = (self.memory, grant.memory) {
            self.memory = Some(limit.max(granted.0));
        }
        self.pids = self.pids.max(grant.pids.unwrap_or(0));
        if let (Some(limit), Some(granted)) = (self.cpu, grant.cpu) {
            self.cpu = Some(limit.max(granted));
        }
        self.max_output = self.max_output.max(grant.max_output.map_or(0, |s| s.0));
        self.max_file_size = self
            .max_file_size
            .max(grant.max_file_size.map_or(0, |s| s.0));
        self.disk = self.disk.max(grant.disk.map_or(0, |s| s.0));
    }

    /// Where `step` goes past this ceiling; `name` labels the grant that
    /// would allow it (`"template": "deploy"`).
    pub fn widenings(&self, step: &Block, name: &str) -> Vec<Widening> {
        let mut out = Vec::new();
        let mut refuse = |key: &'static str, message: String, grant: String| {
            out.push(Widening {
                key,
                message,
                grant: format!("{{{name}, {grant}}}"),
            });
        };
        if step.enabled == Some(false) && !self.unisolated {
            refuse(
                "enabled",
                "the step turns isolation off".into(),
                "\"enabled\": false".into(),
            );
        }
        if step.network == Some(true) && !self.network {
            refuse(
                "network",
                "the step asks for the host network".into(),
                "\"network\": true".into(),
            );
        }
        if step.writable == Some(true) && !self.writable {
            refuse(
                "writable",
                "the step asks to write a workspace the settings make read-only".into(),
                "\"writable\": true".into(),
            );
        }
        if let Some(ws) = &step.workspace
            && !self.workspace_allowed(ws)
        {
            refuse(
                "workspace",
                format!(
                    "the step asks for the workspace {}, outside its run's workspace",
                    ws.display()
                ),
                format!("\"workspaces\": [{:?}]", ws.display().to_string()),
            );
        }
        let mut above = |key: &'static str, asked: Option<u64>, limit: Option<u64>, unit: &str| {
            if let (Some(asked), Some(limit)) = (asked, limit)
                && asked > limit
            {
                refuse(
                    key,
                    format!(
                        "the step asks for {asked}{unit} of `{key}`, above the settings' {limit}{unit}"
                    ),
                    format!("\"{key}\": {asked}"),
                );
            }
        };
        above("memory", step.memory.map(|s| s.0), self.memory, " bytes");
        above("pids", step.pids, Some(self.pids), "");
        above(
            "max_output",
            step.max_output.map(|s| s.0),
            Some(self.max_output),
            " bytes",
        );
        above(
            "max_file_size",
            step.max_file_size.map(|s| s.0),
            Some(self.max_file_size),
            " bytes",
        );
        above("disk", step.disk.map(|s| s.0), Some(self.disk), " bytes");
        if let (Some(asked), Some(limit)) = (step.cpu, self.cpu)
            && asked > limit
        {
            refuse(
                "cpu",
                format!("the step asks for {asked} cores, above the settings' {limit}"),
                format!("\"cpu\": {asked}"),
            );
        }
        out
    }

    /// A relative workspace stays inside the run's; an absolute one must be
    /// under a configured or granted workspace.
    fn workspace_allowed(&self, ws: &Path) -> bool {
        if ws.is_relative() {
            return stays_inside(ws);
        }
        let ws = super::paths::normalize(ws);
        self.workspaces
            .iter()
            .any(|allowed| ws.starts_with(super::paths::normalize(allowed)))
    }
}

/// Does the relative path `path` stay inside the directory it is relative to?
pub fn stays_inside(path: &Path) -> bool {
    let mut depth = 0usize;
    for component in path.components() {
        match component {
            Component::ParentDir if depth == 0 => return false,
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn block(value: &serde_json::Value) -> Block {
        Block::parse(Some(value)).unwrap()
    }

    #[test]
    fn a_step_may_narrow_but_not_widen() {
        let settings = block(&json!({"memory": "1G", "pids": 100}));
        let ceiling = Ceiling::of(&settings, Some("t"), None);
        let narrow = block(
            &json!({"memory": "64MiB", "pids": 10, "writable": false, "workspace": "sub/dir"}),
        );
        assert!(ceiling.widenings(&narrow, "\"template\": \"t\"").is_empty());
        let wide = block(
            &json!({"enabled": false, "network": true, "workspace": "/", "memory": "2G", "pids": 101}),
        );
        let keys: Vec<_> = ceiling
            .widenings(&wide, "\"template\": \"t\"")
            .iter()
            .map(|w| w.key)
            .collect();
        assert_eq!(keys, ["enabled", "network", "workspace", "memory", "pids"]);
        assert!(!ceiling.workspace_allowed(Path::new("../up")));
    }

    #[test]
    fn grants_widen_for_their_template_or_agent_only() {
        let settings = block(&json!({"grants": [
            {"template": "deploy", "network": true, "workspaces": ["/srv/app"]},
            {"agent": "ops", "enabled": false},
        ]}));
        let deploy = Ceiling::of(&settings, Some("deploy"), Some("bot"));
        assert!(deploy.network && !deploy.unisolated);
        assert!(deploy.workspace_allowed(Path::new("/srv/app/releases")));
        assert!(!deploy.workspace_allowed(Path::new("/srv/other")));
        let ops = Ceiling::of(&settings, Some("other"), Some("ops"));
        assert!(ops.unisolated && !ops.network);
        let widening = &deploy.widenings(
            &block(&json!({"enabled": false})),
            "\"template\": \"deploy\"",
        )[0];
        assert_eq!(
            widening.grant,
            "{\"template\": \"deploy\", \"enabled\": false}"
        );
    }
}
