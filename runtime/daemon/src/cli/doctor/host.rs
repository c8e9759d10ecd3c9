//! What `opcode doctor` checks on the host: the address and its token, the
//! log level, the sandbox's protections, the plugins.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use opcode_daemon::serve::guard::valid_token;
use opcode_daemon::settings::{OwnFiles, Settings};
use opcode_stdlib::exec::Call;
use opcode_stdlib::isolation::cgroup::{self, Cgroup, Limits, Version};
use opcode_stdlib::isolation::host::Host;
use opcode_stdlib::isolation::{Policy, spawn};
use serde_json::{Value, json};

use super::Check;
use crate::cli::common::home;
use crate::cli::guarding::{LEVELS, exposure_problem, unknown_level_message};
use crate::cli::serve::bind_error;

/// The log level, the address, the token, and whether the port is free.
pub async fn serving(settings: &Settings) -> Vec<Check> {
    let mut checks = Vec::new();
    checks.push(match settings.log_level.as_deref() {
        Some(level) if !LEVELS.contains(&level) => Check::fail(
            "log level",
            unknown_level_message(level),
            "give one of error, warn, info, debug, trace (--log-level or \"log_level\")",
        ),
        level => Check::ok("log level", level.unwrap_or("info")),
    });
    let listen = match settings.listen_addr() {
        Ok(listen) => listen,
        Err(e) => {
            checks.push(Check::fail(
                "listen address",
                e,
                "give host:port, e.g. --listen 127.0.0.1:4100",
            ));
            return checks;
        }
    };
    checks.push(
        match (&settings.token, exposure_problem(&listen, settings)) {
            (_, Some(problem)) => Check::fail(
                "token",
                problem,
                "set a token, e.g. OPCODE_TOKEN=$(openssl rand -hex 32), or listen on 127.0.0.1",
            ),
            (Some(token), None) => match valid_token(token) {
                Ok(()) => Check::ok("token", "set; clients send it as a bearer token"),
                Err(e) => Check::fail("token", e, "set a longer, random token"),
            },
            (None, None) => Check::ok(
                "token",
                format!("none needed: {listen} is reachable from this machine only"),
            ),
        },
    );
    let bound = tokio::net::TcpListener::bind(listen).await;
    checks.push(match bound {
        Ok(_) => Check::ok("port", format!("{listen} is free")),
        Err(e) => match running_opcode(listen, settings.token.as_deref()).await {
            Some(server) => Check::warn(
                "port",
                format!("{listen} is in use by a running opcode ({server})"),
                "stop it before starting another `opcode serve` on this address",
            ),
            None => Check::fail(
                "port",
                bind_error(listen, &e),
                "stop what listens there (ss -ltnp shows it) or choose another --listen",
            ),
        },
    });
    checks
}

