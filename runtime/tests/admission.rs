//! Run admission by concurrency key through the executor (spec/flow-control.md,
//! "Admission"): runs of one key beyond its limit wait their turn, and
//! start once a holder ends; other keys run meanwhile; `refuse_newest`
//! fails the newest with R0135; `cancel_running` cancels the oldest holder.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{config, executor, request, runtime};
use opcode_runtime::store::memory::MemoryStore;
use opcode_runtime::store::{
    Admission, Admitted, Commit, NewWorkflow, RunLog, Slots, Source, WorkflowStatus, WorkflowUpdate,
};
use opcode_runtime::{Executor, Until};
use opcode_vm::event::Event;
use serde_json::{Value, json};

/// A template holding its slot until signalled `go`.
fn holding(on_limit: &str) -> Value {
    json!({
        "concurrency": {"key": "${{inputs.env}}", "limit": 1, "on_limit": on_limit},
        "steps": [{"id": "hold", "type": "wait", "config": {"signal": "go"}}]
    })
}

/// Has run `id` started its steps (its `hold` step has a row)?
async fn started(exec: &Executor, id: &str) -> bool {
    !exec.store().steps(id).await.unwrap().is_empty()
}

/// Waits (10 s at most) until `check` holds.
async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    for _ in 0..500 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("never: {what}");
}

/// Starts a run of `template` for environment `env`.
async fn start(exec: &Executor, template: &Value, env: &str) -> String {
    exec.start(request(template, &json!({"env": env})))
        .await
        .unwrap()
}

/// How run `id` ended (10 s at most).
async fn ended(exec: &Executor, id: &str) -> WorkflowStatus {
    let ended = tokio::time::timeout(Duration::from_secs(10), exec.wait(id, Until::Ended));
    ended.await.expect("the run ends").unwrap()
}

async fn go(exec: &Executor, id: &str) {
    let signal = Event::Signal {
        name: "go".into(),
        payload: json!({}),
    };
    exec.deliver(id, signal).await.unwrap();
    assert_eq!(ended(exec, id).await, WorkflowStatus::Completed);
}

#[test]
fn runs_past_a_keys_limit_wait_their_turn_and_other_keys_run() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let template = holding("queue");
        let mut prod = Vec::new();
        for _ in 0..3 {
            prod.push(start(&exec, &template, "prod").await);
        }
        let staging = start(&exec, &template, "staging").await;
        until("the first of prod and staging start", async || {
            started(&exec, &prod[0]).await && started(&exec, &staging).await
        })
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!started(&exec, &prod[1]).await && !started(&exec, &prod[2]).await);
        go(&exec, &prod[0]).await;
        until("the second prod run starts", async || {
            started(&exec, &prod[1]).await
        })
        .await;
        assert!(!started(&exec, &prod[2]).await, "one at a time");
        go(&exec, &prod[1]).await;
        until("the third prod run starts", async || {
            started(&exec, &prod[2]).await
        })
        .await;
        go(&exec, &prod[2]).await;
        go(&exec, &staging).await;
    });
}

#[test]
fn refuse_newest_fails_the_run_past_the_limit_with_r0135() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let template = holding("refuse_newest");
        let first = start(&exec, &template, "prod").await;
        until("the first starts", async || started(&exec, &first).await).await;
        let second = start(&exec, &template, "prod").await;
        assert_eq!(ended(&exec, &second).await, WorkflowStatus::Failed);
        let row = exec.store().workflow(&second).await.unwrap().unwrap();
        let error: Value = serde_json::from_str(row.error.as_deref().unwrap()).unwrap();
        assert_eq!(error["code"], "R0135", "{error}");
        assert_eq!(error["details"]["limit"], 1, "{error}");
        assert!(
            !started(&exec, &second).await,
            "no step of the refused run ran"
        );
        go(&exec, &first).await;
    });
}

#[test]
fn cancel_running_cancels_the_oldest_holder_and_takes_its_slot() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let template = holding("cancel_running");
        let first = start(&exec, &template, "prod").await;
        until("the first starts", async || started(&exec, &first).await).await;
        let second = start(&exec, &template, "prod").await;
        assert_eq!(ended(&exec, &first).await, WorkflowStatus::Cancelled);
        let row = exec.store().workflow(&first).await.unwrap().unwrap();
        assert!(row.error.unwrap_or_default().contains("cancel_running"));
        until("the second starts", async || started(&exec, &second).await).await;
        go(&exec, &second).await;
    });
}

