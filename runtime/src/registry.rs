//! The agent registry's rules (spec/registry.md): a checked definition and
//! its skills' text made into a release (canonical form, digest), published
//! once, and found again by `name` or `name@version`.

pub mod lookup;

use std::fmt::Write as _;

use opcode_compiler::agent::AgentDefinition;
use opcode_compiler::diagnostics::codes::{E0067, E0068, E0069};
use opcode_compiler::diagnostics::did_you_mean;
use opcode_stdlib::agents::allowlist;
use opcode_vm::Code;
use serde_json::{Map, Value, json};

use crate::store::blobs::sha256_of as hash_of;
use crate::store::{AgentEval, AgentRelease, Published, Registry, SkillText, StoreError};

/// A registry request refused, with its code and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryError {
    /// The stable code (spec/errors).
    pub code: Code,
    /// What went wrong.
    pub message: String,
    /// The likely fix, in words.
    pub help: Option<String>,
}

impl std::fmt::Display for RegistryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "error[{}]: {}", self.code.id, self.message)?;
        if let Some(help) = &self.help {
            write!(f, "\n  help: {help}")?;
        }
        Ok(())
    }
}

/// Why a registry call failed: refused, or the store failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Refused, with a code.
    Refused(RegistryError),
    /// The store failed.
    Store(StoreError),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Refused(e) => e.fmt(f),
            Failure::Store(e) => write!(f, "error: the store: {e}"),
        }
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Failure {
        Failure::Store(e)
    }
}

/// The release of `definition`, whose skills' text is `texts` (in the
/// order of its skills), published at `at` by `by`, and the skills' text
/// by hash.
pub fn release_of(
    definition: &AgentDefinition,
    texts: &[String],
    at: String,
    by: Option<String>,
) -> (AgentRelease, Vec<SkillText>) {
    let skills: Vec<SkillText> = texts
        .iter()
        .map(|text| SkillText {
            hash: hash_of(text),
            content: text.clone(),
        })
        .collect();
    let mut canonical = Map::new();
    canonical.insert("name".into(), json!(definition.name));
    canonical.insert("version".into(), json!(definition.version.to_string()));
    let optional = [
        ("description", &definition.description),
        ("role", &Some(definition.role.clone())),
        ("runs_on", &definition.runs_on),
        ("model", &definition.model),
        ("variant", &definition.variant),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            canonical.insert(key.into(), json!(value));
        }
    }
    let by_hash: Vec<Value> = definition
        .skills
        .iter()
        .zip(&skills)
        .map(|(skill, text)| json!({"name": skill.name, "sha256": text.hash}))
        .collect();
    canonical.insert("skills".into(), Value::Array(by_hash));
    canonical.insert("mcp".into(), sorted(&Value::Object(definition.mcp.clone())));
    let mut budgets = Map::new();
    if let Some(steps) = definition.max_steps {
        budgets.insert("max_steps".into(), json!(steps));
    }
    if let Some(timeout) = &definition.timeout {
        budgets.insert("timeout".into(), json!(timeout));
    }
    canonical.insert("budgets".into(), Value::Object(budgets));
    if let Some(permissions) = &definition.permissions {
        canonical.insert("permissions".into(), json!(permissions));
    }
    let text = Value::Object(canonical).to_string();
    let release = AgentRelease {
        name: definition.name.clone(),
        version: definition.version.to_string(),
        digest: hash_of(&text),
        definition: text,
        published_at: at,
        published_by: by,
    };
    (release, skills)
}

/// The MCP servers of `definition` that `allowed` (the settings'
/// `agent_mcp`: programs, and URL prefixes) does not allow, each refused
/// with E0069; none when there is no list.
pub fn refused_servers(
    definition: &AgentDefinition,
    allowed: Option<&[String]>,
) -> Vec<RegistryError> {
    let Some(allowed) = allowed else {
        return Vec::new();
    };
    definition
        .mcp
        .iter()
        .filter(|(_, server)| !allowlist::allows(allowed, server))
        .map(|(name, server)| RegistryError {
            code: E0069,
            message: format!(
                "MCP server `{name}` ({}) is not one the settings allow (/mcp/{name})",
                allowlist::what(server)
            ),
            help: Some(format!(
                "the operator's `agent_mcp` allows: {}; ask for it to be added, or drop the server",
                if allowed.is_empty() {
                    "none".to_owned()
                } else {
                    allowed.join(", ")
                }
            )),
        })
        .collect()
}

/// Publishes `release`; a taken version with other content is refused
/// with E0067, naming the next free patch version.
pub async fn publish(
    store: &dyn Registry,
    release: AgentRelease,
    skills: Vec<SkillText>,
) -> Result<Published, Failure> {
    let (name, version) = (release.name.clone(), release.version.clone());
    match store.publish_agent(release, skills).await {
        Err(StoreError::Exists(_)) => {
            let taken = store.agent_releases(Some(&name)).await?;
            let next = next_free_patch(&version, &taken);
            Err(Failure::Refused(RegistryError {
                code: E0067,
                message: format!("{name}@{version} is published already, with other content"),
                help: Some(format!(
                    "a release never changes: publish the change as {name}@{next} (or another new version)"
                )),
            }))
        }
        other => Ok(other?),
    }
}

