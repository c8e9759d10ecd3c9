//! `opcodec test [PATHS…]`: finds test files (`*.test.json`, spec/testing.md)
//! under the paths given (default: the current folder), runs every case
//! through the engine's executor on a virtual clock, in parallel across
//! cases, and reports each failure with the places where the run differs.
//! Exit 0 when every case passes, 1 when one fails, 2 when nothing could
//! be tested.

mod case;
mod expect;
mod file;
pub mod lint;
mod mocks;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use self::case::{Outcome, run_case};
use self::file::TestFile;
use crate::output::{Format, eprint_line, print};

/// Arguments of `test`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Test files, or folders searched for `*.test.json` (default: `.`).
    paths: Vec<PathBuf>,
    /// Output format; `json` is `{files: [{path, cases: [{name, passed, failures, virtual_ms, crash_points, crashes_in_recovery}]}], passed, failed}`.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Also write a JUnit XML report to FILE (for CI).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Run each passing case again from every commit of its run, as after a
    /// kill -9 there, and check it ends the same and no completed step runs twice.
    #[arg(long)]
    crash_points: bool,
}

/// The cases of one file, and how they went.
struct FileReport {
    path: PathBuf,
    /// Why the file could not be read; its cases then did not run.
    error: Option<String>,
    outcomes: Vec<Outcome>,
}

/// Runs `test`.
pub fn run(args: &Args) -> u8 {
    opcode_runtime::time::use_virtual_clock();
    let started = Instant::now();
    let roots = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    let mut paths = Vec::new();
    for root in &roots {
        if let Err(message) = find(root, &mut paths) {
            eprint_line(&format!("error: {message}"));
            return 2;
        }
    }
    paths.sort();
    paths.dedup();
    if paths.is_empty() {
        eprint_line("error: no test files (`*.test.json`) found");
        return 2;
    }
    let reports = run_all(&paths, args.crash_points);
    let (passed, failed) = counts(&reports);
    match args.format {
        Format::Human => print(&human(&reports, started.elapsed())),
        Format::Json => print(&format!(
            "{}\n",
            serde_json::to_string_pretty(&as_json(&reports)).unwrap_or_default()
        )),
    }
    if let Some(out) = &args.junit
        && let Err(e) = std::fs::write(out, junit(&reports))
    {
        eprint_line(&format!("error: cannot write {}: {e}", out.display()));
        return 2;
    }
    u8::from(failed > 0 || passed == 0)
}

/// Adds the test files at or under `path` to `out`.
fn find(path: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    if path.is_file() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    let entries =
        std::fs::read_dir(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    for entry in entries.flatten() {
        let p = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if !matches!(name.as_str(), "target" | "node_modules") && !name.starts_with('.') {
                find(&p, out)?;
            }
        } else if name.ends_with(".test.json") {
            out.push(p);
        }
    }
    Ok(())
}

/// `file`, read from `path`, unless the editor's checks find errors in it
/// (`lint`): a mock of an output its action never gives proves nothing.
fn linted(path: &Path, file: TestFile) -> Result<TestFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let lines = opcode_compiler::source::LineIndex::new(&text);
    let errors: Vec<String> = lint::lint(path, &text, &crate::check::compiler())
        .into_iter()
        .filter(opcode_compiler::diagnostics::Diagnostic::is_error)
        .map(|d| {
            let at = lines.line_col(&text, d.span().start as usize);
            format!("line {}: {}: {}", at.line, d.code.id, d.message)
        })
        .collect();
    if errors.is_empty() {
        Ok(file)
    } else {
        Err(errors.join("; "))
    }
}