/// Runs `definition` as template `name` (its file beside it, so its runs
/// can start runs of it) with `{"depth": 0}`: it must complete.
fn completes_as_template(name: &str, definition: &Value) {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(format!("{name}.json")),
        definition.to_string(),
    )
    .unwrap();
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let mut root = request(definition, &json!({"depth": 0}));
        root.template_name = Some(name.into());
        let id = exec.start(root).await.unwrap();
        assert_eq!(ended(&exec, &id).await, WorkflowStatus::Completed);
    });
}

#[test]
fn a_child_of_a_holder_of_its_key_runs_in_its_ancestors_slot() {
    // Limit 1, and a run of it starts another run of it: without running in
    // its parent's slot, the child would wait for the parent, which waits
    // for the child.
    completes_as_template(
        "nest",
        &json!({
            "concurrency": {"limit": 1},
            "steps": [{"id": "again", "action": "workflow.run", "condition": "inputs.depth == 0",
                       "params": {"template_name": "nest", "params": {"depth": 1}}}]
        }),
    );
}

/// The same class through `workflow.map`: several children of a holder's
/// key, started at once, run in their ancestor's slot.
#[test]
fn mapped_children_of_a_holder_of_their_key_run_in_its_slot() {
    completes_as_template(
        "fan",
        &json!({
            "concurrency": {"limit": 1},
            "steps": [{"id": "each", "action": "workflow.map", "condition": "inputs.depth == 0",
                       "params": {"template_name": "fan", "items": [1, 2, 3],
                                  "params": {"depth": 1}}}]
        }),
    );
}

/// A run of another process, holding key `key`'s slot: created and
/// admitted in the store by hand, as that process would have.
async fn held_elsewhere(store: &Arc<MemoryStore>, id: &str, key: &str) {
    let at = opcode_runtime::time::rfc3339(opcode_runtime::time::now_ms());
    let create = Commit {
        workflow_id: id.into(),
        create: Some(NewWorkflow {
            id: id.into(),
            name: "elsewhere".into(),
            source: Source {
                hash: "h".into(),
                definition: "{}".into(),
                program: vec![1],
            },
            inputs: "{}".into(),
            created_at: at.clone(),
            ..NewWorkflow::default()
        }),
        update: Some(WorkflowUpdate {
            status: WorkflowStatus::Active,
            started_at: Some(at.clone()),
            updated_at: at.clone(),
            ..WorkflowUpdate::default()
        }),
        ..Commit::default()
    };
    store.commit(create).await.unwrap();
    let admission = Admission {
        key: key.into(),
        workflow_id: id.into(),
        limit: 1,
        turn: 0,
        wait: true,
        at,
    };
    assert_eq!(store.admit(admission).await.unwrap(), Admitted::Holds);
}

/// Issue 61: a process frees a slot, gives it to a run waiting on another
/// daemon, and is killed before telling it. The run, told by its inbox in
/// the promotion's own transaction, starts at its owner's next poll; told
/// by nobody, it waited for its own 30 s re-ask with the slot idle. On a
/// paused clock: "before 20 s" is virtual time, not the machine's speed.
#[test]
fn a_run_promoted_by_a_process_that_died_before_telling_it_starts_at_once() {
    opcode_runtime::time::use_virtual_clock();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    runtime.block_on(async {
        let exec = executor(&store, config(dir.path()));
        // The loop that polls inboxes (and promotes keys every 2 s).
        let _background = exec.background();
        let template = json!({
            "concurrency": {"key": "one", "limit": 1},
            "steps": [{"id": "work", "action": "workflow.log", "params": {"message": "ran"}}]
        });
        let mut ask = request(&template, &json!({}));
        ask.template_name = Some("t".into());
        let key = "t:one";
        held_elsewhere(&store, "holder", key).await;
        let waiting = exec.start(ask).await.unwrap();
        until("the run waits for the slot", async || {
            let standing = store.standing(&waiting).await.unwrap();
            matches!(standing, Some(s) if s.key == key && matches!(s.admitted, Admitted::Waits { .. }))
        })
        .await;
        // The other process: its run ends, it promotes, and dies.
        let at = opcode_runtime::time::rfc3339(opcode_runtime::time::now_ms());
        let end = Commit {
            workflow_id: "holder".into(),
            update: Some(WorkflowUpdate {
                status: WorkflowStatus::Completed,
                updated_at: at.clone(),
                completed_at: Some(at),
                ..WorkflowUpdate::default()
            }),
            ..Commit::default()
        };
        store.commit(end).await.unwrap();
        assert_eq!(store.promote(key).await.unwrap(), std::slice::from_ref(&waiting));
        let ended = tokio::time::timeout(Duration::from_secs(20), exec.wait(&waiting, Until::Ended));
        let ended = ended.await.expect("admitted before its 30 s re-ask");
        assert_eq!(ended.unwrap(), WorkflowStatus::Completed);
    });
}
