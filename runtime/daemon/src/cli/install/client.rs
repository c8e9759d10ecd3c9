//! The MCP clients `opcode install --client` registers the daemon with:
//! where each keeps its configuration, and the entry it reads.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::edit::{JsonFile, TomlFile};

/// The name of our entry in every client's configuration.
pub const ENTRY: &str = "opcode";
/// The environment variable a client reads the token from: the token is
/// never written into a client's file.
pub const TOKEN_VARIABLE: &str = "OPCODE_TOKEN";
/// The id of the VS Code input that asks for the token.
const VSCODE_INPUT: &str = "opcode-token";

/// An MCP client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Client {
    /// Claude Code (`~/.claude.json`, user scope).
    ClaudeCode,
    /// OpenAI Codex (`$CODEX_HOME/config.toml`, default `~/.codex/config.toml`).
    Codex,
    /// Cursor (`~/.cursor/mcp.json`).
    Cursor,
    /// VS Code (the user folder's `mcp.json`).
    Vscode,
}

/// A folder named by an environment variable, if it is an absolute path:
/// an empty or relative value is ignored, as the XDG base directory
/// specification says, rather than resolved against the current folder.
fn absolute(value: Option<String>) -> Option<PathBuf> {
    value.map(PathBuf::from).filter(|path| path.is_absolute())
}

/// Where the daemon is, as a client reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The Streamable HTTP URL (`…/mcp`).
    pub url: String,
    /// Does the daemon want a bearer token?
    pub token: bool,
}