/// The release `spec` names among `releases` (one agent's or all):
/// `name@version`, or `name` for its newest.
pub fn find<'r>(
    releases: &'r [AgentRelease],
    spec: &str,
) -> Result<&'r AgentRelease, RegistryError> {
    locate(releases, spec).map_err(|missing| {
        let help = match &missing.closest {
            Some(close) => format!("did you mean `{close}`?"),
            None if missing.known.is_empty() => {
                "no agent is published yet: `opcode agent publish FILE`".into()
            }
            None => format!("{}: {}", missing.known_as, missing.known.join(", ")),
        };
        unknown(missing.message, help)
    })
}

/// What a reference the registry does not hold misses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// Why, in one sentence.
    pub message: String,
    /// The closest reference the registry holds (`name` or
    /// `name@version`), when one is close.
    pub closest: Option<String>,
    /// What it holds instead: names, or the agent's versions.
    pub known: Vec<String>,
    /// What `known` lists, in words: `published` or `published versions`.
    pub known_as: &'static str,
}

/// [`find`], saying what is missing as data.
pub fn locate<'r>(releases: &'r [AgentRelease], spec: &str) -> Result<&'r AgentRelease, Missing> {
    let (name, version) = match spec.split_once('@') {
        Some((name, version)) => (name, Some(version)),
        None => (spec, None),
    };
    let of_name: Vec<&AgentRelease> = releases.iter().filter(|r| r.name == name).collect();
    if of_name.is_empty() {
        let mut names: Vec<&str> = releases.iter().map(|r| r.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        return Err(Missing {
            message: format!("no agent `{name}` is published"),
            closest: did_you_mean(name, &names).map(str::to_owned),
            known: names.into_iter().map(str::to_owned).collect(),
            known_as: "published",
        });
    }
    let Some(version) = version else {
        return Ok(newest(&of_name).unwrap_or(of_name[0]));
    };
    of_name
        .iter()
        .copied()
        .find(|r| r.version == version)
        .ok_or_else(|| {
            let versions: Vec<&str> = of_name.iter().map(|r| r.version.as_str()).collect();
            Missing {
                message: format!("agent `{name}` has no release {version}"),
                closest: did_you_mean(version, &versions).map(|v| format!("{name}@{v}")),
                known: versions.into_iter().map(str::to_owned).collect(),
                known_as: "published versions",
            }
        })
}

/// The newest of one agent's releases by semantic-version precedence,
/// leaving out pre-releases unless there is nothing else.
pub fn newest<'r>(releases: &[&'r AgentRelease]) -> Option<&'r AgentRelease> {
    let parsed = |r: &&'r AgentRelease| semver::Version::parse(&r.version).ok().map(|v| (v, *r));
    let all: Vec<(semver::Version, &AgentRelease)> = releases.iter().filter_map(parsed).collect();
    let best = |pre: bool| {
        all.iter()
            .filter(|(v, _)| pre || v.pre.is_empty())
            .max_by(|a, b| a.0.cmp(&b.0))
            .map(|(_, r)| *r)
    };
    best(false).or_else(|| best(true))
}

/// Release `spec` (`name` for its newest, or `name@version`) as `show`
/// and the `opcode://agents/…` resources give it: where it came from and
/// its definition with its skills' text.
pub async fn view(store: &dyn Registry, spec: &str) -> Result<Value, Failure> {
    let name = spec.split_once('@').map_or(spec, |(name, _)| name);
    let mut releases = store.agent_releases(Some(name)).await?;
    if releases.is_empty() {
        // Every name, for the closest one.
        releases = store.agent_releases(None).await?;
    }
    let release = find(&releases, spec).map_err(Failure::Refused)?;
    let definition = expanded(store, release).await?;
    let versions: Vec<&str> = releases
        .iter()
        .filter(|r| r.name == release.name)
        .map(|r| r.version.as_str())
        .collect();
    let evals = store.agent_evals(Some(&release.name)).await?;
    let last_eval = evals
        .iter()
        .find(|e| e.version == release.version)
        .map(|e| eval_view(e, true));
    Ok(json!({
        "name": release.name,
        "version": release.version,
        "digest": release.digest,
        "published_at": release.published_at,
        "published_by": release.published_by,
        "versions": versions,
        "last_eval": last_eval,
        "definition": definition,
    }))
}

