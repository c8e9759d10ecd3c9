//! `opcode.run` round trip over Streamable HTTP on loopback, from a Rust
//! MCP client (rmcp): a 1-step workflow defined once, then run `N` times,
//! one at a time; p50 and p99 per call. The daemon is the real router on
//! a real socket and a libSQL file (durability NORMAL). Run with
//! `cargo bench -p opcode-benches --bench mcp` (`-- quick` for fewer runs;
//! `-- url=http://127.0.0.1:4100/mcp` against a daemon already running);
//! the Python SDK figure comes from `tests/mcp/bench_run.py`. Results are
//! recorded in `benches/README.md`.
#![allow(clippy::expect_used, clippy::unwrap_used)] // bench setup

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use opcode_daemon::api::Api;
use opcode_daemon::serve::{self, Gate, Guard};
use opcode_runtime::executor::Config;
use opcode_runtime::store::libsql::LibsqlStore;
use opcode_runtime::{Durability, EventStore, Executor};
use opcode_stdlib::exec::EnvSecrets;
use rmcp::model::CallToolRequestParams;
use rmcp::model::ProtocolVersion;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt, ServiceExt};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use common::{bare_call, percentile};

/// The allocator the daemon uses.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn args(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => unreachable!("arguments are objects"),
    }
}

/// Prints the p50 and p99 of `times` after `label`.
fn report(label: &str, mut times: Vec<Duration>) {
    times.sort();
    println!(
        "{label:<72}  p50 {:.3} ms  p99 {:.3} ms",
        percentile(&times, 0.5).as_secs_f64() * 1000.0,
        percentile(&times, 0.99).as_secs_f64() * 1000.0
    );
}

/// The workflow every call runs, and the call's arguments.
fn one_step() -> (Value, Value) {
    let define = json!({"name": "one", "definition": {"steps": [
        {"id": "s", "action": "workflow.emit", "params": {"event_type": "tick"}}]}});
    (define, json!({"template_name": "one", "agent_id": "bench"}))
}

/// Against a daemon already running at `uri` (`opcode serve`, another
/// process): defines the workflow, then the calls over HTTP.
async fn against(uri: &str, runs: usize) {
    let (define, _) = one_step();
    let answer = bare_call(&reqwest::Client::new(), uri, "opcode.define", &define).await;
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    over_http(uri, runs).await;
}

async fn bench(runs: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store: Arc<dyn EventStore> =
        Arc::new(LibsqlStore::open(&dir.path().join("mcp.db"), Durability::Normal).expect("opens"));
    let exec = Executor::new(store, Arc::new(EnvSecrets), Config::default());
    let shutdown = CancellationToken::new();
    let guard = Gate::new(Guard::default());
    let api = Api::new(exec);
    let app = serve::router(api.clone(), None, guard, &shutdown, None);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(serve::without_delay(listener), app).await });

    let (define, run) = one_step();
    api.call("opcode.define", define).await.expect("defines");
    over_http(&format!("http://{addr}/mcp"), runs).await;
    // The same call in process, without HTTP and MCP: what the transport costs.
    let mut direct = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        api.call("opcode.run", run.clone()).await.expect("runs");
        direct.push(started.elapsed());
    }
    report("NORMAL opcode.run 1 step, in process (no HTTP)", direct);
    shutdown.cancel();
}

/// The calls over HTTP to `uri`, the workflow defined: rmcp's clients,
/// rmcp's floor, and a bare HTTP client.
async fn over_http(uri: &str, runs: usize) {
    let (_, arguments) = one_step();
    let run = CallToolRequestParams::new("opcode.run").with_arguments(args(arguments.clone()));
    // The stateless 2026-07-28 revision (server/discover, a JSON answer per
    // POST), then the 2025 one with a session (each answer an SSE stream);
    // each with rmcp's default HTTP client, which opens a connection per
    // request (its pool is off), and with a reqwest client that keeps them.
    let stateless = || ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    for (label, lifecycle, keep_alive) in [
        ("stateless 2026-07-28, default client", stateless(), false),
        (
            "session 2025-11-25, default client",
            ClientLifecycleMode::Initialize,
            false,
        ),
        ("stateless 2026-07-28, keep-alive", stateless(), true),
        (
            "session 2025-11-25, keep-alive",
            ClientLifecycleMode::Initialize,
            true,
        ),
    ] {
        let transport = if keep_alive {
            let http = reqwest::Client::builder().build().expect("client");
            StreamableHttpClientTransport::with_client(
                http,
                StreamableHttpClientTransportConfig::with_uri(uri),
            )
        } else {
            StreamableHttpClientTransport::from_uri(uri)
        };
        let client = ().serve_with_lifecycle(transport, lifecycle).await.expect("connects");
        for _ in 0..runs / 10 {
            client.call_tool(run.clone()).await.expect("runs");
        }
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let started = Instant::now();
            let result = client.call_tool(run.clone()).await.expect("runs");
            times.push(started.elapsed());
            assert_eq!(
                result.structured_content.as_ref().unwrap()["status"],
                "completed"
            );
        }
        report(
            &format!("NORMAL opcode.run 1 step over /mcp (rmcp, {label}, {runs} runs)"),
            times,
        );
        let _ = client.cancel().await;
    }
    let transport = StreamableHttpClientTransport::from_uri(uri);
    let client = ().serve(transport).await.expect("initializes");
    // A call that does almost nothing: what HTTP and MCP alone cost.
    let list = CallToolRequestParams::new("opcode.query")
        .with_arguments(args(json!({"resource": "schedules"})));
    let mut bare = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        client.call_tool(list.clone()).await.expect("queries");
        bare.push(started.elapsed());
    }
    report(
        "opcode.query of an empty list over /mcp (transport floor)",
        bare,
    );
    // The same calls from a bare HTTP client (JSON-RPC written by hand, the
    // stateless revision, a kept connection): the server without rmcp's client.
    let http = reqwest::Client::new();
    for (tool, arguments) in [
        ("opcode.query", json!({"resource": "schedules"})),
        ("opcode.run", arguments),
    ] {
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let started = Instant::now();
            let answer = bare_call(&http, uri, tool, &arguments).await;
            times.push(started.elapsed());
            assert_eq!(answer["result"]["isError"], false, "{answer}");
        }
        report(
            &format!("{tool} over /mcp, bare HTTP client (stateless JSON-RPC)"),
            times,
        );
    }
    let _ = client.cancel().await;
}

fn main() {
    opcode_daemon::allocator::return_freed_memory();
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        return;
    }
    let quick = args.iter().any(|a| a == "quick");
    let runs = if quick { 200 } else { 2000 };
    let daemon = args.iter().find_map(|a| a.strip_prefix("url="));
    // reqwest is built without a default TLS provider (as in the stdlib).
    let _ = rustls::crypto::ring::default_provider().install_default();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            match daemon {
                Some(uri) => against(uri, runs).await,
                None => bench(runs).await,
            }
        });
}
