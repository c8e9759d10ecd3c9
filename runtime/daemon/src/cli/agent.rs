//! `opcode agent init|check|test|publish|list|show|diff`: agent
//! definitions, tested against their eval suites and published as
//! immutable releases in the database (spec/registry.md,
//! spec/agent-evals.md).

mod eval;
mod file;
mod testing;

use std::path::{Path, PathBuf};

use opcode_runtime::registry::{self, Failure};
use opcode_runtime::store::Published;
use opcode_runtime::time::{now_ms, rfc3339};
use serde_json::{Value, json};

use opcode_daemon::settings::Settings;

use super::common::{DbArgs, Exit, fail, home};

/// Arguments of `agent`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    db: DbArgs,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Write NAME.agent.json and skills/NAME/SKILL.md to start from.
    Init {
        /// The agent's name (lower-case letters, digits, `-`).
        name: String,
        /// The sandbox it gets.
        #[arg(long, default_value = "scout", value_parser = ["scout", "worker", "runner"])]
        role: String,
        /// Where to write them.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
    /// Check a definition and its skills; exit 2 on errors.
    Check {
        /// The definition file.
        file: PathBuf,
    },
    /// Run a definition's eval suite; exit 1 when a case fails.
    Test {
        /// The definition file.
        file: PathBuf,
        #[command(flatten)]
        suite: testing::SuiteArgs,
    },
    /// Check a definition, run its eval suite if it has one, then publish
    /// it as a release.
    Publish {
        /// The definition file.
        file: PathBuf,
        /// Who publishes it (default: $USER).
        #[arg(long)]
        by: Option<String>,
        /// Publish even when a case of the suite fails.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        suite: testing::SuiteArgs,
    },
    /// Each agent's newest release.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// A release, its skills' text included, as JSON.
    Show {
        /// NAME (its newest release) or NAME@VERSION.
        agent: String,
    },
    /// What changed between two releases or files; exit 1 when they differ.
    Diff {
        /// NAME, NAME@VERSION or a definition file.
        from: String,
        /// NAME, NAME@VERSION or a definition file.
        to: String,
    },
}

/// Runs `agent`.
pub async fn agent(args: Args) -> Exit {
    match args.command {
        Command::Init { name, role, dir } => init(&name, &role, &dir),
        Command::Check { file } => match checked(&file) {
            Ok(read) => {
                let warnings = match read.warnings {
                    0 => String::new(),
                    n => format!(", {n} warning(s)"),
                };
                println!(
                    "{}: {}@{} is ready to publish{warnings}",
                    file.display(),
                    read.definition.name,
                    read.definition.version
                );
                Exit::Ok
            }
            Err(exit) => exit,
        },
        Command::Test { file, suite } => test(&args.db, &file, &suite).await,
        Command::Publish {
            file,
            by,
            force,
            suite,
        } => publish(&args.db, &file, by, force, &suite).await,
        Command::List { json } => list(&args.db, json).await,
        Command::Show { agent } => {
            let store = match args.db.open().await {
                Ok(store) => store,
                Err(exit) => return exit,
            };
            match registry::view(store.as_ref(), &agent).await {
                Ok(value) => {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&value).unwrap_or_default()
                    );
                    Exit::Ok
                }
                Err(e) => refused(&e),
            }
        }
        Command::Diff { from, to } => diff(&args.db, &from, &to).await,
    }
}

