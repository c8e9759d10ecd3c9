//! The executor against the in-memory store: runs, suspension and
//! unloading, crash recovery, durable timers, cancel, inboxes, children.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod recovery;

use std::sync::Arc;
use std::time::Duration;

use common::{config, executor, request, runtime};
use opcode_runtime::executor::Config;
use opcode_runtime::store::memory::MemoryStore;
use opcode_runtime::store::{
    DecisionStatus, EntryKind, EventName, LogEntry, RunLog, StoreError, WorkflowRow,
};
use opcode_runtime::workspace::Workspaces;
use opcode_runtime::{Delivery, ExecError, Executor, Recovery, StartRequest, Until};
use opcode_vm::event::{Event, Resolution};
use serde_json::{Value, json};

async fn entries(store: &MemoryStore, id: &str) -> Vec<LogEntry> {
    store.entries(id, 0, false).await.unwrap()
}

/// Waits for `id` and reads its row: the status the wait reports must be
/// the stored one.
async fn settle(exec: &Executor, id: &str, until: Until) -> WorkflowRow {
    let status = exec.wait(id, until).await.unwrap();
    let row = exec.store().workflow(id).await.unwrap().unwrap();
    assert_eq!(row.status, status);
    row
}

fn json_of(text: Option<&str>) -> Value {
    serde_json::from_str(text.unwrap_or("null")).unwrap()
}

fn decide(decision: &str, choice: &str) -> Event {
    Event::DecisionResolved {
        decision: decision.into(),
        resolution: Resolution {
            choice: choice.into(),
            reasoning: None,
            data: None,
            resolved_by: Some("tester".into()),
        },
    }
}

/// A loop whose body asks a decision for every item.
fn review_loop() -> Value {
    json!({"steps": [
        {"id": "first", "action": "expr.eval", "params": {"expression": "1 + 1"}},
        {"id": "each", "type": "loop", "depends_on": ["first"], "config": {
            "mode": "for_each", "over": "inputs.items", "body": [
                {"id": "review", "type": "reasoning", "config": {
                    "prompt_context": "ok?", "options": [{"id": "yes"}, {"id": "no"}]}}
            ]}},
        {"id": "last", "action": "expr.eval", "depends_on": ["each"],
         "params": {"expression": "string(steps.first.result) + '/' + string(size(steps.each.results))"}}
    ]})
}

#[test]
fn a_run_completes_and_its_state_is_derived() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let workflow = json!({"steps": [
            {"id": "a", "action": "expr.eval", "params": {"expression": "inputs.n * 2"}},
            {"id": "b", "action": "expr.eval", "depends_on": ["a"],
             "params": {"expression": "steps.a.result + 1"}},
            {"id": "skip", "action": "workflow.log", "depends_on": ["a"], "condition": "false",
             "params": {"message": "never"}}
        ]});
        let id = exec
            .start(request(&workflow, &json!({"n": 20})))
            .await
            .unwrap();
        let row = settle(&exec, &id, Until::Ended).await;
        assert_eq!(row.status.as_str(), "completed");
        assert!(row.completed_at.is_some() && row.started_at.is_some());
        let steps = store.steps(&id).await.unwrap();
        let view: Vec<(&str, &str)> = steps
            .iter()
            .map(|s| (s.step_id.as_str(), s.status.as_str()))
            .collect();
        assert!(view.contains(&("b", "completed")) && view.contains(&("skip", "skipped")));
        let b = steps.iter().find(|s| s.step_id == "b").unwrap();
        assert_eq!(json_of(b.output.as_deref())["result"], json!(41));
        let log = entries(&store, &id).await;
        let seqs: Vec<u64> = log.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=log.len() as u64).collect::<Vec<_>>());
        assert_eq!(log[0].event_type, "run_started");
        assert_eq!(log.last().unwrap().event_type, "workflow_completed");
        let inputs = log.iter().filter(|e| e.kind == EntryKind::Input).count();
        assert_eq!(inputs, 3, "started + two action results");
        assert!(exec.loaded().is_empty());
    });
}

