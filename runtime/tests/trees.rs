//! Run trees (spec/limits.md, "Run trees"): budgets on depth, on the runs
//! a tree makes and on the step instances a run's loops make; short child
//! ids; a cancel that reaches every descendant.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{config, executor, request, runtime};
use opcode_runtime::executor::Config;
use opcode_runtime::store::memory::MemoryStore;
use opcode_runtime::store::{
    Commit, RunLog, WorkflowFilter, WorkflowRow, WorkflowStatus, WorkflowUpdate,
};
use opcode_runtime::{Executor, Until};
use opcode_vm::event::Event;
use serde_json::{Value, json};

/// A template file `name.json` in `dir`.
fn template(dir: &Path, name: &str, workflow: &Value) {
    std::fs::write(dir.join(format!("{name}.json")), workflow.to_string()).unwrap();
}

/// A step that runs template `name`.
fn run_of(id: &str, name: &str) -> Value {
    json!({"id": id, "action": "workflow.run", "params": {"template_name": name}})
}

/// Waits (10 s at most) for run `id` to end, which must be cancelled.
async fn ends_cancelled(exec: &Executor, id: &str) {
    let status = tokio::time::timeout(Duration::from_secs(10), exec.wait(id, Until::Ended))
        .await
        .expect("the run ends")
        .unwrap();
    assert_eq!(status, WorkflowStatus::Cancelled, "{id}");
}

async fn every_run(exec: &Executor) -> Vec<WorkflowRow> {
    exec.store()
        .workflows(WorkflowFilter::default())
        .await
        .unwrap()
}

/// The error code and the bound it names, of a run that failed.
fn limit_of(row: &WorkflowRow) -> (String, String) {
    let error: Value = serde_json::from_str(row.error.as_deref().unwrap_or("null")).unwrap();
    let text = error.to_string();
    let code = error["code"].as_str().unwrap_or_default().to_owned();
    let limit = ["run_depth", "run_tree", "step_instances"]
        .into_iter()
        .find(|l| text.contains(l))
        .unwrap_or_default()
        .to_owned();
    (code, limit)
}

fn limited(dir: &Path, set: impl FnOnce(&mut Config)) -> Config {
    let mut config = config(dir);
    set(&mut config);
    config
}

#[test]
fn a_template_that_runs_itself_stops_at_the_depth_bound_with_short_ids() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let itself = json!({"steps": [run_of("again", "itself")]});
    template(dir.path(), "itself", &itself);
    runtime().block_on(async {
        let exec = executor(&store, limited(dir.path(), |c| c.limits.run_depth = 6));
        let id = exec.start(request(&itself, &json!({}))).await.unwrap();
        let row = tokio::time::timeout(Duration::from_mins(1), exec.wait(&id, Until::Ended))
            .await
            .expect("the tree ends");
        assert_eq!(row.unwrap(), WorkflowStatus::Failed);
        let runs = every_run(&exec).await;
        // The root and six levels below it; the deepest failed to start one more.
        assert_eq!(runs.len(), 7, "{runs:#?}");
        assert!(runs.iter().all(|r| r.status == WorkflowStatus::Failed));
        assert!(
            runs.iter().all(|r| r.id.len() <= id.len() + 17),
            "ids grow with depth"
        );
        // The run with no child is the one that met the bound.
        let deepest = runs
            .iter()
            .find(|r| {
                !runs
                    .iter()
                    .any(|c| c.parent_id.as_deref() == Some(r.id.as_str()))
            })
            .unwrap();
        assert_eq!(limit_of(deepest), ("R0130".into(), "run_depth".into()));
    });
}

#[test]
fn a_tree_that_doubles_at_each_level_stops_at_the_runs_bound() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let twice = json!({"steps": [run_of("left", "twice"), run_of("right", "twice")]});
    template(dir.path(), "twice", &twice);
    runtime().block_on(async {
        let exec = executor(&store, limited(dir.path(), |c| c.limits.run_tree = 20));
        let id = exec.start(request(&twice, &json!({}))).await.unwrap();
        let status = tokio::time::timeout(Duration::from_mins(1), exec.wait(&id, Until::Ended))
            .await
            .expect("the tree ends")
            .unwrap();
        assert_eq!(status, WorkflowStatus::Failed);
        let runs = every_run(&exec).await;
        assert!(runs.len() <= 21, "{} runs", runs.len());
        let refused = runs.iter().filter(|r| limit_of(r).1 == "run_tree").count();
        assert!(refused > 0, "no run says which bound it met");
        // Every run ends: none is left running when its tree is refused.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let runs = every_run(&exec).await;
        assert!(runs.iter().all(|r| r.status.is_ended()), "{runs:#?}");
    });
}

#[test]
fn nested_loops_stop_at_the_step_instances_bound_and_the_run_fails() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let nested = json!({"steps": [{"id": "outer", "type": "loop", "config": {
        "mode": "for_each", "over": "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20]",
        "body": [{"id": "inner", "type": "loop", "config": {
            "mode": "for_each", "over": "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20]",
            "body": [{"id": "cell", "action": "expr.eval", "params": {"expression": "1"}}]}}]}}]});
    runtime().block_on(async {
        let exec = executor(
            &store,
            limited(dir.path(), |c| c.limits.step_instances = 100),
        );
        let id = exec.start(request(&nested, &json!({}))).await.unwrap();
        let status = exec.wait(&id, Until::Ended).await.unwrap();
        assert_eq!(status, WorkflowStatus::Failed);
        let row = exec.store().workflow(&id).await.unwrap().unwrap();
        assert_eq!(limit_of(&row), ("R0130".into(), "step_instances".into()));
        // The same loops fit the default bound.
        let exec = executor(&store, config(dir.path()));
        let id = exec.start(request(&nested, &json!({}))).await.unwrap();
        assert_eq!(
            exec.wait(&id, Until::Ended).await.unwrap(),
            WorkflowStatus::Completed
        );
    });
}

