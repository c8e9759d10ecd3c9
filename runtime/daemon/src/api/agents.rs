//! The agent registry as resources (spec/registry.md, spec/mcp.md
//! "Resources"): `opcode://agents`, the catalog, and `opcode://agents/NAME`
//! (the newest release) or `opcode://agents/NAME/VERSION`, each a release
//! with its skills' text.

use opcode_runtime::registry::{self, Failure};
use serde_json::{Value, json};

use super::resources::Listed;
use super::{Api, ToolError};

impl Api {
    /// The catalog and each published agent, as listed resources.
    pub(super) async fn agents_listed(&self) -> Result<Vec<Listed>, ToolError> {
        let mut listed = vec![Listed {
            uri: "opcode://agents".into(),
            name: "agents".into(),
            description: "Every published agent: its newest release, role, description and how many releases it has.".into(),
            mime_type: "application/json",
        }];
        for agent in registry::catalog(self.store().as_ref()).await? {
            let name = agent["name"].as_str().unwrap_or_default();
            listed.push(Listed {
                uri: format!("opcode://agents/{}", opcode_runtime::summary::segment(name)),
                name: format!("agent {name}"),
                description: agent["description"].as_str().map_or_else(
                    || format!("Agent {name} {}", agent["newest"]),
                    str::to_owned,
                ),
                mime_type: "application/json",
            });
        }
        Ok(listed)
    }

    /// `opcode://agents` (no `spec`) or one release.
    pub(super) async fn agent_resource(&self, spec: Option<&str>) -> Result<Value, ToolError> {
        let store = self.store().as_ref();
        let Some(spec) = spec else {
            return Ok(json!({"agents": registry::catalog(store).await?}));
        };
        let refused = |failure| match failure {
            Failure::Refused(e) => {
                ToolError::new(e.code, e.message).with_details(json!({"help": e.help}))
            }
            Failure::Store(e) => ToolError::from(e),
        };
        let mut view = registry::view(store, spec).await.map_err(refused)?;
        let name = view["name"].as_str().unwrap_or_default().to_owned();
        let releases = store.agent_releases(Some(&name)).await?;
        let shown = releases
            .iter()
            .find(|r| view["version"] == r.version.as_str());
        if let Some(earlier) = shown.and_then(|r| registry::before(&releases, r)) {
            let before = registry::expanded(store, earlier).await.map_err(refused)?;
            let (old, new) = (
                registry::document(&before),
                registry::document(&view["definition"]),
            );
            let diff = similar::TextDiff::from_lines(&old, &new)
                .unified_diff()
                .context_radius(3)
                .header(
                    &earlier.version,
                    view["version"].as_str().unwrap_or_default(),
                )
                .to_string();
            view["changes"] = json!({"from": earlier.version, "diff": diff});
        }
        Ok(view)
    }
}