/// The `Server` a running opcode on `listen` names itself with at
/// `/livez`, if that is what holds the address.
async fn running_opcode(listen: SocketAddr, token: Option<&str>) -> Option<String> {
    let mut address = listen;
    if address.ip().is_unspecified() {
        address.set_ip(match address {
            SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
        });
    }
    // reqwest needs a TLS provider chosen even for plain HTTP.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(2))
        .build()
        .ok()?;
    let mut request = client.get(format!("http://{address}/livez"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.ok()?;
    let server = response
        .headers()
        .get(reqwest::header::SERVER)?
        .to_str()
        .ok()?;
    server.starts_with("opcode/").then(|| server.to_owned())
}

/// The sandbox's protections with the settings' isolation, and a report
/// of what the host gives.
pub fn isolation(settings: &Settings, settings_file: &Path) -> (Check, Value) {
    let data_dir = home().join(".opcode");
    let config = settings.workspaces(&data_dir).and_then(|workspaces| {
        let files = OwnFiles {
            db: settings.db.clone(),
            settings: settings_file.to_path_buf(),
            vault_key: settings.vault_key_file.clone(),
            others: Vec::new(),
        };
        settings.isolation(files.hidden(&data_dir), &workspaces)
    });
    let policy = config.and_then(|config| {
        Policy::of(&config, &Call::default(), Path::new("/")).map_err(|e| e.message)
    });
    let policy = match policy {
        Ok(policy) => policy,
        Err(e) => {
            let check = Check::fail("isolation", e, "correct `isolation` in the settings");
            return (check, Value::Null);
        }
    };
    let host = Host::get();
    let version = cgroup::detect(&policy.cgroup_root);
    let controllers = version.map_or_else(Vec::new, |_| cgroup::controllers(&policy.cgroup_root));
    let needed = needed_controllers(&policy);
    let lacking: Vec<&str> = needed
        .iter()
        .copied()
        .filter(|c| !controllers.iter().any(|have| have == c))
        .collect();
    let verdict = spawn::protections(host, &policy);
    let report = json!({
        "protections": host.protections().iter().map(|(name, ok)| json!({"name": name, "provided": ok})).collect::<Vec<_>>(),
        "root": host.root,
        "cgroup_root": policy.cgroup_root,
        "cgroup_version": match version { Some(Version::V2) => "v2", Some(Version::V1) => "v1", None => "none" },
        "cgroup_controllers": controllers,
        "sandbox": verdict.as_ref().map(|(userns, seccomp)| json!({"user_namespace": userns, "seccomp": seccomp})).ok(),
        "missing": verdict.as_ref().err(),
    });
    let check = if !policy.enabled {
        Check::warn(
            "isolation",
            "off: shell steps run on the host as the daemon's user",
            "turn isolation on in the settings unless every workflow is trusted",
        )
    } else if let Err(missing) = &verdict {
        Check::fail(
            "isolation",
            format!("sandboxed steps fail here (R0125): {}", missing.join("; ")),
            "run the daemon as root on Linux with namespaces, or accept the missing \
             protection in isolation.optional",
        )
    } else if version.is_none() {
        Check::fail(
            "isolation",
            format!(
                "no cgroup hierarchy at {}: limits cannot be set",
                policy.cgroup_root.display()
            ),
            "mount cgroup2 at /sys/fs/cgroup, or set isolation.cgroup_root to where it is",
        )
    } else if !lacking.is_empty() {
        Check::fail(
            "isolation",
            format!(
                "the cgroup hierarchy at {} lacks the {} controller{}: steps with those \
                 limits fail (R0125)",
                policy.cgroup_root.display(),
                lacking.join(", "),
                if lacking.len() == 1 { "" } else { "s" }
            ),
            format!(
                "enable it for the daemon's cgroup (cgroup v2: echo +{} > {}/cgroup.subtree_control \
                 in the parent), or drop the limit",
                lacking[0],
                policy.cgroup_root.display()
            ),
        )
    } else {
        match probe_cgroup(&policy) {
            Ok(()) => Check::ok(
                "isolation",
                format!(
                    "sandboxed steps run here: namespaces, {}seccomp {}, cgroup {} limits ({})",
                    if verdict.as_ref().is_ok_and(|(userns, _)| *userns) {
                        "a user namespace, "
                    } else {
                        ""
                    },
                    if host.seccomp { "on" } else { "off" },
                    if version == Some(Version::V2) {
                        "v2"
                    } else {
                        "v1"
                    },
                    needed.join(", ")
                ),
            ),
            Err(missing) => Check::fail(
                "isolation",
                format!("a step's cgroup cannot be made: {}", missing.join("; ")),
                "give the daemon write access to the cgroup hierarchy (run as root, or \
                 delegate a subtree to its user)",
            ),
        }
    };
    (check, report)
}

/// The controllers the policy's limits need.
fn needed_controllers(policy: &Policy) -> Vec<&'static str> {
    let mut needed = vec!["pids"];
    if policy.memory.is_some() {
        needed.insert(0, "memory");
    }
    if policy.cpu.is_some() {
        needed.push("cpu");
    }
    needed
}

/// Makes and removes a cgroup with the policy's limits, as a step would.
fn probe_cgroup(policy: &Policy) -> Result<(), Vec<String>> {
    let limits = Limits {
        memory: policy.memory,
        default_memory: None,
        pids: policy.pids,
        cpu: policy.cpu,
    };
    // Named like a step's (`PID-…-…`), so a sweep knows whose it was.
    let name = format!("{}-doctor-0", std::process::id());
    Cgroup::create(&policy.cgroup_root, &name, &limits).map(drop)
}

/// Each plugin starts (or answers) and lists its tools.
pub async fn plugins(settings: &Settings) -> Vec<Check> {
    let configs = match settings.plugins() {
        Ok(configs) => configs,
        Err(e) => {
            return vec![Check::fail(
                "plugins",
                e,
                "correct `plugins` in the settings",
            )];
        }
    };
    if configs.is_empty() {
        return vec![Check::ok("plugins", "none configured")];
    }
    let probes = configs.iter().map(|config| async move {
        match opcode_daemon::plugins::probe(config).await {
            Ok(tools) => Check::ok(
                "plugin",
                format!(
                    "`{}` is up with {} tool(s): {}",
                    config.name,
                    tools.len(),
                    tools.join(", ")
                ),
            ),
            Err(e) => Check::fail(
                "plugin",
                format!("`{}`: {e}", config.name),
                "check its command (or URL), arguments and environment in `plugins`",
            ),
        }
    });
    futures::future::join_all(probes).await
}