impl Client {
    /// How people call it.
    pub fn title(self) -> &'static str {
        match self {
            Client::ClaudeCode => "Claude Code",
            Client::Codex => "Codex",
            Client::Cursor => "Cursor",
            Client::Vscode => "VS Code",
        }
    }

    /// Its user configuration file under `home`, given the environment.
    pub fn config_file(self, home: &Path, var: impl Fn(&str) -> Option<String>) -> PathBuf {
        match self {
            Client::ClaudeCode => home.join(".claude.json"),
            Client::Codex => absolute(var("CODEX_HOME"))
                .unwrap_or_else(|| home.join(".codex"))
                .join("config.toml"),
            Client::Cursor => home.join(".cursor").join("mcp.json"),
            Client::Vscode => {
                let user = if cfg!(target_os = "macos") {
                    home.join("Library/Application Support")
                } else {
                    absolute(var("XDG_CONFIG_HOME")).unwrap_or_else(|| home.join(".config"))
                };
                user.join("Code").join("User").join("mcp.json")
            }
        }
    }

    /// The folder whose presence says the client is installed (for its
    /// default file).
    pub fn installed_marker(self, file: &Path, home: &Path) -> PathBuf {
        match self {
            // ~/.claude.json sits beside ~/.claude.
            Client::ClaudeCode => home.join(".claude"),
            _ => file
                .parent()
                .map_or_else(|| home.to_path_buf(), Path::to_path_buf),
        }
    }

    /// `text` (the file's content, empty for a new one) with our entry set
    /// to `endpoint`, or removed when it is `None`; `None` when nothing
    /// changes.
    pub fn edit(self, text: &str, endpoint: Option<&Endpoint>) -> Result<Option<String>, String> {
        let changed;
        let after;
        match self {
            Client::Codex => {
                let mut file = TomlFile::parse(text)?;
                let entries = endpoint.map(|e| {
                    let mut entries = vec![("url", e.url.clone())];
                    if e.token {
                        entries.push(("bearer_token_env_var", TOKEN_VARIABLE.to_owned()));
                    }
                    entries
                });
                changed = file.set_table("mcp_servers", ENTRY, entries.as_deref())?;
                after = file.text();
            }
            Client::ClaudeCode | Client::Cursor | Client::Vscode => {
                let file = JsonFile::parse(text)?;
                let table = if self == Client::Vscode {
                    "servers"
                } else {
                    "mcpServers"
                };
                let entry = endpoint.map(|e| self.json_entry(e));
                let mut any = file.set_member(table, ENTRY, entry.as_ref())?;
                if self == Client::Vscode {
                    let input = endpoint.filter(|e| e.token).map(|_| {
                        json!({"type": "promptString", "id": VSCODE_INPUT,
                               "description": "The opcode daemon's token", "password": true})
                    });
                    any |= file.set_element("inputs", "id", VSCODE_INPUT, input.as_ref())?;
                }
                changed = any;
                after = file.text();
            }
        }
        Ok(changed.then_some(after))
    }

    /// Our entry in a JSON client's file.
    fn json_entry(self, endpoint: &Endpoint) -> Value {
        let mut entry = match self {
            Client::Cursor => json!({"url": endpoint.url}),
            _ => json!({"type": "http", "url": endpoint.url}),
        };
        if endpoint.token {
            let reference = match self {
                Client::ClaudeCode => format!("${{{TOKEN_VARIABLE}}}"),
                Client::Cursor => format!("${{env:{TOKEN_VARIABLE}}}"),
                _ => format!("${{input:{VSCODE_INPUT}}}"),
            };
            entry["headers"] = json!({"Authorization": format!("Bearer {reference}")});
        }
        entry
    }

    /// What the client needs beside its file for the token.
    pub fn token_hint(self) -> String {
        match self {
            Client::Vscode => "VS Code asks for the token when it first starts the server".into(),
            _ => format!(
                "{} reads the token from {TOKEN_VARIABLE}: set it in the environment it starts in",
                self.title()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn endpoint(token: bool) -> Endpoint {
        Endpoint {
            url: "http://127.0.0.1:4100/mcp".into(),
            token,
        }
    }

    #[test]
    fn each_client_gets_its_own_shape_and_never_the_token_itself() {
        let claude = Client::ClaudeCode
            .edit("", Some(&endpoint(true)))
            .unwrap()
            .unwrap();
        let parsed: Value = serde_json::from_str(&claude).unwrap();
        assert_eq!(
            parsed["mcpServers"]["opcode"],
            json!({"type": "http", "url": "http://127.0.0.1:4100/mcp",
                   "headers": {"Authorization": "Bearer ${OPCODE_TOKEN}"}})
        );
        let cursor = Client::Cursor
            .edit("{}", Some(&endpoint(false)))
            .unwrap()
            .unwrap();
        let parsed: Value = serde_json::from_str(&cursor).unwrap();
        assert_eq!(
            parsed["mcpServers"]["opcode"],
            json!({"url": "http://127.0.0.1:4100/mcp"})
        );
        let vscode = Client::Vscode
            .edit("", Some(&endpoint(true)))
            .unwrap()
            .unwrap();
        let parsed: Value = serde_json::from_str(&vscode).unwrap();
        assert_eq!(
            parsed["servers"]["opcode"]["headers"]["Authorization"],
            "Bearer ${input:opcode-token}"
        );
        assert_eq!(parsed["inputs"][0]["password"], true);
        let codex = Client::Codex
            .edit("", Some(&endpoint(true)))
            .unwrap()
            .unwrap();
        assert_eq!(
            codex,
            "[mcp_servers.opcode]\nurl = \"http://127.0.0.1:4100/mcp\"\nbearer_token_env_var = \"OPCODE_TOKEN\"\n"
        );
    }

    #[test]
    fn the_default_files_follow_the_environment() {
        let home = Path::new("/home/u");
        let none = |_: &str| None;
        assert_eq!(
            Client::ClaudeCode.config_file(home, none),
            home.join(".claude.json")
        );
        let codex_home = |name: &str| (name == "CODEX_HOME").then(|| "/srv/codex".to_owned());
        assert_eq!(
            Client::Codex.config_file(home, codex_home),
            Path::new("/srv/codex/config.toml")
        );
        assert_eq!(
            Client::Cursor.config_file(home, none),
            home.join(".cursor/mcp.json")
        );
    }

    #[test]
    fn an_empty_or_relative_folder_variable_is_ignored() {
        let home = Path::new("/home/u");
        for value in ["", "relative/dir"] {
            let set = |_: &str| Some(value.to_owned());
            if !cfg!(target_os = "macos") {
                assert_eq!(
                    Client::Vscode.config_file(home, set),
                    home.join(".config/Code/User/mcp.json"),
                    "XDG_CONFIG_HOME={value:?}"
                );
            }
            assert_eq!(
                Client::Codex.config_file(home, set),
                home.join(".codex/config.toml"),
                "CODEX_HOME={value:?}"
            );
        }
    }
}
