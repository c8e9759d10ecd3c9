//! `opcode doctor` on a healthy setup, then with each failure provoked.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

const OPCODE: &str = env!("CARGO_BIN_EXE_opcode");

/// A deployment in a temp dir: settings, a database holding a vault, and
/// the vault's key file.
struct Deployment {
    dir: tempfile::TempDir,
    db: PathBuf,
    key: PathBuf,
}

impl Deployment {
    fn new(settings: &Value) -> Deployment {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opcode.db");
        let key = dir.path().join("vault.key");
        std::fs::write(&key, "the right passphrase\n").unwrap();
        std::fs::write(dir.path().join("settings.json"), settings.to_string()).unwrap();
        let mut set = Command::new(OPCODE)
            .args(["secret", "set", "API_KEY", "--db"])
            .arg(&db)
            .arg("--vault-key-file")
            .arg(&key)
            .env_remove("OPCODE_VAULT_KEY")
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        set.stdin.take().unwrap().write_all(b"s3cret").unwrap();
        assert!(set.wait().unwrap().success());
        Deployment { dir, db, key }
    }

    /// `opcode doctor --json` with the deployment's files, each flag of
    /// `given` replacing the deployment's or added.
    fn doctor(&self, given: &[(&str, &str)]) -> (Option<i32>, Value) {
        let port = format!("127.0.0.1:{}", free_port());
        let mut flags = vec![
            (
                "--config",
                self.dir.path().join("settings.json").display().to_string(),
            ),
            ("--db", self.db.display().to_string()),
            ("--vault-key-file", self.key.display().to_string()),
            ("--listen", port),
        ];
        for (flag, value) in given {
            flags.retain(|(f, _)| f != flag);
            flags.push((flag, (*value).to_owned()));
        }
        let out = Command::new(OPCODE)
            .args(["doctor", "--json"])
            .args(
                flags
                    .iter()
                    .flat_map(|(flag, value)| [*flag, value.as_str()]),
            )
            .env_remove("OPCODE_VAULT_KEY")
            .env_remove("OPCODE_VAULT_KEY_FILE")
            .env_remove("OPCODE_TOKEN")
            .output()
            .unwrap();
        let report = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
        (out.status.code(), report)
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The check named `name`.
fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no `{name}` check: {report}"))
}

/// The names of the checks that failed.
fn failed(report: &Value) -> Vec<&str> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .map(|c| c["name"].as_str().unwrap())
        .collect()
}

#[test]
fn a_healthy_setup_passes_every_check() {
    let deployment = Deployment::new(&json!({}));
    let (code, report) = deployment.doctor(&[]);
    assert_eq!((code, failed(&report)), (Some(0), vec![]), "{report}");
    assert_eq!(report["ok"], true);
    let names: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for expected in [
        "settings",
        "log level",
        "token",
        "port",
        "disk",
        "database",
        "journal",
        "clock",
        "vault key",
        "isolation",
        "plugins",
    ] {
        assert!(names.contains(&expected), "{expected} missing: {report}");
    }
    let database = check(&report, "database")["detail"].as_str().unwrap();
    assert!(database.contains("schema version"), "{database}");
    assert!(
        check(&report, "journal")["detail"]
            .as_str()
            .unwrap()
            .contains("WAL, synchronous=normal")
    );
    assert_eq!(check(&report, "vault key")["detail"], "opens the vault");
    // The tests run as root on a host that isolates.
    assert_eq!(report["isolation"]["sandbox"]["seccomp"], true, "{report}");
    assert_eq!(report["isolation"]["root"], true, "{report}");
}

#[test]
fn a_wrong_vault_key_fails_with_what_to_do() {
    let deployment = Deployment::new(&json!({}));
    let wrong = deployment.dir.path().join("wrong.key");
    std::fs::write(&wrong, "another passphrase\n").unwrap();
    let (code, report) = deployment.doctor(&[("--vault-key-file", wrong.to_str().unwrap())]);
    assert_eq!(
        (code, failed(&report)),
        (Some(1), vec!["vault key"]),
        "{report}"
    );
    let vault = check(&report, "vault key");
    assert!(
        vault["detail"].as_str().unwrap().starts_with("R0124"),
        "{vault}"
    );
    assert!(
        vault["fix"].as_str().unwrap().contains("created with"),
        "{vault}"
    );
}

#[test]
fn a_missing_cgroup_controller_fails_isolation() {
    let cgroups = tempfile::tempdir().unwrap();
    std::fs::write(cgroups.path().join("cgroup.controllers"), "cpu pids\n").unwrap();
    let deployment = Deployment::new(&json!({"isolation": {
        "cgroup_root": cgroups.path(), "memory": "256MiB"}}));
    let (code, report) = deployment.doctor(&[]);
    assert_eq!(
        (code, failed(&report)),
        (Some(1), vec!["isolation"]),
        "{report}"
    );
    let isolation = check(&report, "isolation");
    assert!(
        isolation["detail"]
            .as_str()
            .unwrap()
            .contains("lacks the memory controller"),
        "{isolation}"
    );
    assert!(
        isolation["fix"].as_str().unwrap().contains("+memory"),
        "{isolation}"
    );
    assert_eq!(
        report["isolation"]["cgroup_controllers"],
        json!(["cpu", "pids"])
    );
    // No hierarchy at all.
    let deployment = Deployment::new(&json!({"isolation": {"cgroup_root": "/nonexistent"}}));
    let (code, report) = deployment.doctor(&[]);
    assert_eq!(
        (code, &report["isolation"]["cgroup_version"]),
        (Some(1), &json!("none"))
    );
}

