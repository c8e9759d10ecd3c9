//! The agent registry (spec/registry.md, "Store"): published agent
//! releases, immutable, and their skills' text kept once by hash, so every
//! daemon sharing the store sees the same agents. The SQL is written once
//! for both SQL backends (`?N`; PostgreSQL's `$N` by
//! [`super::slots::numbered`]).

use super::{BoxFuture, StoreResult};

/// A published release of an agent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AgentRelease {
    /// The agent's name.
    pub name: String,
    /// Its semantic version, as written.
    pub version: String,
    /// The canonical definition (JSON text, skills by hash).
    pub definition: String,
    /// `sha256:…` of `definition`.
    pub digest: String,
    /// When it was published (RFC 3339).
    pub published_at: String,
    /// Who published it, when known.
    pub published_by: Option<String>,
}

/// A skill's text, by the hash the canonical definition names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillText {
    /// `sha256:…` of `content`.
    pub hash: String,
    /// The `SKILL.md` text.
    pub content: String,
}

/// The last result of a release's eval suite (spec/agent-evals.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentEval {
    /// The agent's name.
    pub name: String,
    /// The release's version.
    pub version: String,
    /// When the suite ran (RFC 3339).
    pub at: String,
    /// Cases that passed.
    pub passed: u32,
    /// Cases that failed.
    pub failed: u32,
    /// The report: `{suite, cases: [{name, passed, failures, …}]}` as JSON text.
    pub report: String,
}

/// What a publish did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    /// The release is new.
    Added,
    /// The same release (same digest) was there already; nothing changed.
    Unchanged,
}

/// Published agent releases.
pub trait Registry: Send + Sync {
    /// Publishes `release` with its skills' text, all or nothing. A
    /// version published with another digest is refused
    /// ([`super::StoreError::Exists`], naming `name@version`).
    fn publish_agent(
        &self,
        release: AgentRelease,
        skills: Vec<SkillText>,
    ) -> BoxFuture<'_, StoreResult<Published>>;

    /// The releases of agent `name` (every agent's without one), by name
    /// then by when they were published.
    fn agent_releases<'a>(
        &'a self,
        name: Option<&'a str>,
    ) -> BoxFuture<'a, StoreResult<Vec<AgentRelease>>>;

    /// A skill's text, by hash.
    fn agent_skill<'a>(&'a self, hash: &'a str) -> BoxFuture<'a, StoreResult<Option<String>>>;

    /// Keeps `eval` as its release's last result, replacing the one before.
    fn record_agent_eval(&self, eval: AgentEval) -> BoxFuture<'_, StoreResult<()>>;

    /// The last eval result of each release of agent `name` (every
    /// agent's without one), by name then version.
    fn agent_evals<'a>(
        &'a self,
        name: Option<&'a str>,
    ) -> BoxFuture<'a, StoreResult<Vec<AgentEval>>>;
}

/// The table of releases' last eval results, the same in both SQL
/// dialects (libSQL's migration 16, PostgreSQL's 12).
#[cfg(any(feature = "libsql", feature = "postgres"))]
pub const EVAL_TABLE: &str = "
CREATE TABLE agent_evals (
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    at TEXT NOT NULL,
    passed BIGINT NOT NULL,
    failed BIGINT NOT NULL,
    report TEXT NOT NULL,
    PRIMARY KEY (name, version)
);
";

/// Keeps release `?1`@`?2`'s last eval result.
#[cfg(any(feature = "libsql", feature = "postgres"))]
pub const RECORD_EVAL: &str = "INSERT INTO agent_evals (name, version, at, passed, failed, report) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (name, version) DO UPDATE SET \
     at = excluded.at, passed = excluded.passed, failed = excluded.failed, report = excluded.report";

/// The last eval results of agent `?1` (all when `NULL`).
#[cfg(any(feature = "libsql", feature = "postgres"))]
pub const EVALS: &str = "SELECT name, version, at, passed, failed, report FROM agent_evals \
     WHERE CAST(?1 AS TEXT) IS NULL OR name = ?1 ORDER BY name, version";

/// The registry's tables, the same in both SQL dialects (libSQL's
/// migration 15, PostgreSQL's 11).
#[cfg(any(feature = "libsql", feature = "postgres"))]
pub const TABLES: &str = "
CREATE TABLE agent_versions (
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    definition TEXT NOT NULL,
    digest TEXT NOT NULL,
    published_at TEXT NOT NULL,
    published_by TEXT,
    PRIMARY KEY (name, version)
);
CREATE TABLE agent_skills (
    hash TEXT PRIMARY KEY,
    content TEXT NOT NULL
);
";

/// Keeps skill text `?2` under hash `?1` (once).
#[cfg(any(feature = "libsql", feature = "postgres"))]
pub const PUT_SKILL: &str =
    "INSERT INTO agent_skills (hash, content) VALUES (?1, ?2) ON CONFLICT (hash) DO NOTHING";

/// Adds a release unless its version is taken.
#[cfg(any(feature = "libsql", feature = "postgres"))]
pub const PUBLISH: &str = "INSERT INTO agent_versions (name, version, definition, digest, \
     published_at, published_by) VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
     ON CONFLICT (name, version) DO NOTHING";

/// The digest of release `?1`@`?2`.
#[cfg(any(feature = "libsql", feature = "postgres"))]
pub const DIGEST: &str = "SELECT digest FROM agent_versions WHERE name = ?1 AND version = ?2";

/// The releases of agent `?1` (all when `NULL`), by name then time.
#[cfg(any(feature = "libsql", feature = "postgres"))]
pub const RELEASES: &str = "SELECT name, version, definition, digest, published_at, \
     published_by FROM agent_versions WHERE CAST(?1 AS TEXT) IS NULL OR name = ?1 \
     ORDER BY name, published_at, version";

/// The text of skill `?1`.
#[cfg(any(feature = "libsql", feature = "postgres"))]
pub const SKILL: &str = "SELECT content FROM agent_skills WHERE hash = ?1";

/// What a publish that found `existing` (the digest of the version, as
/// stored after the insert) answers for `release`.
pub fn outcome(
    release: &AgentRelease,
    added: bool,
    existing: Option<&str>,
) -> StoreResult<Published> {
    match (added, existing) {
        (true, _) => Ok(Published::Added),
        (false, Some(digest)) if digest == release.digest => Ok(Published::Unchanged),
        _ => Err(super::StoreError::Exists(format!(
            "{}@{}",
            release.name, release.version
        ))),
    }
}
