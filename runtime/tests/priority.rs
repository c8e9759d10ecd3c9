//! Worker slots go by run priority (spec/flow-control.md, "Priority and
//! fairness"): with the one slot busy, the call of a run at priority 0
//! goes before those of runs at the default 5 that came first, made by a
//! child run (which would come last at 5: children inherit priority).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{config, executor, request, runtime};
use opcode_runtime::store::memory::MemoryStore;
use opcode_runtime::store::{Catalog, TemplateDraft, WorkflowStatus};
use opcode_runtime::{Executor, Until};
use serde_json::{Value, json};

fn shell(command: &str) -> Value {
    json!({"steps": [{"id": "s", "action": "shell.exec", "params": {"command": command, "shell": true}}]})
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what} did not happen within 10 s");
}

async fn start(exec: &Executor, workflow: &Value, priority: Option<u8>) -> String {
    let mut start = request(workflow, &json!({}));
    start.priority = priority;
    exec.start(start).await.unwrap()
}

fn ledger(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("ledger"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_freed_slot_goes_to_the_most_urgent_call_and_children_inherit_it() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let mut settings = config(dir.path());
    settings.max_actions = 1;
    let base = dir.path().to_path_buf();
    runtime().block_on(async {
        // The urgent run's work is a child run of a stored template.
        let draft = TemplateDraft {
            name: "note-urgent".into(),
            definition: shell("echo urgent >> ledger").to_string(),
            triggers: "{}".into(),
            ..TemplateDraft::default()
        };
        store.define_template(draft).await.unwrap();
        let exec = executor(&store, settings);
        let holder = shell("touch holding; while [ ! -f go ]; do sleep 0.02; done");
        let held = start(&exec, &holder, None).await;
        until("the slot taken", || base.join("holding").exists()).await;
        let mut ids = vec![held];
        for n in 1..=3 {
            let note = shell(&format!("echo batch-{n} >> ledger"));
            ids.push(start(&exec, &note, None).await);
            until("the batch call queued", || exec.calls_waiting() == n).await;
        }
        let parent = json!({"steps": [{"id": "kid", "action": "workflow.run",
                                       "params": {"template_name": "note-urgent"}}]});
        ids.push(start(&exec, &parent, Some(0)).await);
        until("the child's call queued", || exec.calls_waiting() == 4).await;
        std::fs::write(base.join("go"), "").unwrap();
        for id in &ids {
            let status = exec.wait(id, Until::Ended).await.unwrap();
            assert_eq!(status, WorkflowStatus::Completed, "{id}");
        }
        assert_eq!(ledger(&base), ["urgent", "batch-1", "batch-2", "batch-3"]);
        assert_eq!(exec.calls_waiting(), 0);
    });
}