/// Runs the suite of the definition at `file`; keeps the result with the
/// release of the same content, when it is published.
async fn test(db: &DbArgs, file: &Path, args: &testing::SuiteArgs) -> Exit {
    let read = match checked(file) {
        Ok(read) => read,
        Err(exit) => return exit,
    };
    let name = read.definition.name.clone();
    let Some(path) = testing::suite_path(file, args, &name) else {
        return fail(format!(
            "{name} has no eval suite: write {name}.eval.json beside {}, or give --suite",
            file.display()
        ));
    };
    let (release, skills) =
        registry::release_of(&read.definition, &read.texts, String::new(), None);
    let definition = match registry::with_skills(&release, &skills) {
        Ok(definition) => definition,
        Err(e) => return fail(e),
    };
    let ran = match testing::run(&path, &name, &definition, args).await {
        Ok(ran) => ran,
        Err(exit) => return exit,
    };
    let store = match db.open().await {
        Ok(store) => store,
        Err(exit) => return exit,
    };
    let published = match store.agent_releases(Some(&name)).await {
        Ok(releases) => releases
            .into_iter()
            .find(|r| r.version == release.version && r.digest == release.digest),
        Err(e) => return fail(e),
    };
    if let Some(published) = published
        && let Err(exit) = testing::record(store.as_ref(), &published, &ran).await
    {
        return exit;
    }
    if ran.failed() == 0 {
        Exit::Ok
    } else {
        Exit::Failed
    }
}

/// Checks the definition at `file`, runs its suite if it has one (a
/// failing case refuses the publish unless `force`), then publishes it
/// and keeps the suite's result with the release.
async fn publish(
    db: &DbArgs,
    file: &Path,
    by: Option<String>,
    force: bool,
    args: &testing::SuiteArgs,
) -> Exit {
    let read = match checked(file) {
        Ok(read) => read,
        Err(exit) => return exit,
    };
    let store = match db.open().await {
        Ok(store) => store,
        Err(exit) => return exit,
    };
    let by = by
        .or_else(|| std::env::var("USER").ok())
        .filter(|b| !b.is_empty());
    let (release, skills) =
        registry::release_of(&read.definition, &read.texts, rfc3339(now_ms()), by);
    let (name, version, digest) = (
        release.name.clone(),
        release.version.clone(),
        release.digest.clone(),
    );
    let mut ran = None;
    if let Some(path) = testing::suite_path(file, args, &name) {
        let definition = match registry::with_skills(&release, &skills) {
            Ok(definition) => definition,
            Err(e) => return fail(e),
        };
        let tested = match testing::run(&path, &name, &definition, args).await {
            Ok(tested) => tested,
            Err(exit) => return exit,
        };
        if tested.failed() > 0 && !force {
            eprintln!(
                "error: {name}@{version} is not published: {} of {} cases of {} failed (--force publishes it anyway)",
                tested.failed(),
                tested.outcomes.len(),
                path.display()
            );
            return Exit::Failed;
        }
        ran = Some(tested);
    }
    let kept = release.clone();
    match registry::publish(store.as_ref(), release, skills).await {
        Ok(Published::Added) => println!("published {name}@{version} ({digest})"),
        Ok(Published::Unchanged) => {
            println!("{name}@{version} is published already, the same ({digest})");
        }
        Err(e) => return refused(&e),
    }
    if let Some(ran) = &ran
        && let Err(exit) = testing::record(store.as_ref(), &kept, ran).await
    {
        return exit;
    }
    Exit::Ok
}

/// The definition at `file` and its skills, read and checked, its MCP
/// servers ones the settings (`agent_mcp`) allow; prints each problem.
fn checked(file: &Path) -> Result<file::Read, Exit> {
    let read = file::read(file)?;
    let settings = Settings::load(&Settings::file_in(&home())).map_err(fail)?;
    let refused = registry::refused_servers(&read.definition, settings.agent_mcp.as_deref());
    for refusal in &refused {
        eprintln!("{refusal}");
    }
    if refused.is_empty() {
        Ok(read)
    } else {
        Err(Exit::Usage)
    }
}

/// Prints a refusal or a store failure.
fn refused(e: &Failure) -> Exit {
    eprintln!("{e}");
    Exit::Usage
}

