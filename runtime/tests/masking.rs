//! A secret split across steps and joined again where the VM joins values
//! (the workflow `output`, a reasoning step's `prompt_context`, the context
//! a step updates) is masked in everything the run writes (spec/security.md, "Secrets and the store").
#![allow(clippy::unwrap_used, clippy::expect_used)]

// Shared helpers; this file needs an executor with secrets of its own.
#[allow(dead_code)]
mod common;

use std::sync::Arc;

use common::{config, request, runtime};
use opcode_runtime::store::memory::MemoryStore;
use opcode_runtime::store::{DecisionStatus, RunLog};
use opcode_runtime::{EventStore, Executor, Until};
use opcode_stdlib::exec::{BoxFuture, Secrets};
use serde_json::json;

const SECRET: &str = "sk-live-0123456789abcdefXYZ";

/// One secret, `KEY`.
struct Fixed;

impl Secrets for Fixed {
    fn secret<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(std::future::ready(
            (name == "KEY").then(|| SECRET.to_owned()),
        ))
    }
}

/// Two steps each giving half of the secret.
fn halves() -> Vec<serde_json::Value> {
    vec![
        json!({"id": "front", "action": "json.jq", "params": {"filter": ".[0:12]", "data": "${{secrets.KEY}}"}}),
        json!({"id": "back", "action": "json.jq", "params": {"filter": ".[12:]", "data": "${{secrets.KEY}}"}}),
    ]
}

#[test]
fn a_secret_rejoined_in_the_output_or_a_prompt_is_masked_where_it_is_written() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let mut steps = halves();
    // Another place the VM joins values: the context a step updates.
    steps.push(json!({"id": "keep", "action": "workflow.context", "depends_on": ["front", "back"],
        "params": {"action": "update", "data": {"key": "${{steps.front.result}}${{steps.back.result}}"}}}));
    steps.push(
        json!({"id": "ask", "type": "reasoning", "depends_on": ["front", "back"], "config": {
        "prompt_context": "key ${{steps.front.result}}${{steps.back.result}}",
        "options": [{"id": "ok"}]}}),
    );
    let workflow = json!({"steps": steps,
        "output": {"joined": "${{steps.front.result}}${{steps.back.result}}"}});
    runtime().block_on(async {
        let dyn_store: Arc<dyn EventStore> = store.clone();
        let exec = Executor::new(dyn_store, Arc::new(Fixed), config(dir.path()));
        let id = exec.start(request(&workflow, &json!({}))).await.unwrap();
        exec.wait(&id, Until::Settled).await.unwrap();
        let pending = store
            .decisions(Some(&id), Some(DecisionStatus::Pending))
            .await
            .unwrap();
        assert_eq!(pending.len(), 1);
        let asked = format!("{} {}", pending[0].prompt, pending[0].context);
        assert!(
            !asked.contains(SECRET),
            "the prompt shows the secret: {asked}"
        );
        exec.deliver(
            &id,
            opcode_vm::event::Event::DecisionResolved {
                decision: pending[0].id.clone(),
                resolution: opcode_vm::event::Resolution {
                    choice: "ok".into(),
                    reasoning: None,
                    data: None,
                    resolved_by: None,
                },
            },
        )
        .await
        .unwrap();
        assert_eq!(
            exec.wait(&id, Until::Ended).await.unwrap().as_str(),
            "completed"
        );
        let row = store.workflow(&id).await.unwrap().unwrap();
        let context = row.context.clone().unwrap_or_default();
        assert!(
            context.contains("key") && !context.contains(SECRET),
            "{context}"
        );
        let output = row.output.unwrap_or_default();
        assert!(
            !output.contains(SECRET),
            "the output shows the secret: {output}"
        );
        assert!(output.contains("joined"), "{output}");
        let log = store.entries(&id, 0, false).await.unwrap();
        for entry in log {
            assert!(
                !entry.payload.contains(SECRET),
                "{}: {}",
                entry.event_type,
                entry.payload
            );
        }
        // Each half alone is not the secret: it is kept as it is.
        let steps = store.steps(&id).await.unwrap();
        let front = steps.iter().find(|s| s.step_id == "front").unwrap();
        assert!(
            front
                .output
                .as_deref()
                .unwrap_or_default()
                .contains(&SECRET[..12])
        );
    });
}
