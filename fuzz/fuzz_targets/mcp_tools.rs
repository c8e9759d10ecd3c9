//! Each MCP tool's arguments as an agent may send them: the first byte picks
//! the tool, the rest is the JSON of its arguments. Against a fresh store
//! holding one template and one suspended run of it, every call answers, a
//! result or a coded error, within seconds, and never panics.
#![no_main]

use std::sync::Arc;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use opcode_runtime::Executor;
use opcode_daemon::api::Api;
use opcode_runtime::executor::Config;
use opcode_runtime::store::EventStore;
use opcode_runtime::store::memory::MemoryStore;
use opcode_stdlib::exec::EnvSecrets;
use serde_json::{Value, json};

const TOOLS: [&str; 6] = [
    "opcode.define",
    "opcode.run",
    "opcode.status",
    "opcode.signal",
    "opcode.query",
    "opcode.diagram",
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(args) = serde_json::from_slice::<Value>(rest) else {
        return;
    };
    let tool = TOOLS[usize::from(pick) % TOOLS.len()];
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let api = seeded().await;
        let answered = tokio::time::timeout(Duration::from_secs(10), api.call(tool, args)).await;
        let result = answered.expect("every call answers");
        if let Err(error) = result {
            assert!(error.code.id.starts_with('R'), "{tool}: {}", error.to_json());
        }
    });
});

/// A store with the template `review` and one run of it waiting for a decision.
async fn seeded() -> Api {
    let store: Arc<dyn EventStore> = Arc::new(MemoryStore::new());
    let api = Api::new(Executor::new(store, Arc::new(EnvSecrets), Config::default()));
    let review = json!({
        "name": "review",
        "input_schema": {"type": "object", "properties": {"who": {"type": "string", "default": "world"}}},
        "definition": {"steps": [
            {"id": "greet", "action": "workflow.log", "params": {"message": "hi ${{inputs.who}}"}},
            {"id": "approve", "type": "reasoning", "depends_on": ["greet"], "config": {
                "prompt_context": "Ship it?",
                "options": [{"id": "yes", "description": "ship"}, {"id": "no", "description": "stop"}]}}
        ]}
    });
    api.call("opcode.define", review).await.expect("the template");
    api.call("opcode.run", json!({"template_name": "review", "agent_id": "fuzz"}))
        .await
        .expect("a suspended run");
    api
}
