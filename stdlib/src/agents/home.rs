//! A call's own directory: the agent's home (with the skills and MCP
//! servers the step provisions) and, for a runner, its scratch directory;
//! owned by the sandbox user, removed after the call.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use opcode_vm::error::ActionError;
use serde_json::{Map, Value, json};

/// The directory of one call (a copy names the same directory).
#[derive(Debug, Clone)]
pub struct CallDir {
    root: PathBuf,
}

impl CallDir {
    /// Makes `<parent>/<name>` with `home` and `scratch` in it, owned by
    /// `owner` when this process may give files away.
    pub fn make(parent: &Path, name: &str, owner: (u32, u32)) -> Result<CallDir, ActionError> {
        let fail = |what: &Path, e: std::io::Error| {
            ActionError::execution(format!(
                "cannot make the agent's directory {}: {e}",
                what.display()
            ))
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o711)
            .create(parent)
            .map_err(|e| fail(parent, e))?;
        let root = parent.join(name);
        if root.exists() {
            // What an interrupted attempt left.
            let _ = std::fs::remove_dir_all(&root);
        }
        let dir = CallDir { root };
        for sub in ["", "home", "scratch"] {
            let path = dir.root.join(sub);
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&path)
                .map_err(|e| fail(&path, e))?;
        }
        dir.chown(owner)?;
        Ok(dir)
    }

    /// The agent's `HOME`.
    pub fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    /// The runner's scratch directory.
    pub fn scratch(&self) -> PathBuf {
        self.root.join("scratch")
    }

    /// Writes the step's skills and MCP servers into the home.
    pub fn provision(
        &self,
        skills: &[(String, String)],
        mcp: Option<&Map<String, Value>>,
        owner: (u32, u32),
    ) -> Result<(), ActionError> {
        let home = self.home();
        let write = |path: PathBuf, text: String| {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, text)
        };
        let fail = |e: std::io::Error| {
            ActionError::execution(format!("cannot provision the agent's home: {e}"))
        };
        for (name, content) in skills {
            let path = home.join(".opencode/skills").join(name).join("SKILL.md");
            write(path, content.clone()).map_err(fail)?;
        }
        if let Some(servers) = mcp {
            let opencode: Map<String, Value> = servers
                .iter()
                .map(|(name, server)| (name.clone(), opencode_server(server)))
                .collect();
            let config = json!({"$schema": "https://opencode.ai/config.json", "mcp": opencode});
            write(home.join(".config/opencode/opencode.json"), pretty(&config)).map_err(fail)?;
            let plain = json!({"mcpServers": servers});
            write(home.join(".opcode-agent/mcp.json"), pretty(&plain)).map_err(fail)?;
        }
        self.chown(owner)
    }

    /// Gives everything in the directory to `owner` (when root).
    fn chown(&self, owner: (u32, u32)) -> Result<(), ActionError> {
        crate::isolation::give::give_tree(&self.root, owner).map_err(ActionError::execution)
    }

    /// Removes the directory; what could not be removed, if anything.
    pub fn remove(self) -> Result<(), String> {
        match std::fs::remove_dir_all(&self.root) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(format!(
                "its home {} could not be removed ({e})",
                self.root.display()
            )),
        }
    }
}

/// A server as OpenCode's configuration writes it: `type` local or remote,
/// `command` one list, `enabled`.
fn opencode_server(server: &Value) -> Value {
    let mut out = server.as_object().cloned().unwrap_or_default();
    let remote = out.contains_key("url");
    out.entry("type")
        .or_insert_with(|| json!(if remote { "remote" } else { "local" }));
    out.entry("enabled").or_insert(json!(true));
    if let (Some(Value::String(command)), Some(Value::Array(args))) =
        (out.get("command").cloned(), out.remove("args"))
    {
        let mut line = vec![Value::String(command)];
        line.extend(args);
        out.insert("command".into(), Value::Array(line));
    }
    if let Some(env) = out.remove("env") {
        out.insert("environment".into(), env);
    }
    Value::Object(out)
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skills_and_servers_land_where_agents_read_them() {
        let parent = tempfile::tempdir().unwrap();
        let owner = (
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        );
        let dir = CallDir::make(parent.path(), "r1.fix.1", owner).unwrap();
        let servers = json!({"pg": {"command": "npx", "args": ["-y", "pg-mcp"], "env": {"A": "1"}},
                             "web": {"url": "https://mcp.example/sse"}});
        dir.provision(
            &[("db".into(), "# DB skill".into())],
            servers.as_object(),
            owner,
        )
        .unwrap();
        let home = dir.home();
        assert_eq!(
            std::fs::read_to_string(home.join(".opencode/skills/db/SKILL.md")).unwrap(),
            "# DB skill"
        );
        let config: Value = serde_json::from_str(
            &std::fs::read_to_string(home.join(".config/opencode/opencode.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            config["mcp"]["pg"]["command"],
            json!(["npx", "-y", "pg-mcp"])
        );
        assert_eq!(config["mcp"]["pg"]["environment"], json!({"A": "1"}));
        assert_eq!(config["mcp"]["web"]["type"], "remote");
        let root = dir.home().parent().unwrap().to_path_buf();
        dir.remove().unwrap();
        assert!(!root.exists());
    }
}