#[test]
fn a_fresh_workspace_is_made_only_for_calls_that_use_it_and_removed_at_the_end() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("workspaces");
    let outside = dir.path().join("data.txt");
    std::fs::write(&outside, "x").unwrap();
    runtime().block_on(async {
        let exec = executor(
            &store,
            Config {
                workspaces: Some(Workspaces::Fresh {
                    root: root.clone(),
                    owner: None,
                }),
                ..config(dir.path())
            },
        );
        let reads = json!({"steps": [
            {"id": "stat", "action": "fs.stat", "params": {"path": outside}},
            {"id": "hash", "action": "crypto.hash", "depends_on": ["stat"], "params": {"data": "x"}}
        ]});
        let id = exec.start(request(&reads, &json!({}))).await.unwrap();
        let row = settle(&exec, &id, Until::Ended).await;
        assert_eq!(row.status.as_str(), "completed", "{:?}", row.error);
        assert!(!root.exists(), "a run of reads elsewhere made no directory");

        let writes = json!({"steps": [
            {"id": "write", "action": "fs.write", "params": {"path": "out.txt", "content": "made"}},
            {"id": "read", "action": "fs.read", "depends_on": ["write"], "params": {"path": "out.txt"}}
        ]});
        let id = exec.start(request(&writes, &json!({}))).await.unwrap();
        let row = settle(&exec, &id, Until::Ended).await;
        assert_eq!(row.status.as_str(), "completed", "{:?}", row.error);
        let steps = store.steps(&id).await.unwrap();
        let read = steps.iter().find(|s| s.step_id == "read").unwrap();
        assert_eq!(json_of(read.output.as_deref())["content"], json!("made"));
        assert!(root.exists(), "the write made the run's workspace");
        let left: Vec<_> = std::fs::read_dir(&root).unwrap().collect();
        assert!(left.is_empty(), "and the run's end removed it: {left:?}");
    });
}

#[test]
fn a_suspended_run_is_unloaded_and_decisions_resume_it_with_outputs_intact() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let id = exec
            .start(request(&review_loop(), &json!({"items": [1, 2]})))
            .await
            .unwrap();
        let row = settle(&exec, &id, Until::Settled).await;
        assert_eq!(row.status.as_str(), "suspended");
        assert!(exec.loaded().is_empty(), "a suspended run holds no task");
        let pending = store
            .decisions(Some(&id), Some(DecisionStatus::Pending))
            .await
            .unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].id, "review[0]");
        // A refused choice is reported and leaves no trace in the log.
        let before = entries(&store, &id).await.len();
        let refused = exec.deliver(&id, decide("review[0]", "maybe")).await;
        assert!(matches!(refused, Err(ExecError::Refused(_))), "{refused:?}");
        assert_eq!(entries(&store, &id).await.len(), before);
        for decision in ["review[0]", "review[1]"] {
            let delivered = exec.deliver(&id, decide(decision, "yes")).await.unwrap();
            assert_eq!(delivered, Delivery::Applied);
            exec.wait(&id, Until::Settled).await.unwrap();
        }
        let row = settle(&exec, &id, Until::Ended).await;
        assert_eq!(row.status.as_str(), "completed");
        let steps = store.steps(&id).await.unwrap();
        let last = steps.iter().find(|s| s.step_id == "last").unwrap();
        assert_eq!(json_of(last.output.as_deref())["result"], json!("2/2"));
        let settled = store
            .decisions(Some(&id), Some(DecisionStatus::Resolved))
            .await
            .unwrap();
        assert_eq!(settled.len(), 2);
        assert_eq!(settled[0].resolved_by.as_deref(), Some("tester"));
        let ended = exec.deliver(&id, decide("review[0]", "yes")).await;
        assert!(matches!(ended, Err(ExecError::Ended { .. })), "{ended:?}");
    });
}

