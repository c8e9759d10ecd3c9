//! The `opcode://` resources (spec/mcp.md, "Resources"): the action
//! catalog, the language reference, each template, each published agent
//! (`api/agents.rs`), each run and the values too big to inline in a tool
//! result, readable whole or in byte ranges.

use opcode_runtime::summary::{self, View};
use opcode_vm::codes;
use percent_encoding::percent_decode_str;
use serde_json::{Value, json};

use super::{Api, ToolError};

/// The language reference, as the language resource serves it.
const LANGUAGE: &str = include_str!("../../../../spec/language.md");

/// A resource's text and media type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contents {
    /// The text (a slice of it when a range was asked).
    pub text: String,
    /// `application/json` or `text/markdown`.
    pub mime_type: &'static str,
    /// The whole resource's length in bytes.
    pub total_bytes: usize,
    /// Where the slice starts.
    pub offset: usize,
}

/// A resource the server lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its URI.
    pub uri: String,
    /// A short name.
    pub name: String,
    /// What it holds.
    pub description: String,
    /// Its media type.
    pub mime_type: &'static str,
}

/// The URI templates of the resources that are not listed one by one.
pub const TEMPLATES: [(&str, &str, &str); 8] = [
    (
        "opcode://runs/{workflow_id}",
        "run",
        "A run's view: status, output, error, pending decisions (as opcode.status).",
    ),
    (
        "opcode://runs/{workflow_id}/output",
        "run-output",
        "A run's whole output; also /error and /inputs.",
    ),
    (
        "opcode://runs/{workflow_id}/steps/{step}/output",
        "step-output",
        "A step instance's whole output (fetch, fetch%5B2%5D); also /error. Add ?offset=N&length=M to read a byte range.",
    ),
    (
        "opcode://runs/{workflow_id}/steps/{step}/transcript",
        "agent-transcript",
        "The whole transcript of a delegated agent's step (agent.*), one JSON line each; ?offset=N&length=M for a byte range.",
    ),
    (
        "opcode://runs/{workflow_id}/events/{sequence}",
        "event-payload",
        "The payload of one entry of a run's log.",
    ),
    (
        "opcode://runs/{workflow_id}/decisions/{decision}/data",
        "decision-data",
        "The data a pending decision shows its decider.",
    ),
    (
        "opcode://templates/{name}",
        "template",
        "A template's newest version (definition, schemas, versions, diagram); /v3 for another.",
    ),
    (
        "opcode://agents/{name}",
        "agent",
        "A published agent's newest release (definition with its skills' text, digest, versions); /1.2.0 for another.",
    ),
];

impl Api {
    /// The resources listed by name: the catalog, the language, each template.
    pub async fn resources(&self) -> Result<Vec<Listed>, ToolError> {
        let mut listed = vec![
            Listed {
                uri: "opcode://actions".into(),
                name: "actions".into(),
                description: "Every action: signature, parameters with their docs, output shape (plugins' too).".into(),
                mime_type: "application/json",
            },
            Listed {
                uri: "opcode://docs/language".into(),
                name: "language".into(),
                description: "The workflow language reference.".into(),
                mime_type: "text/markdown",
            },
        ];
        let (skill, about) = super::skill::frontmatter();
        for (path, _) in super::skill::FILES {
            let top = path == "SKILL.md";
            listed.push(Listed {
                uri: format!("{}{path}", super::skill::URI),
                name: if top {
                    skill.into()
                } else {
                    format!("{skill} {path}")
                },
                description: if top {
                    about.into()
                } else {
                    "Every action of the standard library, of the opcode skill.".into()
                },
                mime_type: "text/markdown",
            });
        }
        let latest = opcode_runtime::store::TemplateFilter {
            latest_only: true,
            ..Default::default()
        };
        for t in self.store().templates(latest).await? {
            listed.push(Listed {
                uri: format!("opcode://templates/{}", summary::segment(&t.name)),
                name: format!("template {}", t.name),
                description: if t.description.is_empty() {
                    format!("Template {} v{}", t.name, t.version)
                } else {
                    t.description.clone()
                },
                mime_type: "application/json",
            });
        }
        listed.extend(self.agents_listed().await?);
        Ok(listed)
    }

