//! `opcode install --client` and `opcode uninstall --client` on sample
//! configuration files of each client: our entry is added, kept and
//! removed; everything else stays as it was.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

const OPCODE: &str = env!("CARGO_BIN_EXE_opcode");

const CLIENTS: [(&str, &str); 4] = [
    ("claude-code", "claude-code.json"),
    ("codex", "codex.toml"),
    ("cursor", "cursor.json"),
    ("vscode", "vscode.json"),
];

/// `opcode SUBCOMMAND --client CLIENT --client-config FILE ARGS…`, with
/// settings of its own.
fn opcode(dir: &Path, subcommand: &str, client: &str, file: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(OPCODE);
    command
        .arg(subcommand)
        .args(["--client", client, "--client-config"])
        .arg(file)
        .args(args)
        .env("HOME", dir)
        .env_remove("OPCODE_TOKEN")
        .env_remove("OPCODE_LISTEN");
    let out = command.output().unwrap();
    assert!(out.status.success(), "{subcommand} {client}: {out:?}");
    out
}

fn sample(dir: &Path, name: &str) -> (std::path::PathBuf, String) {
    let original = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/clients")
            .join(name),
    )
    .unwrap();
    let file = dir.join(name);
    std::fs::write(&file, &original).unwrap();
    (file, original)
}

/// The lines `after` has that `before` has not, and those it lost, apart
/// from a comma added at the end of a line.
fn changed_lines(before: &str, after: &str) -> (Vec<String>, Vec<String>) {
    let diff = similar::TextDiff::from_lines(before, after);
    let (mut added, mut removed) = (Vec::new(), Vec::new());
    for change in diff.iter_all_changes() {
        let line = change.value().trim_end_matches('\n').to_owned();
        match change.tag() {
            similar::ChangeTag::Insert => added.push(line),
            similar::ChangeTag::Delete => removed.push(line),
            similar::ChangeTag::Equal => {}
        }
    }
    removed.retain(|line| !added.contains(&format!("{line},")));
    (added, removed)
}

#[test]
fn each_client_gets_our_entry_and_keeps_the_rest_byte_for_byte() {
    for (client, name) in CLIENTS {
        let dir = tempfile::tempdir().unwrap();
        let (file, original) = sample(dir.path(), name);
        let flags = [
            "--listen",
            "127.0.0.1:4321",
            "--token",
            "a-token-long-enough-for-the-guard",
        ];
        opcode(dir.path(), "install", client, &file, &flags);
        let installed = std::fs::read_to_string(&file).unwrap();
        let (added, removed) = changed_lines(&original, &installed);
        assert!(
            removed.is_empty(),
            "{client} lost {removed:?}:\n{installed}"
        );
        let ours = added.join("\n");
        assert!(
            ours.contains("http://127.0.0.1:4321/mcp"),
            "{client}: {installed}"
        );
        assert!(
            ours.contains("OPCODE_TOKEN") || ours.contains("input:opcode-token"),
            "{client}: {ours}"
        );
        assert!(
            !installed.contains("a-token-long-enough"),
            "{client} got the token itself"
        );
        // Again: nothing changes.
        let again = opcode(dir.path(), "install", client, &file, &flags);
        assert!(String::from_utf8_lossy(&again.stdout).contains("nothing to change"));
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            installed,
            "{client}"
        );
        // Another address replaces our entry only.
        opcode(
            dir.path(),
            "install",
            client,
            &file,
            &["--listen", "127.0.0.1:4400"],
        );
        let moved = std::fs::read_to_string(&file).unwrap();
        assert!(
            moved.contains("127.0.0.1:4400/mcp") && !moved.contains("4321"),
            "{client}: {moved}"
        );
        assert!(
            !moved.contains("OPCODE_TOKEN") && !moved.contains("opcode-token"),
            "{client}: {moved}"
        );
        // Out again: the file is what it was.
        opcode(dir.path(), "uninstall", client, &file, &[]);
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            original,
            "{client}"
        );
        let twice = opcode(dir.path(), "uninstall", client, &file, &[]);
        assert!(String::from_utf8_lossy(&twice.stdout).contains("nothing to change"));
    }
}

#[test]
fn a_dry_run_shows_the_diff_and_writes_nothing() {
    for (client, name) in CLIENTS {
        let dir = tempfile::tempdir().unwrap();
        let (file, original) = sample(dir.path(), name);
        let out = opcode(dir.path(), "install", client, &file, &["--dry-run"]);
        let shown = String::from_utf8(out.stdout).unwrap();
        assert!(shown.starts_with("--- "), "{client}: {shown}");
        assert!(
            shown
                .lines()
                .any(|l| l.starts_with('+') && l.contains("http://127.0.0.1:4100/mcp")),
            "{client}: {shown}"
        );
        assert!(shown.contains("dry run"), "{shown}");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            original,
            "{client}"
        );
    }
}

#[test]
fn the_usual_file_is_found_and_a_missing_client_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(OPCODE)
            .args(args)
            .env("HOME", dir.path())
            .env_remove("CODEX_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .output()
            .unwrap()
    };
    let missing = run(&["install", "--client", "cursor"]);
    assert_eq!(missing.status.code(), Some(2));
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(
        said.contains("Cursor does not seem to be installed") && said.contains("--client-config"),
        "{said}"
    );
    std::fs::create_dir(dir.path().join(".codex")).unwrap();
    let codex = run(&["install", "--client", "codex"]);
    assert!(codex.status.success(), "{codex:?}");
    let written = std::fs::read_to_string(dir.path().join(".codex/config.toml")).unwrap();
    assert_eq!(
        written,
        "[mcp_servers.opcode]\nurl = \"http://127.0.0.1:4100/mcp\"\n"
    );
    // The settings file is left alone.
    assert!(!dir.path().join(".opcode/settings.json").exists());
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\"mcpServers\": [").unwrap();
    let refused = run(&[
        "install",
        "--client",
        "cursor",
        "--client-config",
        broken.to_str().unwrap(),
    ]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("cannot edit"));
    assert_eq!(
        std::fs::read_to_string(&broken).unwrap(),
        "{\"mcpServers\": ["
    );
}