#[test]
fn an_interrupted_run_resumes_and_completed_steps_never_run_again() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let workflow = json!({"steps": [
        {"id": "one", "action": "shell.exec", "params": {"command": "echo one >> trace", "shell": true}},
        {"id": "two", "action": "shell.exec", "depends_on": ["one"],
         "params": {"command": "echo two >> trace; sleep 0.4", "shell": true}},
        {"id": "three", "action": "shell.exec", "depends_on": ["two"],
         "params": {"command": "echo three >> trace", "shell": true}}
    ]});
    let first = runtime();
    let id = first.block_on(async {
        let exec = executor(&store, config(dir.path()));
        let id = exec.start(request(&workflow, &json!({}))).await.unwrap();
        // Wait until `two` is in flight, then "crash".
        for _ in 0..200 {
            let steps = store.steps(&id).await.unwrap();
            if steps.iter().any(|s| s.step_id == "two") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        id
    });
    first.shutdown_timeout(Duration::from_millis(100));
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let recovered = exec.recover().await.unwrap();
        assert_eq!(
            recovered,
            std::slice::from_ref(&id),
            "{:?}",
            store.workflow(&id).await
        );
        let row = settle(&exec, &id, Until::Ended).await;
        assert_eq!(row.status.as_str(), "completed");
        let log = entries(&store, &id).await;
        let notes: Vec<&LogEntry> = log
            .iter()
            .filter(|e| e.event_type == "action_redispatched")
            .collect();
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].step_id.as_deref(), Some("two"));
        assert!(notes[0].payload.contains(&format!("{id}/two/1")));
    });
    let trace = std::fs::read_to_string(dir.path().join("trace")).unwrap();
    let count = |line: &str| trace.lines().filter(|l| *l == line).count();
    assert_eq!(count("one"), 1, "{trace}");
    assert_eq!(count("three"), 1, "{trace}");
    assert!((1..=2).contains(&count("two")), "{trace}");
}

#[test]
fn a_decision_timeout_that_passed_while_down_fires_at_start() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let workflow = json!({"steps": [
        {"id": "gate", "type": "reasoning", "config": {
            "prompt_context": "ship?", "options": [{"id": "ship"}, {"id": "hold"}],
            "timeout": "300ms", "fallback": "hold"}},
        {"id": "after", "action": "expr.eval", "depends_on": ["gate"],
         "params": {"expression": "steps.gate.choice"}}
    ]});
    let first = runtime();
    let id = first.block_on(async {
        let exec = executor(&store, config(dir.path()));
        exec.start(request(&workflow, &json!({}))).await.unwrap()
    });
    first.shutdown_timeout(Duration::from_millis(100));
    std::thread::sleep(Duration::from_millis(400));
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let _background = exec.background();
        let row = settle(&exec, &id, Until::Ended).await;
        assert_eq!(row.status.as_str(), "completed");
        assert_eq!(
            json_of(row.output.as_deref())["after"]["result"],
            json!("hold")
        );
        let decisions = store.decisions(Some(&id), None).await.unwrap();
        assert_eq!(decisions[0].status.as_str(), "timed_out");
        assert!(store.next_timers(10).await.unwrap().is_empty());
    });
}

#[test]
fn cancel_ends_a_suspended_run() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let id = exec
            .start(request(&review_loop(), &json!({"items": [1]})))
            .await
            .unwrap();
        exec.wait(&id, Until::Settled).await.unwrap();
        let cancel = Event::Cancel {
            reason: "no longer needed".into(),
        };
        assert_eq!(exec.deliver(&id, cancel).await.unwrap(), Delivery::Applied);
        let row = settle(&exec, &id, Until::Ended).await;
        assert_eq!(row.status.as_str(), "cancelled");
        let decisions = store.decisions(Some(&id), None).await.unwrap();
        assert_eq!(decisions[0].status.as_str(), "cancelled");
    });
}

#[test]
fn recovery_can_leave_interrupted_runs_suspended_until_resumed() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let workflow = json!({"steps": [
        {"id": "slow", "action": "shell.exec", "params": {"command": "sleep 0.3; echo done", "shell": true}}
    ]});
    let first = runtime();
    let id = first.block_on(async {
        let exec = executor(&store, config(dir.path()));
        exec.start(request(&workflow, &json!({}))).await.unwrap()
    });
    first.shutdown_timeout(Duration::from_millis(100));
    runtime().block_on(async {
        let parked = Config {
            recovery: Recovery::LeaveSuspended,
            ..config(dir.path())
        };
        let exec = executor(&store, parked);
        assert_eq!(exec.recover().await.unwrap(), std::slice::from_ref(&id));
        let row = store.workflow(&id).await.unwrap().unwrap();
        assert_eq!(row.status.as_str(), "suspended");
        let log = entries(&store, &id).await;
        assert!(log.iter().any(|e| e.event_type == "workflow_interrupted"));
        exec.resume(&id).await.unwrap();
        let row = settle(&exec, &id, Until::Ended).await;
        assert_eq!(
            row.status.as_str(),
            "completed",
            "{:?}",
            entries(&store, &id).await
        );
    });
}