    /// Reads resource `uri`, whole or the byte range its query names
    /// (`?offset=N&length=M`, cut to whole characters).
    pub async fn read_resource(&self, uri: &str) -> Result<Contents, ToolError> {
        let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
        if let Some(file) = path.strip_prefix(super::skill::URI) {
            let (_, text) = super::skill::FILES
                .into_iter()
                .find(|(name, _)| *name == file)
                .ok_or_else(|| unknown(uri))?;
            return ranged(text.to_owned(), "text/markdown", query);
        }
        let rest = path.strip_prefix("opcode://").ok_or_else(|| unknown(uri))?;
        let parts: Vec<String> = rest
            .split('/')
            .map(|p| percent_decode_str(p).decode_utf8_lossy().into_owned())
            .collect();
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        let (text, mime_type) = match parts.as_slice() {
            ["actions"] => (self.catalog().to_string(), "application/json"),
            ["docs", "language"] => (LANGUAGE.to_owned(), "text/markdown"),
            ["templates", name] => (
                self.template_resource(name, None).await?.to_string(),
                "application/json",
            ),
            ["templates", name, version] => {
                let number = version
                    .strip_prefix('v')
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| unknown(uri))?;
                let found = self.template_resource(name, Some(number)).await?;
                (found.to_string(), "application/json")
            }
            ["agents"] => (
                self.agent_resource(None).await?.to_string(),
                "application/json",
            ),
            ["agents", name] => (
                self.agent_resource(Some(name)).await?.to_string(),
                "application/json",
            ),
            ["agents", name, version] => {
                let spec = format!("{name}@{version}");
                (
                    self.agent_resource(Some(&spec)).await?.to_string(),
                    "application/json",
                )
            }
            ["runs", id, "steps", step, "transcript"] => {
                (self.transcript(id, step).await?, "application/x-ndjson")
            }
            ["runs", id, what @ ..] => (self.run_part(uri, id, what).await?, "application/json"),
            _ => return Err(unknown(uri)),
        };
        ranged(text, mime_type, query)
    }

    /// Every action the compiler knows, as data.
    fn catalog(&self) -> Value {
        let compiler = self.exec.compiler();
        let actions: Vec<Value> = compiler
            .catalog()
            .iter()
            .map(|a| {
                json!({
                    "name": a.name,
                    "signature": a.signature(),
                    "doc": a.doc,
                    "params": a.params.iter().map(|p| json!({
                        "name": p.name, "type": p.ty.describe(), "required": p.required, "doc": p.doc,
                    })).collect::<Vec<_>>(),
                    "output": a.output.shape(),
                })
            })
            .collect();
        json!({ "actions": actions })
    }

    /// A template version with the list of its versions and its diagram.
    async fn template_resource(
        &self,
        name: &str,
        version: Option<i64>,
    ) -> Result<Value, ToolError> {
        let row = self.store().template(name, version).await?.ok_or_else(|| {
            ToolError::new(codes::R0120, format!("template `{name}` is not defined"))
        })?;
        let mut out = super::query::template_json(&row);
        let versions = self
            .store()
            .templates(opcode_runtime::store::TemplateFilter {
                name: Some(name.to_owned()),
                ..Default::default()
            })
            .await?;
        out["versions"] = versions
            .iter()
            .map(|v| json!(format!("v{}", v.version)))
            .collect();
        // The executor keeps the compiled programs of the definitions it saw.
        if let Ok(diagram) = self.exec.with_program(&row.definition, |program| {
            opcode_compiler::diagram::mermaid(program, None)
        }) {
            out["diagram"] = json!(diagram);
        }
        Ok(out)
    }

    /// The transcript of the last attempt of `step` of run `id`: as the
    /// store keeps it once the call has ended (whichever daemon ran it),
    /// else the file the call is writing on this host, named from the run,
    /// step and attempt (never from a path a step's output holds).
    async fn transcript(&self, id: &str, step: &str) -> Result<String, ToolError> {
        let missing = || {
            ToolError::new(
                codes::R0121,
                format!("workflow `{id}` has no transcript for step `{step}`"),
            )
        };
        let steps = self.store().steps(id).await?;
        let row = steps
            .iter()
            .find(|s| s.step_id == step)
            .ok_or_else(missing)?;
        if let Some(text) = self.store().transcript(id, step, row.attempt).await? {
            return Ok(text);
        }
        let file = self.exec.agents().transcript_of(id, step, row.attempt);
        tokio::fs::read_to_string(&file)
            .await
            .map_err(|_| missing())
    }

    /// A part of run `id`: its view, or one stored value.
    async fn run_part(&self, uri: &str, id: &str, what: &[&str]) -> Result<String, ToolError> {
        let Some(state) = self.store().state(id).await? else {
            return Err(self.unknown_run(id).await);
        };
        let row = &state.workflow;
        let stored = match what {
            [] => {
                let view = View {
                    inline_limit: Some(self.inline_limit),
                    ..View::default()
                };
                return Ok(summary::of_state(&state, &view).to_string());
            }
            ["output"] => row.output.clone(),
            ["error"] => row.error.clone(),
            ["inputs"] => Some(row.inputs.clone()),
            ["steps", step, part @ ("output" | "error")] => {
                let found = state
                    .steps
                    .iter()
                    .find(|s| s.step_id == *step)
                    .ok_or_else(|| {
                        ToolError::new(
                            codes::R0121,
                            format!("workflow `{id}` has no step `{step}`"),
                        )
                    })?;
                if *part == "output" {
                    found.output.clone()
                } else {
                    found.error.clone()
                }
            }
            ["events", seq] => {
                let seq: u64 = seq.parse().map_err(|_| unknown(uri))?;
                let entries = self
                    .store()
                    .entries(id, seq.saturating_sub(1), false)
                    .await?;
                entries
                    .into_iter()
                    .find(|e| e.seq == seq)
                    .map(|e| e.payload)
            }
            ["decisions", decision, "data"] => {
                let all = self.store().decisions(Some(id), None).await?;
                all.into_iter()
                    .find(|d| d.id == *decision)
                    .map(|d| d.context)
            }
            _ => return Err(unknown(uri)),
        };
        stored.ok_or_else(|| ToolError::new(codes::R0121, format!("`{uri}` has no value (yet)")))
    }
}