#[test]
fn an_unreachable_database_fails_and_names_the_server() {
    let deployment = Deployment::new(&json!({}));
    let url = format!("postgres://opcode:pw@127.0.0.1:{}/opcode", free_port());
    let (code, report) = deployment.doctor(&[("--db", &url)]);
    assert_eq!(
        (code, failed(&report)),
        (Some(1), vec!["database"]),
        "{report}"
    );
    let database = check(&report, "database");
    let detail = database["detail"].as_str().unwrap();
    assert!(
        detail.contains("opcode:***@127.0.0.1"),
        "the password is masked: {detail}"
    );
    assert!(
        database["fix"]
            .as_str()
            .unwrap()
            .contains("start the server")
    );
    // A file where none can be made.
    let (code, report) = deployment.doctor(&[("--db", "/proc/no/such/opcode.db")]);
    assert_eq!(code, Some(1));
    assert!(
        check(&report, "database")["detail"]
            .as_str()
            .unwrap()
            .contains("cannot be created"),
        "{report}"
    );
}

#[test]
fn a_taken_port_fails_and_an_exposed_one_needs_a_token() {
    let deployment = Deployment::new(&json!({}));
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = taken.local_addr().unwrap().to_string();
    let (code, report) = deployment.doctor(&[("--listen", &listen)]);
    assert_eq!((code, failed(&report)), (Some(1), vec!["port"]), "{report}");
    let port = check(&report, "port")["detail"].as_str().unwrap();
    assert!(port.contains("already in use"), "{port}");
    let (code, report) = deployment.doctor(&[("--listen", "0.0.0.0:0")]);
    assert_eq!(
        (code, failed(&report)),
        (Some(1), vec!["token"]),
        "{report}"
    );
    let secret = "a-token-long-enough-to-keep";
    let (code, report) = deployment.doctor(&[("--listen", "0.0.0.0:0"), ("--token", secret)]);
    assert_eq!((code, failed(&report)), (Some(0), vec![]), "{report}");
}

#[test]
fn bad_settings_and_levels_are_named() {
    let deployment = Deployment::new(&json!({"log_level": "verbose"}));
    let (code, report) = deployment.doctor(&[]);
    assert_eq!(
        (code, failed(&report)),
        (Some(1), vec!["log level"]),
        "{report}"
    );
    std::fs::write(deployment.dir.path().join("settings.json"), "{not json").unwrap();
    let (code, report) = deployment.doctor(&[]);
    assert_eq!(
        (code, failed(&report)),
        (Some(1), vec!["settings"]),
        "{report}"
    );
}

#[test]
fn a_port_held_by_a_running_opcode_is_said_so_not_failed() {
    let deployment = Deployment::new(&json!({}));
    let listen = format!("127.0.0.1:{}", free_port());
    let mut daemon = Command::new(OPCODE)
        .args(["serve", "--listen", &listen, "--db"])
        .arg(deployment.dir.path().join("running.db"))
        .env("HOME", deployment.dir.path())
        .env_remove("OPCODE_TOKEN")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let up = (0..300).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        std::net::TcpStream::connect(&listen).is_ok()
    });
    let (code, report) = deployment.doctor(&[("--listen", &listen)]);
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    assert!(up, "the daemon did not start");
    assert_eq!((code, failed(&report)), (Some(0), vec![]), "{report}");
    let port = check(&report, "port");
    assert_eq!(port["status"], "warn", "{report}");
    let detail = port["detail"].as_str().unwrap();
    assert!(
        detail.contains("in use by a running opcode (opcode/"),
        "{detail}"
    );
}

#[test]
fn no_settings_file_is_said_so() {
    let deployment = Deployment::new(&json!({}));
    std::fs::remove_file(deployment.dir.path().join("settings.json")).unwrap();
    let (_, report) = deployment.doctor(&[]);
    let settings = check(&report, "settings");
    assert_eq!(settings["status"], "ok", "{report}");
    let detail = settings["detail"].as_str().unwrap();
    assert!(detail.starts_with("no file at "), "{detail}");
}

#[test]
fn a_broker_that_does_not_answer_fails_naming_it() {
    let settings = json!({"brokers": {
        "events": {"redis": format!("redis://127.0.0.1:{}/0", free_port())},
        "js": {"nats": format!("nats://127.0.0.1:{}", free_port())},
    }});
    let deployment = Deployment::new(&settings);
    let (code, report) = deployment.doctor(&[]);
    assert_eq!(
        (code, failed(&report)),
        (Some(1), vec!["brokers"]),
        "{report}"
    );
    let detail = check(&report, "brokers")["detail"].as_str().unwrap();
    assert!(
        detail.contains("events (redis)") && detail.contains("js (nats)"),
        "{detail}"
    );
    let closed = format!("127.0.0.1:{}", free_port());
    let kafka = Deployment::new(&json!({"brokers": {"k": {"kafka": closed}}}));
    let (code, report) = kafka.doctor(&[]);
    assert_eq!(
        (code, failed(&report)),
        (Some(1), vec!["brokers"]),
        "{report}"
    );
    let detail = check(&report, "brokers")["detail"].as_str().unwrap();
    assert!(detail.contains("k (kafka)"), "{detail}");
}