#[test]
fn events_for_a_run_owned_elsewhere_wait_in_its_inbox() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let id = exec
            .start(request(&review_loop(), &json!({"items": [1]})))
            .await
            .unwrap();
        exec.wait(&id, Until::Settled).await.unwrap();
        let other = "elsewhere:1:1";
        let claim = store
            .claim(&id, other, None, Duration::from_hours(1))
            .await
            .unwrap();
        assert!(matches!(
            claim,
            opcode_runtime::store::Claim::Granted { .. }
        ));
        let queued = exec.deliver(&id, decide("review[0]", "no")).await.unwrap();
        assert_eq!(
            queued,
            Delivery::Queued {
                owner: other.into()
            }
        );
        assert_eq!(store.inbox(Some(&id)).await.unwrap().len(), 1);
        // The other owner goes away; a daemon adopts the run and reads its mail.
        store.release(&id, other).await.unwrap();
        let _background = exec.background();
        let row = settle(&exec, &id, Until::Ended).await;
        assert_eq!(row.status.as_str(), "completed");
        assert!(store.inbox(Some(&id)).await.unwrap().is_empty());
    });
}

#[test]
fn a_run_suspended_by_its_deadline_resumes_with_a_fresh_one() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let workflow = json!({"timeout": "150ms", "on_timeout": "suspend", "steps": [
        {"id": "gate", "type": "reasoning", "config": {
            "prompt_context": "go?", "options": [{"id": "go"}]}},
        {"id": "after", "action": "expr.eval", "depends_on": ["gate"], "params": {"expression": "1"}}
    ]});
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let id = exec.start(request(&workflow, &json!({}))).await.unwrap();
        // The deadline passes while the decision is pending: the run halts.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let row = settle(&exec, &id, Until::Settled).await;
        assert_eq!(row.status.as_str(), "suspended");
        let log = entries(&store, &id).await;
        assert!(log.iter().any(|e| e.event_type == "workflow_timed_out"));
        // The decision is taken, but nothing new starts while halted.
        exec.deliver(&id, decide("gate", "go")).await.unwrap();
        let row = settle(&exec, &id, Until::Settled).await;
        assert_eq!(row.status.as_str(), "suspended");
        exec.resume(&id).await.unwrap();
        let row = settle(&exec, &id, Until::Settled).await;
        assert_eq!(row.status.as_str(), "completed", "{row:?}");
    });
}

#[test]
fn a_child_workflow_runs_once_and_its_output_reaches_the_parent() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let child = json!({"input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "steps": [{"id": "double", "action": "expr.eval", "params": {"expression": "inputs.n * 2"}}],
        "output": {"doubled": "${{steps.double.result}}"}});
    std::fs::write(dir.path().join("doubler.json"), child.to_string()).unwrap();
    let parent = json!({"steps": [
        {"id": "call", "action": "workflow.run",
         "params": {"template_name": "doubler", "params": {"n": 21}}}
    ]});
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let id = exec.start(request(&parent, &json!({}))).await.unwrap();
        let row = settle(&exec, &id, Until::Ended).await;
        assert_eq!(row.status.as_str(), "completed", "{row:?}");
        let output = json_of(row.output.as_deref());
        assert_eq!(output["call"]["output"]["doubled"], json!(42), "{output}");
        let child_id = opcode_stdlib::exec::child_id(&format!("{id}/call/1"), None);
        let child = store.workflow(&child_id).await.unwrap().unwrap();
        assert_eq!(child.parent_id.as_deref(), Some(id.as_str()));
        assert_eq!(child.status.as_str(), "completed");
    });
}