/// Every case of every file, on as many threads as there are cores.
fn run_all(paths: &[PathBuf], crash_points: bool) -> Vec<FileReport> {
    let files: Vec<(PathBuf, Result<TestFile, String>)> = paths
        .iter()
        .map(|p| (p.clone(), TestFile::read(p).and_then(|f| linted(p, f))))
        .collect();
    let jobs: Vec<(usize, usize)> = files
        .iter()
        .enumerate()
        .flat_map(|(f, (_, file))| {
            let n = file.as_ref().map_or(0, |t| t.cases.len());
            (0..n).map(move |c| (f, c))
        })
        .collect();
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(2, usize::from);
    let mut done: Vec<(usize, usize, Outcome)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.min(jobs.len()).max(1))
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    while let Some(&(f, c)) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let (path, file) = &files[f];
                        if let Ok(file) = file {
                            mine.push((f, c, run_case(path, file, &file.cases[c], crash_points)));
                        }
                    }
                    mine
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_default())
            .collect()
    });
    done.sort_by_key(|(f, c, _)| (*f, *c));
    files
        .into_iter()
        .enumerate()
        .map(|(f, (path, file))| FileReport {
            path,
            error: file.err(),
            outcomes: done
                .iter()
                .filter(|(of, ..)| *of == f)
                .map(|(.., o)| o.clone())
                .collect(),
        })
        .collect()
}

/// Cases passed and failed; a file that cannot be read counts as a failure.
fn counts(reports: &[FileReport]) -> (usize, usize) {
    let outcomes = reports.iter().flat_map(|r| &r.outcomes);
    let passed = outcomes.clone().filter(|o| o.failures.is_empty()).count();
    let failed = outcomes.filter(|o| !o.failures.is_empty()).count()
        + reports.iter().filter(|r| r.error.is_some()).count();
    (passed, failed)
}

fn human(reports: &[FileReport], took: Duration) -> String {
    let mut out = String::new();
    let (mut virtual_ms, mut crash_points, mut in_recovery) = (0, 0, 0);
    for report in reports {
        let _ = writeln!(out, "{}", report.path.display());
        if let Some(error) = &report.error {
            let _ = writeln!(out, "  FAIL  {error}");
        }
        for o in &report.outcomes {
            virtual_ms += o.virtual_ms;
            crash_points += o.crash_points;
            in_recovery += o.crashes_in_recovery;
            let mark = if o.failures.is_empty() {
                "ok  "
            } else {
                "FAIL"
            };
            let crashes = match o.crash_points {
                0 => String::new(),
                n => format!(", {n} crash points"),
            };
            let _ = writeln!(
                out,
                "  {mark}  {}  ({} ms, {} virtual{crashes})",
                o.name,
                o.wall.as_millis(),
                virtual_time(o.virtual_ms)
            );
            for failure in &o.failures {
                let _ = writeln!(out, "          {failure}");
            }
        }
    }
    let (passed, failed) = counts(reports);
    let crashes = match crash_points {
        0 => String::new(),
        n => format!(", {n} crash points tried, {in_recovery} of them during a recovery"),
    };
    let _ = writeln!(
        out,
        "{} files, {} cases: {passed} passed, {failed} failed ({:.2} s, {} of virtual time{crashes})",
        reports.len(),
        passed + failed,
        took.as_secs_f64(),
        virtual_time(virtual_ms)
    );
    out
}

/// `1h 2m 3s`, `250ms`.
fn virtual_time(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let s = ms / 1000;
    let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m {s}s"),
        _ => format!("{h}h {m}m {s}s"),
    }
}

fn as_json(reports: &[FileReport]) -> serde_json::Value {
    let (passed, failed) = counts(reports);
    let files: Vec<_> = reports
        .iter()
        .map(|r| {
            let cases: Vec<_> = r
                .outcomes
                .iter()
                .map(|o| {
                    json!({"name": o.name, "passed": o.failures.is_empty(),
                           "failures": o.failures, "virtual_ms": o.virtual_ms,
                           "crash_points": o.crash_points,
                           "crashes_in_recovery": o.crashes_in_recovery})
                })
                .collect();
            json!({"path": r.path.display().to_string(), "error": r.error, "cases": cases})
        })
        .collect();
    json!({"files": files, "passed": passed, "failed": failed})
}

fn junit(reports: &[FileReport]) -> String {
    use opcode_runtime::junit::{Case, Suite, render};
    let suites: Vec<Suite> = reports
        .iter()
        .map(|r| Suite {
            name: r.path.display().to_string(),
            error: r.error.clone(),
            cases: r
                .outcomes
                .iter()
                .map(|o| Case {
                    name: o.name.clone(),
                    failures: o.failures.clone(),
                    seconds: o.wall.as_secs_f64(),
                })
                .collect(),
        })
        .collect();
    render(&suites)
}
