//! The service files in examples/deploy start the daemon they describe:
//! their command lines, with the paths moved into a temp dir and `serve`
//! turned into `doctor`, pass every check.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

const OPCODE: &str = env!("CARGO_BIN_EXE_opcode");

fn deploy_file(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/deploy")
        .join(name);
    std::fs::read_to_string(path).unwrap()
}

fn free_listen() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// Runs `args` (a `serve` command line) as `doctor --json`, on a free port.
fn doctor(args: &[String], home: &Path) -> serde_json::Value {
    let mut args: Vec<String> = args.to_vec();
    let serve = args.iter().position(|a| a == "serve").unwrap();
    args[serve] = "doctor".into();
    args.push("--json".into());
    let listen = args.iter().position(|a| a == "--listen").unwrap();
    args[listen + 1] = free_listen();
    let out = Command::new(OPCODE)
        .args(&args[1..])
        .env("HOME", home)
        .env_remove("OPCODE_VAULT_KEY")
        .env_remove("OPCODE_VAULT_KEY_FILE")
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{report}");
    report
}

#[test]
fn the_systemd_unit_passes_the_doctor() {
    let unit = deploy_file("opcode.service");
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap();
    assert!(
        unit.contains("LoadCredential=vault.key:"),
        "the key is a credential"
    );
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("credentials");
    std::fs::create_dir(&credentials).unwrap();
    std::fs::write(credentials.join("vault.key"), "a passphrase\n").unwrap();
    let args: Vec<String> = exec
        .replace("%d", credentials.to_str().unwrap())
        .replace("/var/lib/opcode", dir.path().to_str().unwrap())
        .replace("/etc/opcode", dir.path().to_str().unwrap())
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    assert_eq!(args[0], "/usr/local/bin/opcode");
    let report = doctor(&args, dir.path());
    let vault = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "vault key");
    assert!(vault.is_some(), "{report}");
}

#[test]
fn the_launchd_plist_is_well_formed_and_passes_the_doctor() {
    let plist = deploy_file("dev.opcode.daemon.plist");
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().to_str().unwrap();
    let plist = plist.replace("HOME_DIR", home);
    let file = dir.path().join("agent.plist");
    std::fs::write(&file, &plist).unwrap();
    let parsed = Command::new("python3")
        .args(["-c", "import plistlib, json, sys; print(json.dumps(plistlib.load(open(sys.argv[1], 'rb'))['ProgramArguments']))"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(parsed.status.success(), "{parsed:?}");
    let args: Vec<String> = serde_json::from_slice(&parsed.stdout).unwrap();
    assert_eq!(args[0], format!("{home}/.cargo/bin/opcode"));
    std::fs::create_dir_all(dir.path().join(".opcode")).unwrap();
    std::fs::write(dir.path().join(".opcode/vault.key"), "a passphrase\n").unwrap();
    doctor(&args, dir.path());
}