#[test]
fn a_cancel_reaches_every_descendant() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let waits = json!({"steps": [{"id": "w", "type": "wait", "config": {"signal": "go"}}]});
    template(dir.path(), "waits", &waits);
    template(
        dir.path(),
        "middle",
        &json!({"steps": [run_of("inner", "waits")]}),
    );
    let mapped = json!({"steps": [{"id": "each", "action": "workflow.map",
        "params": {"template_name": "waits", "items": [1, 2, 3]}}]});
    template(dir.path(), "mapped", &mapped);
    let root = json!({"steps": [run_of("one", "middle"), run_of("many", "mapped")]});
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let id = exec.start(request(&root, &json!({}))).await.unwrap();
        // The root, middle, its child, mapped and its three children.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while every_run(&exec).await.len() < 7 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the tree did not grow"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let cancel = Event::Cancel {
            reason: "enough".into(),
        };
        exec.deliver(&id, cancel).await.unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let runs = every_run(&exec).await;
            if runs.iter().all(|r| r.status == WorkflowStatus::Cancelled) {
                assert_eq!(runs.len(), 7);
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "left running: {:?}",
                runs.iter()
                    .filter(|r| r.status != WorkflowStatus::Cancelled)
                    .map(|r| (&r.id, r.status))
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

/// Starts `root`, whose step `one` runs a child that waits, and lets both
/// go as a shutdown does: the ids of the root and of its child.
fn held_then_let_go(store: &Arc<MemoryStore>, dir: &Path, root: &Value) -> (String, String) {
    runtime().block_on(async {
        let exec = executor(store, config(dir));
        let id = exec.start(request(root, &json!({}))).await.unwrap();
        let child = opcode_stdlib::exec::child_id(&format!("{id}/one/1"), None);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while exec.store().workflow(&child).await.unwrap().is_none() {
            assert!(tokio::time::Instant::now() < deadline, "no child");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        exec.wait(&child, Until::Settled).await.unwrap();
        exec.shutdown(Duration::from_secs(5)).await;
        (id, child)
    })
}

#[test]
fn a_child_whose_parent_ended_while_the_process_was_down_is_cancelled_at_recovery() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let waits = json!({"steps": [{"id": "w", "type": "wait", "config": {"signal": "go"}},
        {"id": "after", "action": "expr.eval", "depends_on": ["w"], "params": {"expression": "1"}}]});
    template(dir.path(), "waits", &waits);
    let root = json!({"steps": [run_of("one", "waits")]});
    let (root_id, child_id) = held_then_let_go(&store, dir.path(), &root);
    // The parent's end is written, and the process dies before its
    // child hears of it.
    runtime().block_on(async {
        let row = store.workflow(&root_id).await.unwrap().unwrap();
        let ended = Commit {
            workflow_id: root_id.clone(),
            after_seq: row.last_seq,
            update: Some(WorkflowUpdate {
                status: WorkflowStatus::Cancelled,
                updated_at: row.updated_at.clone(),
                ..WorkflowUpdate::default()
            }),
            ..Commit::default()
        };
        store.commit(ended).await.unwrap();
    });
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        exec.recover().await.unwrap();
        ends_cancelled(&exec, &child_id).await;
    });
}

/// A parent loaded only to be cancelled (it was let go at a shutdown)
/// cancels its children too.
#[test]
fn a_parent_cancelled_while_unloaded_cancels_its_children() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let waits = json!({"steps": [{"id": "w", "type": "wait", "config": {"signal": "go"}}]});
    template(dir.path(), "waits", &waits);
    let root = json!({"steps": [run_of("one", "waits")]});
    let (root_id, child_id) = held_then_let_go(&store, dir.path(), &root);
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let cancel = Event::Cancel {
            reason: "stop".into(),
        };
        exec.deliver(&root_id, cancel).await.unwrap();
        ends_cancelled(&exec, &child_id).await;
    });
}

/// The runs bound holds however the tree grows: here `workflow.map` of
/// the template itself, three children a level.
#[test]
fn a_map_of_itself_stops_at_the_runs_bound() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let fans = json!({"steps": [{"id": "each", "action": "workflow.map", "condition": "true",
        "params": {"template_name": "fans", "items": [1, 2, 3]}}]});
    template(dir.path(), "fans", &fans);
    runtime().block_on(async {
        let exec = executor(&store, limited(dir.path(), |c| c.limits.run_tree = 30));
        let id = exec.start(request(&fans, &json!({}))).await.unwrap();
        let status = tokio::time::timeout(Duration::from_mins(1), exec.wait(&id, Until::Ended))
            .await
            .expect("the tree ends")
            .unwrap();
        assert_eq!(status, WorkflowStatus::Failed);
        let runs = every_run(&exec).await;
        assert!(runs.len() <= 31, "{} runs", runs.len());
        assert!(
            runs.iter().all(|r| r.id.len() <= id.len() + 17 + 2),
            "ids grow"
        );
    });
}