/// Every commit of run `id` the feed announced, as `(event_type, step)`s.
fn commits_of(
    feed: &mut tokio::sync::broadcast::Receiver<Arc<opcode_runtime::executor::Appended>>,
    id: &str,
) -> Vec<Vec<(String, Option<String>)>> {
    let mut commits = Vec::new();
    while let Ok(appended) = feed.try_recv() {
        if appended.workflow_id == id {
            let entries = appended.entries.iter();
            commits.push(
                entries
                    .map(|e| (e.event_type.clone(), e.step_id.clone()))
                    .collect(),
            );
        }
    }
    commits
}

#[test]
fn immediate_actions_run_in_the_round_that_asked_for_them() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("here.txt"), "x").unwrap();
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let mut feed = exec.appended();
        let workflow = json!({"steps": [
            {"id": "a", "action": "expr.eval", "params": {"expression": "2 * 21"}},
            {"id": "b", "action": "crypto.hash", "depends_on": ["a"],
             "params": {"data": "${{steps.a.result}}"}},
            {"id": "c", "action": "fs.stat", "depends_on": ["b"], "params": {"path": "here.txt"}},
            {"id": "d", "action": "expr.eval", "depends_on": ["c"],
             "params": {"expression": "steps.c.size"}}
        ]});
        let id = exec.start(request(&workflow, &json!({}))).await.unwrap();
        assert_eq!(
            settle(&exec, &id, Until::Ended).await.status.as_str(),
            "completed"
        );
        let commits = commits_of(&mut feed, &id);
        // The start, `a` and `b` (immediate), and `c` asked for: one commit;
        // `c`'s result (read from the disk), `d` and the end: the second.
        assert_eq!(commits.len(), 2, "{commits:#?}");
        let has = |commit: &[(String, Option<String>)], event: &str, step: &str| {
            commit
                .iter()
                .any(|(e, s)| e == event && s.as_deref() == Some(step))
        };
        for step in ["a", "b"] {
            assert!(has(&commits[0], "step_completed", step), "{step}");
        }
        assert!(has(&commits[0], "step_started", "c") && !has(&commits[0], "step_completed", "c"));
        assert!(has(&commits[1], "step_completed", "c") && has(&commits[1], "step_completed", "d"));
        assert_eq!(commits[1].last().unwrap().0, "workflow_completed");
        // The same run replayed from its log ends the same way.
        let steps = store.steps(&id).await.unwrap();
        assert!(
            steps.iter().all(|s| s.status.as_str() == "completed"),
            "{steps:?}"
        );
    });
}

#[test]
fn an_action_cancelled_in_the_round_that_asked_for_it_never_starts() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        // Both start at once; `stop` fails the workflow at once (immediate),
        // which cancels `write` before it was performed.
        let workflow = json!({"steps": [
            {"id": "stop", "action": "workflow.fail", "params": {"reason": "no"}},
            {"id": "write", "action": "fs.write",
             "params": {"path": "out.txt", "content": "written"}}
        ]});
        let id = exec.start(request(&workflow, &json!({}))).await.unwrap();
        assert_eq!(
            settle(&exec, &id, Until::Ended).await.status.as_str(),
            "failed"
        );
        assert!(!dir.path().join("out.txt").exists());
    });
}

/// The actions whose calls ended, in order.
#[derive(Default)]
struct CallsEnded(std::sync::Mutex<Vec<String>>);

impl CallsEnded {
    fn of(&self, action: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|a| *a == action)
            .count()
    }
}

impl opcode_runtime::executor::Observer for CallsEnded {
    fn action_ended(&self, action: &str, _: bool, _: f64) {
        self.0.lock().unwrap().push(action.to_owned());
    }
    fn appended(&self, _: &[(EntryKind, Option<EventName>)]) {}
}