/// Each agent's newest release: name, version, role, description, how
/// many releases it has, when and by whom the newest was published, its
/// digest.
pub async fn catalog(store: &dyn Registry) -> Result<Vec<Value>, StoreError> {
    let releases = store.agent_releases(None).await?;
    let evals = store.agent_evals(None).await?;
    let mut names: Vec<&str> = releases.iter().map(|r| r.name.as_str()).collect();
    names.dedup();
    let mut rows = Vec::new();
    for name in names {
        let of_name: Vec<&AgentRelease> = releases.iter().filter(|r| r.name == name).collect();
        let Some(newest) = newest(&of_name) else {
            continue;
        };
        let definition: Value = serde_json::from_str(&newest.definition).unwrap_or_default();
        rows.push(json!({
            "name": name,
            "newest": newest.version,
            "role": definition["role"],
            "description": definition["description"],
            "releases": of_name.len(),
            "published_at": newest.published_at,
            "published_by": newest.published_by,
            "digest": newest.digest,
            "last_eval": evals
                .iter()
                .find(|e| e.name == name && e.version == newest.version)
                .map(|e| eval_view(e, false)),
        }));
    }
    Ok(rows)
}

/// A release's last eval result as shown: when, how many cases passed and
/// failed, and with `cases`, each case's result.
pub fn eval_view(eval: &AgentEval, cases: bool) -> Value {
    let mut out = json!({"at": eval.at, "passed": eval.passed, "failed": eval.failed});
    if cases {
        let report: Value = serde_json::from_str(&eval.report).unwrap_or_default();
        out["suite"] = report["suite"].clone();
        out["cases"] = report["cases"].clone();
    }
    out
}

/// The release of the same agent just before `release` by semantic-version
/// precedence, if any.
pub fn before<'r>(
    releases: &'r [AgentRelease],
    release: &AgentRelease,
) -> Option<&'r AgentRelease> {
    let version = semver::Version::parse(&release.version).ok()?;
    releases
        .iter()
        .filter(|r| r.name == release.name)
        .filter_map(|r| semver::Version::parse(&r.version).ok().map(|v| (v, r)))
        .filter(|(v, _)| *v < version)
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, r)| r)
}

/// The release's definition with each skill's text in place of its hash
/// (`{"name", "content"}`), as `show` and `diff` print it.
pub async fn expanded(store: &dyn Registry, release: &AgentRelease) -> Result<Value, Failure> {
    let mut texts = Vec::new();
    for hash in skill_hashes(&release.definition) {
        if let Some(text) = store.agent_skill(&hash).await? {
            texts.push(SkillText {
                hash,
                content: text,
            });
        }
    }
    Ok(with_skills(release, &texts)?)
}

/// The release's definition with the text of each of its skills found in
/// `texts` (empty when missing).
pub fn with_skills(release: &AgentRelease, texts: &[SkillText]) -> Result<Value, StoreError> {
    let mut definition: Value = serde_json::from_str(&release.definition).map_err(|e| {
        StoreError::Backend(format!("release {}@{}: {e}", release.name, release.version))
    })?;
    if let Some(skills) = definition.get_mut("skills").and_then(Value::as_array_mut) {
        for skill in skills {
            let hash = skill["sha256"].as_str().unwrap_or_default();
            let content = texts
                .iter()
                .find(|t| t.hash == hash)
                .map(|t| t.content.as_str());
            *skill = json!({"name": skill["name"], "content": content.unwrap_or_default()});
        }
    }
    Ok(definition)
}

/// The hashes of the skills a canonical definition names.
fn skill_hashes(definition: &str) -> Vec<String> {
    let value: Value = serde_json::from_str(definition).unwrap_or_default();
    value["skills"]
        .as_array()
        .map(|skills| {
            skills
                .iter()
                .filter_map(|s| s["sha256"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A definition as lines to compare: its fields as JSON, then each skill's
/// text under a heading of its own.
pub fn document(definition: &Value) -> String {
    let mut fields = definition.clone();
    let mut texts: Vec<(String, String)> = Vec::new();
    for skill in fields["skills"].as_array_mut().into_iter().flatten() {
        let name = skill["name"].as_str().unwrap_or_default().to_owned();
        let content = skill.as_object_mut().and_then(|s| s.remove("content"));
        texts.push((
            name,
            content
                .and_then(|c| c.as_str().map(str::to_owned))
                .unwrap_or_default(),
        ));
    }
    let mut out = serde_json::to_string_pretty(&fields).unwrap_or_default();
    out.push('\n');
    for (name, content) in texts {
        let _ = write!(out, "\n## skill {name}\n{content}");
        if !content.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

fn unknown(message: String, help: String) -> RegistryError {
    RegistryError {
        code: E0068,
        message,
        help: Some(help),
    }
}

/// The first patch version after `version` (pre-release dropped) that no
/// release in `taken` has.
fn next_free_patch(version: &str, taken: &[AgentRelease]) -> String {
    let Ok(mut next) = semver::Version::parse(version) else {
        return version.to_owned();
    };
    next.pre = semver::Prerelease::EMPTY;
    next.build = semver::BuildMetadata::EMPTY;
    loop {
        next.patch += 1;
        let text = next.to_string();
        if !taken.iter().any(|r| r.version == text) {
            return text;
        }
    }
}

/// `value` with every object's keys in order, so the same definition
/// always has the same text.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests;
