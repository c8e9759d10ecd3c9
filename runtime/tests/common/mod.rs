//! What the engine's tests share: an executor over the in-memory store,
//! compiled requests, a runtime.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use opcode_runtime::executor::Config;
use opcode_runtime::store::memory::MemoryStore;
use opcode_runtime::{EventStore, Executor, StartRequest};
use opcode_stdlib::exec::EnvSecrets;
use serde_json::Value;

/// A config polling fast, resolving paths in `base`.
pub fn config(base: &Path) -> Config {
    Config {
        poll: Duration::from_millis(20),
        base_dir: base.to_path_buf(),
        ..Config::default()
    }
}

/// An executor over `store`, secrets from the environment.
pub fn executor(store: &Arc<MemoryStore>, config: Config) -> Executor {
    let store: Arc<dyn EventStore> = store.clone();
    Executor::new(store, Arc::new(EnvSecrets), config)
}

/// A request to run `workflow` (compiled) with `inputs` (prepared).
pub fn request(workflow: &Value, inputs: &Value) -> StartRequest {
    let definition = workflow.to_string();
    let compiler = opcode_compiler::Compiler::new().with_actions(opcode_stdlib::catalog());
    let (program, diagnostics) = compiler.compile(&definition, "test.json");
    let program = program.unwrap_or_else(|| panic!("compiles: {diagnostics:?}"));
    let inputs = opcode_stdlib::inputs::prepare(&program, inputs).unwrap();
    StartRequest {
        definition,
        program: Some(program),
        inputs,
        ..StartRequest::default()
    }
}

/// A two-thread runtime.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}