async fn list(db: &DbArgs, as_json: bool) -> Exit {
    let store = match db.open().await {
        Ok(store) => store,
        Err(exit) => return exit,
    };
    let rows = match registry::catalog(store.as_ref()).await {
        Ok(rows) => rows,
        Err(e) => return fail(e),
    };
    if as_json {
        println!("{}", Value::Array(rows));
        return Exit::Ok;
    }
    if rows.is_empty() {
        println!("no agent is published");
        return Exit::Ok;
    }
    println!(
        "{:<24} {:<14} {:>8}  {:<24}  DIGEST",
        "NAME", "NEWEST", "RELEASES", "PUBLISHED"
    );
    for row in rows {
        let digest = row["digest"].as_str().unwrap_or_default();
        println!(
            "{:<24} {:<14} {:>8}  {:<24}  {}",
            row["name"].as_str().unwrap_or_default(),
            row["newest"].as_str().unwrap_or_default(),
            row["releases"].as_u64().unwrap_or_default(),
            row["published_at"].as_str().unwrap_or_default(),
            digest.get(..19).unwrap_or(digest),
        );
    }
    Exit::Ok
}

async fn diff(db: &DbArgs, from: &str, to: &str) -> Exit {
    let mut store = None;
    let mut sides = Vec::new();
    for side in [from, to] {
        let text = if Path::new(side).is_file() {
            let Ok(read) = file::read(Path::new(side)) else {
                return Exit::Usage;
            };
            let (release, skills) =
                registry::release_of(&read.definition, &read.texts, String::new(), None);
            registry::with_skills(&release, &skills).map_err(Failure::Store)
        } else {
            if store.is_none() {
                match db.open().await {
                    Ok(opened) => store = Some(opened),
                    Err(exit) => return exit,
                }
            }
            let Some(store) = &store else {
                return Exit::Usage;
            };
            registry::view(store.as_ref(), side)
                .await
                .map(|mut shown| shown["definition"].take())
        };
        match text {
            Ok(definition) => sides.push(registry::document(&definition)),
            Err(e) => return refused(&e),
        }
    }
    if sides[0] == sides[1] {
        println!("{from} and {to} are the same");
        return Exit::Ok;
    }
    let diff = similar::TextDiff::from_lines(&sides[0], &sides[1]);
    print!("{}", diff.unified_diff().context_radius(3).header(from, to));
    Exit::Failed
}

/// Writes the files a new agent starts from, never over one.
fn init(name: &str, role: &str, dir: &Path) -> Exit {
    if !opcode_compiler::agent::is_agent_name(name) {
        eprintln!(
            "error[E0064]: `{name}` cannot name an agent\n  help: a name is lower-case letters, digits and `-`, starting with a letter, at most 64"
        );
        return Exit::Usage;
    }
    let definition = dir.join(format!("{name}.agent.json"));
    let skill = dir.join("skills").join(name).join("SKILL.md");
    for path in [&definition, &skill] {
        if path.exists() {
            return fail(format!(
                "{} exists: init never writes over a file",
                path.display()
            ));
        }
    }
    let body = json!({
        "name": name,
        "version": "0.1.0",
        "description": format!("What {name} is for."),
        "role": role,
        "skills": [{"name": name, "path": format!("skills/{name}/SKILL.md")}],
        "budgets": {"max_steps": 16, "timeout": "5m"},
        "permissions": "ask",
    });
    let skill_text = format!(
        "---\nname: {name}\ndescription: What {name} knows how to do.\n---\n\n# {name}\n\n1. Say what to look at first.\n2. Say what a good answer holds.\n"
    );
    let written = std::fs::create_dir_all(skill.parent().unwrap_or(dir))
        .and_then(|()| {
            std::fs::write(
                &definition,
                format!(
                    "{}\n",
                    serde_json::to_string_pretty(&body).unwrap_or_default()
                ),
            )
        })
        .and_then(|()| std::fs::write(&skill, skill_text));
    match written {
        Ok(()) => {
            println!("wrote {} and {}", definition.display(), skill.display());
            println!(
                "next: edit them, `opcode agent check {}`, then `opcode agent publish {}`",
                definition.display(),
                definition.display()
            );
            Exit::Ok
        }
        Err(e) => fail(format!("cannot write the agent's files: {e}")),
    }
}
