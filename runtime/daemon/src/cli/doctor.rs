//! `opcode doctor`: which of the sandbox's protections this host gives,
//! with the settings as they are (spec/security.md). Exit 0 when a
//! sandboxed step can run here, 1 when it would fail with R0125.

use std::path::Path;

use opcode_daemon::settings::Settings;
use opcode_stdlib::exec::Call;
use opcode_stdlib::isolation::cgroup::{self, Version};
use opcode_stdlib::isolation::host::Host;
use opcode_stdlib::isolation::{Block, IsolationConfig, Policy, spawn};
use serde_json::json;

use super::common::{Exit, Format, fail, home};

/// Arguments of `doctor`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The settings file (default ~/.opcode/settings.json).
    #[arg(long, value_name = "PATH")]
    config: Option<std::path::PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

/// Runs `doctor`.
pub fn doctor(args: &Args) -> Exit {
    let path = args
        .config
        .clone()
        .unwrap_or_else(|| Settings::file_in(&home()));
    let settings = match Settings::load(&path) {
        Ok(settings) => settings,
        Err(e) => return fail(e),
    };
    let config = match Block::parse(settings.isolation.as_ref()) {
        Ok(defaults) => IsolationConfig {
            defaults,
            ..IsolationConfig::default()
        },
        Err(e) => return fail(e),
    };
    let policy = match Policy::of(&config, &Call::default(), Path::new("/")) {
        Ok(policy) => policy,
        Err(e) => return fail(e.message),
    };
    let host = Host::get();
    let hierarchy = match cgroup::detect(&policy.cgroup_root) {
        Some(Version::V2) => "v2",
        Some(Version::V1) => "v1",
        None => "none",
    };
    let verdict = spawn::protections(host, &policy);
    let checks: Vec<(&str, bool)> = host
        .protections()
        .into_iter()
        .chain([("cgroups at the configured root", hierarchy != "none")])
        .collect();
    match args.format {
        Format::Json => {
            let report = json!({
                "protections": checks.iter().map(|(name, ok)| json!({"name": name, "provided": ok})).collect::<Vec<_>>(),
                "cgroup_root": policy.cgroup_root,
                "cgroup_version": hierarchy,
                "sandbox": verdict.as_ref().map(|(userns, seccomp)| json!({"user_namespace": userns, "seccomp": seccomp})).ok(),
                "missing": verdict.as_ref().err(),
            });
            println!(
                "{}",
                serde_json::to_string_pretty(&report).unwrap_or_default()
            );
        }
        Format::Human => {
            for (name, ok) in &checks {
                println!("{} {name}", if *ok { "ok  " } else { "MISS" });
            }
            println!("cgroups: {hierarchy} at {}", policy.cgroup_root.display());
            match &verdict {
                Ok((userns, seccomp)) => println!(
                    "sandboxed steps run here (user namespace: {}, seccomp: {})",
                    if *userns { "yes" } else { "no" },
                    if *seccomp { "yes" } else { "no" }
                ),
                Err(missing) => {
                    println!("sandboxed steps fail here (R0125): {}", missing.join("; "));
                }
            }
        }
    }
    if verdict.is_ok() && hierarchy != "none" {
        Exit::Ok
    } else {
        Exit::Failed
    }
}
