//! The `opcode` binary, driven as a user would.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const OPCODE: &str = env!("CARGO_BIN_EXE_opcode");

fn opcode(db: &Path, args: &[&str]) -> Output {
    Command::new(OPCODE)
        .args(args)
        .arg("--db")
        .arg(db)
        .output()
        .expect("opcode runs")
}

fn json_out(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// A folder the sandbox user (not root) may use as a workflow's
/// workspace: its shell steps run there, isolated.
pub fn sandbox_workspace() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

fn write(dir: &Path, name: &str, workflow: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, workflow.to_string()).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn run_status_and_events_agree() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("o.db");
    let file = write(
        dir.path(),
        "wf.json",
        &json!({"name": "sum", "input_schema": {"type": "object", "required": ["n"]},
            "definition": {"steps": [
                {"id": "a", "action": "expr.eval", "params": {"expression": "inputs.n + 1"}},
                {"id": "b", "action": "expr.eval", "depends_on": ["a"],
                 "params": {"expression": "steps.a.result * 2"}}],
            "output": {"total": "${{steps.b.result}}"}}}),
    );
    let run = opcode(
        &db,
        &[
            "run", &file, "--input", "n=4", "--id", "w1", "--format", "json",
        ],
    );
    assert_eq!(run.status.code(), Some(0), "{run:?}");
    let summary = json_out(&run);
    assert_eq!(summary["status"], "completed");
    assert_eq!(summary["output"], json!({"total": 10}));
    assert_eq!(summary["steps"]["b"]["status"], "completed");
    let status = opcode(&db, &["status", "w1", "--format", "json"]);
    assert_eq!(status.status.code(), Some(0));
    assert_eq!(json_out(&status), summary);
    let human = opcode(&db, &["status", "w1"]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("status: completed") && text.contains("\"total\": 10"),
        "{text}"
    );
    let events = opcode(&db, &["events", "w1", "--format", "json"]);
    let lines: Vec<Value> = String::from_utf8_lossy(&events.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seqs: Vec<u64> = lines.iter().map(|l| l["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=lines.len() as u64).collect::<Vec<_>>());
    assert_eq!(lines[0]["event_type"], "run_started");
    assert_eq!(lines.last().unwrap()["event_type"], "workflow_completed");
    // The same id cannot start twice.
    let again = opcode(&db, &["run", &file, "--input", "n=1", "--id", "w1"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
}

#[test]
fn exit_codes_tell_failed_invalid_and_cancelled_runs_apart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("o.db");
    let failing = write(
        dir.path(),
        "fail.json",
        &json!({"steps": [{"id": "boom", "action": "workflow.fail", "params": {"reason": "no"}}]}),
    );
    let out = opcode(&db, &["run", &failing, "--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json_out(&out)["error"]["message"], "no");
    let broken = write(dir.path(), "broken.json", &json!({"steps": [{"id": "x"}]}));
    let out = opcode(&db, &["run", &broken]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("E0011"),
        "{out:?}"
    );
    let typed = write(
        dir.path(),
        "typed.json",
        &json!({"input_schema": {"type": "object", "required": ["who"]},
            "definition": {"steps": [
                {"id": "x", "action": "workflow.log", "params": {"message": "hi"}}]}}),
    );
    let out = opcode(&db, &["run", &typed]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("R0108"));
    let waiting = write(
        dir.path(),
        "wait.json",
        &json!({"steps": [{"id": "gate", "type": "wait", "config": {"signal": "go"}}]}),
    );
    let out = opcode(&db, &["run", &waiting, "--id", "w2"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let out = opcode(&db, &["cancel", "w2", "--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(json_out(&out)["status"], "cancelled");
    let out = opcode(&db, &["status", "nope"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_named_signal_resumes_a_waiting_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("o.db");
    let file = write(
        dir.path(),
        "wf.json",
        &json!({"steps": [
            {"id": "gate", "type": "wait", "config": {"signal": "go"}},
            {"id": "echo", "action": "expr.eval", "depends_on": ["gate"],
             "params": {"expression": "steps.gate.payload.n"}}]}),
    );
    assert_eq!(
        opcode(&db, &["run", &file, "--id", "s"]).status.code(),
        Some(3)
    );
    let out = opcode(
        &db,
        &[
            "signal",
            "s",
            "--signal",
            "go={\"n\": 7}",
            "--format",
            "json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(json_out(&out)["steps"]["echo"]["output"]["result"], 7);
}

/// The owner recorded in the lease of `id`.
fn owner_pid(db: &Path, id: &str) -> Option<i32> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let conn = libsql::Builder::new_local(db)
            .build()
            .await
            .ok()?
            .connect()
            .ok()?;
        let mut rows = conn
            .query(
                "SELECT lease_owner FROM workflows WHERE id = ?1 AND lease_owner IS NOT NULL",
                [id],
            )
            .await
            .ok()?;
        let row = rows.next().await.ok()??;
        let owner: String = row.get(0).ok()?;
        owner.rsplit(':').nth(1)?.parse().ok()
    })
}

#[test]
fn a_detached_run_survives_kill_9_and_decisions_finish_it() {
    let dir = sandbox_workspace();
    let db = dir.path().join("o.db");
    let trace = dir.path().join("trace");
    let file = write(
        dir.path(),
        "wf.json",
        &json!({"steps": [
            {"id": "prepare", "action": "shell.exec", "params": {"shell": true,
                "command": format!("echo prepare >> '{}'; sleep 1; echo ready", trace.display())}},
            {"id": "each", "type": "loop", "depends_on": ["prepare"], "config": {
                "mode": "for_each", "over": "inputs.items", "body": [
                    {"id": "note", "action": "expr.eval",
                     "params": {"expression": "'item ' + string(iter.item)"}},
                    {"id": "review", "type": "reasoning", "depends_on": ["note"], "config": {
                        "prompt_context": "approve?", "options": [{"id": "yes"}, {"id": "no"}],
                        "data_inject": {"note": "steps.note.result"}}}
                ]}},
            {"id": "done", "action": "expr.eval", "depends_on": ["each"],
             "params": {"expression": "steps.prepare.stdout + ':' + string(size(steps.each.results))"}}
        ]}),
    );
    let out = opcode(
        &db,
        &["run", &file, "--detach", "--inputs", "{\"items\": [1, 2]}"],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    // Kill the background process while `prepare` runs.
    let deadline = Instant::now() + Duration::from_secs(10);
    let pid = loop {
        if let Some(pid) = owner_pid(&db, &id) {
            break pid;
        }
        assert!(
            Instant::now() < deadline,
            "the background run never took its lease"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(300));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let status = json_out(&opcode(&db, &["status", &id, "--format", "json"]));
    assert_eq!(status["status"], "active", "{status}");
    // Restart: the run carries on to the first decision.
    let out = opcode(&db, &["resume", "--all"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let resumed = String::from_utf8_lossy(&out.stdout);
    assert!(resumed.contains(&format!("{id} suspended")), "{out:?}");
    let out = opcode(
        &db,
        &["signal", &id, "--decide", "review=yes", "--format", "json"],
    );
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let summary = json_out(&out);
    assert_eq!(summary["pending_decisions"][0]["id"], "review[1]");
    assert_eq!(
        summary["pending_decisions"][0]["context"]["data"]["note"],
        "item 2"
    );
    let out = opcode(
        &db,
        &["signal", &id, "--decide", "review=no", "--format", "json"],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let summary = json_out(&out);
    assert_eq!(summary["status"], "completed");
    assert_eq!(summary["steps"]["done"]["output"]["result"], "ready\n:2");
    assert_eq!(summary["steps"]["review[0]"]["output"]["choice"], "yes");
    assert_eq!(summary["steps"]["note[1]"]["output"]["result"], "item 2");
    // `prepare` was in flight at the kill: it ran again, and the log says so.
    let events = String::from_utf8_lossy(&opcode(&db, &["events", &id]).stdout).into_owned();
    assert!(events.contains("action_redispatched"), "{events}");
    let prepared = std::fs::read_to_string(&trace).unwrap();
    assert_eq!(prepared.lines().count(), 2, "{prepared}");
}

#[test]
fn the_skill_prints_and_installs_as_a_directory_of_its_own() {
    let printed = Command::new(OPCODE).arg("skill").output().unwrap();
    assert!(printed.status.success());
    let text = String::from_utf8(printed.stdout).unwrap();
    assert!(text.starts_with("---\nname: opcode\n"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let installed = Command::new(OPCODE)
        .args(["skill", "--install"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(installed.status.success(), "{installed:?}");
    let skill = std::fs::read_to_string(dir.path().join("opcode/SKILL.md")).unwrap();
    assert_eq!(skill, text);
    let actions = dir.path().join("opcode/references/actions.md");
    assert!(
        std::fs::read_to_string(actions)
            .unwrap()
            .contains("## `http.get`")
    );
    let refused = Command::new(OPCODE)
        .args(["skill", "--install", "/proc/no-such-place"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
}

/// A URL is never opened as a file: one of a scheme not served is refused,
/// a PostgreSQL one that cannot be reached says so.
#[test]
fn a_database_url_is_never_opened_as_a_file() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens on port 1.
    for (url, says) in [
        ("sqlite://x.db", "file path"),
        ("mysql://me@h/db", "postgres://"),
        (
            "postgres://me@127.0.0.1:1/opcode",
            "cannot use the database",
        ),
        ("postgresql://me:secret@127.0.0.1:1/db", "me:***@"),
    ] {
        let status = Command::new(OPCODE)
            .args(["status", "some-id", "--db", url])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(status.status.code(), Some(2), "{url}");
        let stderr = String::from_utf8_lossy(&status.stderr);
        assert!(stderr.contains(says), "{url}: {stderr}");
        assert!(!stderr.contains("secret"), "{stderr}");
        let served = Command::new(OPCODE)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env("OPCODE_DB", url)
            .env("HOME", dir.path())
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_ne!(served.status.code(), Some(0), "{url}");
        let stderr = String::from_utf8_lossy(&served.stderr);
        assert!(stderr.contains(says), "{url}: {stderr}");
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .filter(|name| {
            let name = name.to_string_lossy();
            ["postgres", "sqlite", "mysql"]
                .iter()
                .any(|scheme| name.starts_with(scheme))
        })
        .collect();
    assert!(left.is_empty(), "a URL was opened as a file: {left:?}");
}

/// Runs, in `dir`, a parent whose one step runs `kid` (its output is
/// `output`), and checks that it rests suspended (exit 3), held by the
/// child: the database and the parent's view.
fn held_parent(dir: &Path, kid: &Value, output: &Value) -> (PathBuf, Value) {
    let db = dir.join("o.db");
    write(dir, "kid.json", kid);
    let mom = write(
        dir,
        "mom.json",
        &json!({"steps": [
        {"id": "c", "action": "workflow.run", "params": {"template_name": "kid"}}],
        "output": output}),
    );
    let ran = opcode(&db, &["run", &mom, "--format", "json"]);
    assert_eq!(
        ran.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let view = json_out(&ran);
    assert_eq!(view["status"], "suspended", "{view}");
    (db, view)
}

/// `opcode run` of a parent whose child waits for a decision returns
/// suspended (exit 3) with the child's decision; `opcode signal` on the
/// parent answers it and carries both on to the end.
#[test]
fn a_parent_held_by_its_childs_decision_rests_and_is_answered_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let (db, view) = held_parent(
        dir.path(),
        &json!({"steps": [
        {"id": "ask", "type": "reasoning", "config": {"prompt_context": "ok?", "options": [{"id": "y"}]}}]}),
        &json!({"said": "${{steps.c.output.output.ask.choice}}"}),
    );
    assert_eq!(view["pending_decisions"][0]["step_id"], "ask", "{view}");
    let id = view["workflow_id"].as_str().unwrap();
    let answered = opcode(
        &db,
        &["signal", id, "--decide", "ask=y", "--format", "json"],
    );
    assert_eq!(
        answered.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&answered.stderr)
    );
    let done = json_out(&answered);
    assert_eq!(
        (&done["status"], &done["output"]["said"]),
        (&json!("completed"), &json!("y")),
        "{done}"
    );
}

/// `opcode signal --signal` on a parent held by a child that waits for
/// that signal delivers it to the child and carries both on to the end.
#[test]
fn a_signal_for_a_waiting_child_is_sent_through_its_parent() {
    let dir = tempfile::tempdir().unwrap();
    let (db, view) = held_parent(
        dir.path(),
        &json!({"steps": [{"id": "gate", "type": "wait", "config": {"signal": "go"}}]}),
        &json!({"got": "${{steps.c.output.output.gate.payload}}"}),
    );
    let id = view["workflow_id"].as_str().unwrap().to_owned();
    let sent = opcode(
        &db,
        &[
            "signal",
            &id,
            "--signal",
            "go={\"n\": 7}",
            "--format",
            "json",
        ],
    );
    assert_eq!(
        sent.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    let done = json_out(&sent);
    assert_eq!(
        (&done["status"], &done["output"]["got"]),
        (&json!("completed"), &json!({"n": 7})),
        "{done}"
    );
}

/// The size of the database file `db`, and of its WAL, in bytes.
fn stored_bytes(db: &Path) -> (u64, u64) {
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    (size(db), size(&db.with_extension("db-wal")))
}

/// A 60 MB file read whole (50 MiB of it, reported `truncated`) is one
/// output, which is the action's result, the step's output and the run's:
/// the database grows by at most 1.2 times the value. NUL-heavy output,
/// whose `stdout` and `stdout_raw` are the same text, is kept once too.
#[test]
fn a_large_output_is_stored_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("o.db");
    let data: Vec<u8> = (0..60_000_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    std::fs::write(dir.path().join("big.txt"), &data).unwrap();
    let read = write(
        dir.path(),
        "read.json",
        &json!({"steps": [{"id": "r", "action": "fs.read", "params": {"path": "big.txt"}}]}),
    );
    let ran = opcode(&db, &["run", &read, "--format", "json"]);
    assert_eq!(
        ran.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let view = json_out(&ran);
    let content = view["output"]["r"]["content"].as_str().unwrap();
    assert_eq!(content.len(), 50 << 20);
    assert_eq!(view["output"]["r"]["truncated"], true);
    let (stored, wal) = stored_bytes(&db);
    assert!(
        stored * 5 < content.len() as u64 * 6,
        "{stored} bytes stored for a {} byte output",
        content.len()
    );
    // The WAL holds the last commit until it starts over, within its bound.
    assert!(wal <= 64 << 20, "a WAL of {wal} bytes");
    let nuls = write(
        dir.path(),
        "nuls.json",
        &json!({"steps": [{"id": "z", "action": "shell.exec",
            "params": {"command": "head -c 2000000 /dev/zero", "shell": true}}]}),
    );
    let (before, _) = stored_bytes(&db);
    let ran = opcode(&db, &["run", &nuls, "--format", "json"]);
    assert_eq!(
        ran.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let escaped = json_out(&ran)["output"]["z"]["stdout_raw"]
        .to_string()
        .len() as u64;
    let grown = stored_bytes(&db).0.saturating_sub(before);
    assert!(
        grown * 5 < escaped * 6,
        "{grown} bytes stored for {escaped} bytes of JSON"
    );
}

/// `serve` refuses an unknown log level with the closest one, and every
/// line it writes on stderr, a refusal to start included, is JSON.
#[test]
fn serve_refuses_unknown_log_levels_in_json_lines() {
    let dir = tempfile::tempdir().unwrap();
    let serve = |args: &[&str]| {
        Command::new(OPCODE)
            .arg("serve")
            .args(args)
            .env("HOME", dir.path())
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    for (args, says) in [
        (
            &["--log-level", "verbos"][..],
            "the log level `verbos` is not one of error, warn, info, debug, trace",
        ),
        (&["--log-level", "inf"][..], "did you mean `info`?"),
        (&["--listen", "0.0.0.0:0"][..], "token"),
    ] {
        let out = serve(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        for line in stderr.lines() {
            let parsed: Result<Value, _> = serde_json::from_str(line);
            assert!(parsed.is_ok(), "{args:?}: a line that is not JSON: {line}");
        }
    }
}

#[test]
fn the_version_names_its_commit_and_schema() {
    let out = Command::new(OPCODE).arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let expected = format!("opcode {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(text.starts_with(&expected), "{text}");
    let schema = format!(", schema {})\n", opcode_runtime::store::SCHEMA_VERSION);
    assert!(text.ends_with(&schema), "{text}");
    let commit = &text[expected.len()..text.len() - schema.len()];
    assert!(
        commit == "unknown"
            || (commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{commit}"
    );
}
