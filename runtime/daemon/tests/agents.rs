//! `opcode agent`: definitions published as immutable releases, driven as
//! a user would (spec/registry.md).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

const OPCODE: &str = env!("CARGO_BIN_EXE_opcode");

/// Runs `opcode agent ARGS` in `dir` on the database there.
fn agent(dir: &Path, args: &[&str]) -> Output {
    Command::new(OPCODE)
        .arg("agent")
        .args(args)
        .arg("--db")
        .arg(dir.join("o.db"))
        .current_dir(dir)
        .env("HOME", dir)
        .env("USER", "alice")
        .output()
        .expect("opcode runs")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// What `agent` printed, as JSON.
fn json_of(output: &Output) -> Value {
    assert!(output.status.success(), "{}", text(output));
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn an_agent_is_published_changed_refused_diffed_and_published_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    let init = agent(path, &["init", "db-analyzer", "--role", "worker"]);
    assert!(init.status.success(), "{}", text(&init));
    let again = agent(path, &["init", "db-analyzer"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        text(&again).contains("never writes over"),
        "{}",
        text(&again)
    );

    let checked = agent(path, &["check", "db-analyzer.agent.json"]);
    assert!(
        text(&checked).contains("db-analyzer@0.1.0 is ready"),
        "{}",
        text(&checked)
    );
    let published = agent(path, &["publish", "db-analyzer.agent.json"]);
    assert!(
        text(&published).contains("published db-analyzer@0.1.0"),
        "{}",
        text(&published)
    );
    let same = agent(path, &["publish", "db-analyzer.agent.json"]);
    assert!(
        same.status.success() && text(&same).contains("the same"),
        "{}",
        text(&same)
    );

    // A changed skill under the same version is refused, with the fix.
    let skill = path.join("skills/db-analyzer/SKILL.md");
    let mut changed = std::fs::read_to_string(&skill).unwrap();
    changed.push_str("3. Never drop a table.\n");
    std::fs::write(&skill, changed).unwrap();
    let refused = agent(path, &["publish", "db-analyzer.agent.json"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        text(&refused).contains("error[E0067]"),
        "{}",
        text(&refused)
    );
    assert!(
        text(&refused).contains("db-analyzer@0.1.1"),
        "{}",
        text(&refused)
    );

    let diff = agent(path, &["diff", "db-analyzer", "db-analyzer.agent.json"]);
    assert_eq!(diff.status.code(), Some(1), "{}", text(&diff));
    assert!(
        text(&diff).contains("+3. Never drop a table."),
        "{}",
        text(&diff)
    );

    let definition = path.join("db-analyzer.agent.json");
    let bumped = std::fs::read_to_string(&definition)
        .unwrap()
        .replace("0.1.0", "0.1.1");
    std::fs::write(&definition, bumped).unwrap();
    let next = agent(path, &["publish", "db-analyzer.agent.json"]);
    assert!(
        text(&next).contains("published db-analyzer@0.1.1"),
        "{}",
        text(&next)
    );

    let list = json_of(&agent(path, &["list", "--json"]));
    assert_eq!(list[0]["name"], "db-analyzer");
    assert_eq!(list[0]["newest"], "0.1.1");
    assert_eq!(list[0]["releases"], 2);
    assert_eq!(list[0]["published_by"], "alice");

    let newest = json_of(&agent(path, &["show", "db-analyzer"]));
    assert_eq!(newest["version"], "0.1.1");
    assert_eq!(newest["definition"]["role"], "worker");
    let content = newest["definition"]["skills"][0]["content"]
        .as_str()
        .unwrap();
    assert!(content.contains("Never drop a table"), "{content}");
    let first = json_of(&agent(path, &["show", "db-analyzer@0.1.0"]));
    let content = first["definition"]["skills"][0]["content"]
        .as_str()
        .unwrap();
    assert!(!content.contains("Never drop a table"), "{content}");

    let releases = agent(path, &["diff", "db-analyzer@0.1.0", "db-analyzer@0.1.1"]);
    assert_eq!(releases.status.code(), Some(1));
    let unchanged = agent(path, &["diff", "db-analyzer", "db-analyzer.agent.json"]);
    assert_eq!(unchanged.status.code(), Some(0), "{}", text(&unchanged));
}

#[test]
fn bad_definitions_are_refused_with_codes_and_nothing_is_published() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.md"), "not yours").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.md"), path.join("linked.md")).unwrap();
    let cases = [
        (
            json!({"name": "a", "version": "1.0.0", "role": "scout",
                "skills": [{"name": "x", "path": "../secret.md"}]}),
            "E0066",
        ),
        (
            json!({"name": "a", "version": "1.0.0", "role": "scout",
                "skills": [{"name": "x", "path": "linked.md"}]}),
            "E0066",
        ),
        (
            json!({"name": "a", "version": "1.0.0", "role": "scout",
                "skills": [{"name": "x", "path": "missing.md"}]}),
            "E0064",
        ),
        (
            json!({"name": "a", "version": "1.2", "role": "scout"}),
            "E0065",
        ),
        (
            json!({"name": "A b", "version": "1.0.0", "role": "scout"}),
            "E0064",
        ),
        (
            json!({"name": "a", "version": "1.0.0", "role": "scout",
                "mcp": {"pg": {"command": "npx", "url": "https://x"}}}),
            "E0064",
        ),
        (
            json!({"name": "a", "version": "1.0.0", "role": "boss"}),
            "E0014",
        ),
        (
            json!({"name": "a", "version": "1.0.0", "role": "scout",
                "budgets": {"max_steps": 1}}),
            "E0057",
        ),
    ];
    for (definition, code) in cases {
        std::fs::write(path.join("a.agent.json"), definition.to_string()).unwrap();
        let out = agent(path, &["publish", "a.agent.json"]);
        assert_eq!(out.status.code(), Some(2), "{definition}: {}", text(&out));
        assert!(
            text(&out).contains(&format!("[{code}]")),
            "{definition}: {}",
            text(&out)
        );
    }
    // The same class as `..` and a link: a linked folder leads out too; and
    // reads that would never end or grow without bound are refused.
    std::os::unix::fs::symlink(outside.path(), path.join("linked-dir")).unwrap();
    nix::unistd::mkfifo(&path.join("pipe.md"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::fs::write(path.join("huge.md"), vec![b'x'; 1024 * 1024 + 1]).unwrap();
    std::fs::create_dir(path.join("a-folder")).unwrap();
    for (skill, code, says) in [
        (
            "linked-dir/secret.md",
            "E0066",
            "outside the definition's folder",
        ),
        ("pipe.md", "E0064", "not a regular file"),
        ("huge.md", "E0064", "more than a skill may be"),
        ("a-folder", "E0064", "not a regular file"),
    ] {
        let definition = json!({"name": "a", "version": "1.0.0", "role": "scout",
                                "skills": [{"name": "x", "path": skill}]});
        std::fs::write(path.join("a.agent.json"), definition.to_string()).unwrap();
        let out = agent(path, &["check", "a.agent.json"]);
        assert_eq!(out.status.code(), Some(2), "{skill}: {}", text(&out));
        assert!(
            text(&out).contains(&format!("[{code}]")) && text(&out).contains(says),
            "{skill}: {}",
            text(&out)
        );
    }
    std::fs::write(path.join("a.agent.json"), "{\"name\": ").unwrap();
    assert!(text(&agent(path, &["check", "a.agent.json"])).contains("[E0001]"));
    assert_eq!(json_of(&agent(path, &["list", "--json"])), json!([]));

    let unknown = agent(path, &["show", "db-analyser"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        text(&unknown).contains("error[E0068]"),
        "{}",
        text(&unknown)
    );
    // The operator allows some MCP servers: others are refused.
    std::fs::create_dir_all(path.join(".opcode")).unwrap();
    let settings = json!({"agent_mcp": ["npx", "https://mcp.example.com"]});
    std::fs::write(path.join(".opcode/settings.json"), settings.to_string()).unwrap();
    for (server, code) in [
        (json!({"command": "bash", "args": ["-c", "id"]}), Some(2)),
        (json!({"url": "https://mcp.example.com.evil/sse"}), Some(2)),
        (json!({"url": "http://mcp.example.com/sse"}), Some(2)),
        (
            json!({"url": "https://mcp.example.com@evil.example/sse"}),
            Some(2),
        ),
        (json!({"command": "npx-evil"}), Some(2)),
        (json!({"command": "npx", "args": ["-y", "pg-mcp"]}), Some(0)),
        (json!({"url": "https://mcp.example.com/sse"}), Some(0)),
    ] {
        let definition =
            json!({"name": "a", "version": "1.0.0", "role": "scout", "mcp": {"s": server}});
        std::fs::write(path.join("a.agent.json"), definition.to_string()).unwrap();
        let out = agent(path, &["check", "a.agent.json"]);
        assert_eq!(out.status.code(), code, "{server}: {}", text(&out));
        assert_eq!(
            text(&out).contains("[E0069]"),
            code == Some(2),
            "{server}: {}",
            text(&out)
        );
    }
    let bad_name = agent(path, &["init", "../x"]);
    assert_eq!(bad_name.status.code(), Some(2));
    assert!(!path.join("../x.agent.json").exists());
}

/// Runs `opcode run FILE` in `dir` on the database there, as run `probe`.
fn run_file(dir: &Path, file: &str) -> Output {
    Command::new(OPCODE)
        .args(["run", file, "--id", "probe", "--db"])
        .arg(dir.join("o.db"))
        .current_dir(dir)
        .env("HOME", dir)
        .output()
        .expect("opcode runs")
}

#[test]
fn a_workflow_run_by_hand_naming_an_unknown_agent_or_another_role_is_refused_before_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    assert!(
        agent(path, &["init", "db-fixer", "--role", "worker"])
            .status
            .success()
    );
    assert!(
        agent(path, &["publish", "db-fixer.agent.json"])
            .status
            .success()
    );
    let workflow = |action: &str, name: &str| {
        json!({"steps": [{"id": "fix", "action": action,
                          "params": {"agent": name, "prompt": "fix it"}}]})
        .to_string()
    };
    std::fs::write(path.join("typo.json"), workflow("agent.worker", "db-fixr")).unwrap();
    let typo = run_file(path, "typo.json");
    assert_eq!(typo.status.code(), Some(2), "{}", text(&typo));
    assert!(text(&typo).contains("E0068"), "{}", text(&typo));
    assert!(
        text(&typo).contains("did you mean `db-fixer`?"),
        "{}",
        text(&typo)
    );
    std::fs::write(path.join("role.json"), workflow("agent.scout", "db-fixer")).unwrap();
    let role = run_file(path, "role.json");
    assert_eq!(role.status.code(), Some(2), "{}", text(&role));
    assert!(
        text(&role).contains("`db-fixer@0.1.0` is a worker agent"),
        "{}",
        text(&role)
    );
    let status = Command::new(OPCODE)
        .args(["status", "probe", "--db"])
        .arg(path.join("o.db"))
        .env("HOME", path)
        .output()
        .unwrap();
    assert!(
        text(&status).contains("workflow `probe` not found"),
        "a run started: {}",
        text(&status)
    );
}
