//! `opcode doctor`: checks what `opcode serve` would run with, given the
//! same flags, settings and environment, and says what to do about each
//! failure (spec/operator.md). Exit 0 when nothing fails, 1 when a check
//! fails, 2 when the settings cannot be read at all.

mod brokers;
mod host;
mod store;

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{Value, json};

use super::common::{Exit, Format};
use super::serve;

/// Arguments of `doctor`: those of `serve`, whose start it checks.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    serve: serve::Args,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// The same as `--format json`.
    #[arg(long, conflicts_with = "format")]
    json: bool,
}

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Fine.
    Ok,
    /// Works, but an operator should know.
    Warn,
    /// `opcode serve` would refuse to start, or a step would fail.
    Fail,
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// What was checked.
    pub name: &'static str,
    /// How it came out.
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to do about it (for a warning or a failure).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    /// A check that passed.
    pub fn ok(name: &'static str, detail: impl Into<String>) -> Check {
        Check {
            name,
            status: Status::Ok,
            detail: detail.into(),
            fix: None,
        }
    }

    /// A check that passed with a caveat, and what to do about it.
    pub fn warn(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            name,
            status: Status::Warn,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    /// A check that failed, and what to do about it.
    pub fn fail(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            name,
            status: Status::Fail,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// Runs `doctor`.
pub async fn doctor(args: &DoctorArgs) -> Exit {
    let format = if args.json { Format::Json } else { args.format };
    let mut checks = Vec::new();
    let mut isolation = Value::Null;
    match args.serve.settings() {
        Err(e) => checks.push(Check::fail(
            "settings",
            e,
            format!(
                "correct the settings file {} (spec/errors names each field)",
                args.serve.config_path().display()
            ),
        )),
        Ok(settings) => {
            let file = args.serve.config_path();
            checks.push(Check::ok(
                "settings",
                if file.exists() {
                    format!("read {}", file.display())
                } else {
                    format!(
                        "no file at {}: flags, environment and defaults",
                        file.display()
                    )
                },
            ));
            checks.extend(host::serving(&settings).await);
            checks.extend(store::checks(&settings).await);
            let (check, report) = host::isolation(&settings, &args.serve.config_path());
            checks.push(check);
            isolation = report;
            checks.extend(host::plugins(&settings).await);
            checks.extend(brokers::checks(&settings).await);
        }
    }
    let failed = checks.iter().any(|c| c.status == Status::Fail);
    match format {
        Format::Json => {
            let report = json!({"ok": !failed, "checks": checks, "isolation": isolation});
            println!(
                "{}",
                serde_json::to_string_pretty(&report).unwrap_or_default()
            );
        }
        Format::Human => print!("{}", human(&checks)),
    }
    if failed { Exit::Failed } else { Exit::Ok }
}

/// The report as aligned lines, a fix under each warning and failure.
fn human(checks: &[Check]) -> String {
    let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for check in checks {
        let mark = match check.status {
            Status::Ok => "ok  ",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        };
        let _ = writeln!(out, "{mark}  {:width$}  {}", check.name, check.detail);
        if let Some(fix) = &check.fix {
            let _ = writeln!(out, "      {:width$}  fix: {fix}", "");
        }
    }
    let failures = checks.iter().filter(|c| c.status == Status::Fail).count();
    let _ = match failures {
        0 => writeln!(out, "opcode serve can start here"),
        1 => writeln!(out, "1 check failed"),
        n => writeln!(out, "{n} checks failed"),
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_aligns_its_names_and_puts_each_fix_under_its_check() {
        let checks = [
            Check::ok("settings", "read s.json"),
            Check::fail("port", "127.0.0.1:4100 is in use", "stop the other daemon"),
        ];
        assert_eq!(
            human(&checks),
            "ok    settings  read s.json\n\
             FAIL  port      127.0.0.1:4100 is in use\n\
             \x20               fix: stop the other daemon\n\
             1 check failed\n"
        );
    }
}