#[test]
fn a_read_runs_while_the_commit_of_its_start_is_written_and_a_write_waits_for_it() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("here.txt"), "x").unwrap();
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let calls = Arc::new(CallsEnded::default());
        exec.set_observer(calls.clone());
        let workflow = json!({"steps": [
            {"id": "read", "action": "fs.stat", "params": {"path": "here.txt"}},
            {"id": "write", "action": "fs.write",
             "params": {"path": "out.txt", "content": "written"}}
        ]});
        store.hold_commits(true);
        let watch = async {
            let read = async {
                while calls.of("fs.stat") == 0 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            };
            tokio::time::timeout(Duration::from_secs(10), read)
                .await
                .expect("the read ran while the creation's commit was held");
            assert!(!dir.path().join("out.txt").exists());
            assert_eq!(calls.of("fs.write"), 0);
            store.hold_commits(false);
        };
        let (id, ()) = tokio::join!(exec.start(request(&workflow, &json!({}))), watch);
        let id = id.unwrap();
        assert_eq!(
            settle(&exec, &id, Until::Ended).await.status.as_str(),
            "completed"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("out.txt")).unwrap(),
            "written"
        );
        assert_eq!((calls.of("fs.stat"), calls.of("fs.write")), (1, 1));
        // The log is the same as before: the read's start with the run's,
        // its result in a later commit.
        let steps: Vec<(String, Option<String>, u64)> = entries(&store, &id)
            .await
            .into_iter()
            .map(|e| (e.event_type, e.step_id, e.seq))
            .collect();
        let seq_of = |event: &str, step: &str| {
            steps
                .iter()
                .find(|(e, s, _)| e == event && s.as_deref() == Some(step))
                .map(|(_, _, seq)| *seq)
                .unwrap()
        };
        assert!(seq_of("step_started", "read") < seq_of("step_completed", "read"));
    });
}

#[test]
fn a_second_start_of_a_loaded_run_is_refused_and_leaves_it_running() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        // A long step keeps the run loaded (and leased) while it is started
        // again, as a message delivered again or a webhook sent again does.
        let slow = json!({"steps": [
            {"id": "nap", "action": "shell.exec", "params": {"command": "sleep", "args": ["1"]}},
            {"id": "review", "type": "reasoning", "depends_on": ["nap"], "config": {
                "prompt_context": "ok?", "options": [{"id": "yes"}, {"id": "no"}]}}
        ]});
        let first = StartRequest {
            id: Some("msg-1".into()),
            ..request(&slow, &json!({}))
        };
        exec.start(first.clone()).await.unwrap();
        for _ in 0..3 {
            let again = exec.start(first.clone()).await;
            assert!(
                matches!(again, Err(ExecError::Store(StoreError::Exists(_)))),
                "{again:?}"
            );
            assert_eq!(exec.loaded(), ["msg-1"], "the first is still loaded");
        }
        exec.wait("msg-1", Until::Settled).await.unwrap();
        assert_eq!(
            exec.deliver("msg-1", decide("review", "yes"))
                .await
                .unwrap(),
            Delivery::Applied
        );
        let row = settle(&exec, "msg-1", Until::Ended).await;
        assert_eq!(row.status.as_str(), "completed");
        let log = entries(&store, "msg-1").await;
        let started = log.iter().filter(|e| e.event_type == "workflow_started");
        assert_eq!(started.count(), 1);
        let naps = log.iter().filter(|e| e.event_type == "step_started");
        assert_eq!(naps.count(), 2, "each step once: {log:?}");
    });
}

#[test]
fn a_second_start_of_a_run_not_loaded_fails_no_one_waiting_for_it() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let exec = Arc::new(executor(&store, config(dir.path())));
        let first = StartRequest {
            id: Some("hook-1".into()),
            ..request(&review_loop(), &json!({"items": [1]}))
        };
        exec.start(first.clone()).await.unwrap();
        exec.wait("hook-1", Until::Settled).await.unwrap();
        while !exec.loaded().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let waiting = {
            let exec = exec.clone();
            tokio::spawn(async move { exec.wait("hook-1", Until::Ended).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        let again = exec.start(first).await;
        assert!(
            matches!(again, Err(ExecError::Store(StoreError::Exists(_)))),
            "{again:?}"
        );
        exec.deliver("hook-1", decide("review[0]", "yes"))
            .await
            .unwrap();
        let waited = waiting.await.unwrap();
        assert_eq!(
            waited
                .map(|s| s.as_str().to_owned())
                .map_err(|e| e.to_string()),
            Ok("completed".to_owned())
        );
    });
}