fn unknown(uri: &str) -> ToolError {
    ToolError::new(
        codes::R0122,
        format!("there is no resource `{uri}`: see resources/list and resources/templates/list"),
    )
}

/// The slice of `text` that `query` (`offset=N&length=M`) names, cut to
/// whole characters.
fn ranged(text: String, mime_type: &'static str, query: &str) -> Result<Contents, ToolError> {
    let total_bytes = text.len();
    let mut offset = 0usize;
    let mut length = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let number: usize = value.parse().map_err(|_| {
            ToolError::new(
                codes::R0122,
                format!("`{key}` must be a number of bytes, got `{value}`"),
            )
        })?;
        match key {
            "offset" => offset = number,
            "length" => length = Some(number),
            other => {
                return Err(ToolError::new(
                    codes::R0122,
                    format!("`{other}` is not a range parameter: use offset and length"),
                ));
            }
        }
    }
    let floor = |mut i: usize| {
        i = i.min(total_bytes);
        while !text.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let start = floor(offset);
    let end = length.map_or(total_bytes, |l| floor(start.saturating_add(l)));
    let text = if start == 0 && end == total_bytes {
        text
    } else {
        text[start..end].to_owned()
    };
    Ok(Contents {
        text,
        mime_type,
        total_bytes,
        offset: start,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_cut_to_whole_characters() {
        let got = ranged("aé€b".into(), "text/plain", "offset=2&length=3").unwrap();
        // `é` is bytes 1..3: the slice starts at its first byte; `€` (3..6) is not whole.
        assert_eq!(
            (got.text.as_str(), got.offset, got.total_bytes),
            ("é", 1, 7)
        );
        assert!(ranged("x".into(), "text/plain", "from=1").is_err());
        assert_eq!(
            ranged("abc".into(), "text/plain", "offset=9").unwrap().text,
            ""
        );
    }
}
