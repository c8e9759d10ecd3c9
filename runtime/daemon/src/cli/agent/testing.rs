//! `opcode agent test`, and the suite `publish` runs first: find and read
//! an agent's eval suite, run it, say what it came to (text, JSON, JUnit),
//! and keep the result with the release it tested (spec/agent-evals.md).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use opcode_compiler::agent::suite::{self, Suite};
use opcode_compiler::diagnostics::render::human;
use opcode_runtime::junit;
use opcode_runtime::store::{AgentEval, AgentRelease, Registry};
use opcode_runtime::time::{now_ms, rfc3339};
use serde_json::{Value, json};

use super::eval::{self, Outcome};
use crate::cli::common::{Exit, fail};

/// How to run a suite and report it.
#[derive(Debug, Clone, clap::Args)]
pub struct SuiteArgs {
    /// The eval suite (default: NAME.eval.json beside the definition).
    #[arg(long)]
    suite: Option<PathBuf>,
    /// Cases run at once.
    #[arg(long, default_value_t = 4)]
    jobs: usize,
    /// Also write the result as JUnit XML to this file.
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// A suite that ran.
pub struct Ran {
    /// Where it was read from.
    pub path: PathBuf,
    /// What each case came to, in the suite's order.
    pub outcomes: Vec<Outcome>,
}

impl Ran {
    /// Cases that failed.
    pub fn failed(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|o| !o.failures.is_empty())
            .count()
    }

    /// The result as kept with the release.
    pub fn eval_of(&self, release: &AgentRelease) -> AgentEval {
        let failed = self.failed();
        AgentEval {
            name: release.name.clone(),
            version: release.version.clone(),
            at: rfc3339(now_ms()),
            passed: count(self.outcomes.len() - failed),
            failed: count(failed),
            report: self.report().to_string(),
        }
    }

    fn report(&self) -> Value {
        let cases: Vec<Value> = self
            .outcomes
            .iter()
            .map(|o| {
                json!({
                    "name": o.name,
                    "passed": o.failures.is_empty(),
                    "status": o.status,
                    "summary": o.summary,
                    "failures": o.failures,
                    "seconds": (o.seconds * 1000.0).round() / 1000.0,
                })
            })
            .collect();
        json!({"suite": self.path.display().to_string(), "cases": cases})
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The suite of the definition at `file` of agent `name`: `--suite`,
/// else NAME.eval.json beside it when there is one.
pub fn suite_path(file: &Path, args: &SuiteArgs, name: &str) -> Option<PathBuf> {
    if let Some(given) = &args.suite {
        return Some(given.clone());
    }
    let beside = file
        .parent()
        .unwrap_or(Path::new("."))
        .join(format!("{name}.eval.json"));
    beside.is_file().then_some(beside)
}

/// Reads, runs and reports the suite at `path` of agent `name`, whose
/// definition (with its skills' text) is `definition`.
pub async fn run(
    path: &Path,
    name: &str,
    definition: &Value,
    args: &SuiteArgs,
) -> Result<Ran, Exit> {
    let suite = read(path, name)?;
    let outcomes = eval::run(definition, &suite, args.jobs)
        .await
        .map_err(fail)?;
    let ran = Ran {
        path: path.to_path_buf(),
        outcomes,
    };
    let label = format!(
        "{name}@{}",
        definition["version"].as_str().unwrap_or_default()
    );
    if args.json {
        println!("{}", ran.report());
    } else {
        print!("{}", said(&ran, &label));
    }
    if let Some(out) = &args.junit {
        let cases = ran
            .outcomes
            .iter()
            .map(|o| junit::Case {
                name: o.name.clone(),
                failures: o.failures.clone(),
                seconds: o.seconds,
            })
            .collect();
        let xml = junit::render(&[junit::Suite {
            name: label,
            error: None,
            cases,
        }]);
        std::fs::write(out, xml)
            .map_err(|e| fail(format!("cannot write {}: {e}", out.display())))?;
    }
    Ok(ran)
}

/// Keeps `ran` as the last result of `release`.
pub async fn record(store: &dyn Registry, release: &AgentRelease, ran: &Ran) -> Result<(), Exit> {
    store
        .record_agent_eval(ran.eval_of(release))
        .await
        .map_err(|e| fail(format!("the result was not kept: {e}")))
}

/// Reads the suite at `path`, which must test agent `name`; prints every
/// diagnostic.
fn read(path: &Path, name: &str) -> Result<Suite, Exit> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| fail(format!("cannot read {file}: {e}")))?;
    let source =
        opcode_compiler::decode_utf8(&bytes).map_err(|d| fail(format!("{file}: {}", d.message)))?;
    let (read, diagnostics) = suite::read(source);
    let sorted = diagnostics.into_sorted();
    if !sorted.is_empty() {
        eprintln!(
            "{}",
            human::render(&sorted, &file, source, false).trim_end()
        );
    }
    let suite = read.ok_or(Exit::Usage)?;
    if suite.agent != name {
        return Err(fail(format!(
            "{file} tests agent `{}`, not `{name}`",
            suite.agent
        )));
    }
    Ok(suite)
}

/// One line a case, then the count.
fn said(ran: &Ran, label: &str) -> String {
    let mut out = String::new();
    for o in &ran.outcomes {
        let verdict = if o.failures.is_empty() {
            "ok"
        } else {
            "FAILED"
        };
        let _ = writeln!(out, "{verdict} - {} ({:.1}s)", o.name, o.seconds);
        for failure in &o.failures {
            let _ = writeln!(out, "    {failure}");
        }
    }
    let failed = ran.failed();
    let _ = writeln!(
        out,
        "{label}: {} passed, {failed} failed",
        ran.outcomes.len() - failed
    );
    out
}
