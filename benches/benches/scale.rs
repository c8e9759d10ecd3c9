//! Several daemons on one PostgreSQL (spec/scale-out.md): the release
//! `opcode serve` started 1, 2 and 3 times on a throw-away cluster
//! (`tests/postgres/cluster`, PostgreSQL's default fsync'd durability),
//! driven over Streamable HTTP with keep-alive clients. Each step is
//! `fs.stat` of a tiny file, an effect checkpointed in a commit of its
//! own, as the peers' steps are. Figures: seq10 and fan100 p50 / p99 from
//! one client on the first daemon, and seq10 steps/s with 16 clients
//! spread over the daemons. Run with `cargo build --release -p
//! opcode-daemon --bin opcode && cargo bench -p opcode-benches --bench
//! scale` (`-- quick` for fewer runs); results are in `benches/README.md`.
#![allow(clippy::expect_used, clippy::unwrap_used)] // bench setup

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::{bare_call, percentile};

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the benches sit in the workspace")
        .to_path_buf()
}

/// A throw-away cluster; stopped when dropped.
struct Cluster {
    dir: tempfile::TempDir,
    url: String,
}

impl Cluster {
    fn start() -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let script = root().join("tests/postgres/cluster");
        let out = Command::new(&script)
            .args(["start", dir.path().to_str().unwrap()])
            .output()
            .expect("runs tests/postgres/cluster");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        Cluster { dir, url }
    }

    /// A new database's URL.
    fn database(&self, name: &str) -> String {
        let made = Command::new("psql")
            .args([self.url.as_str(), "-qc", &format!("CREATE DATABASE {name}")])
            .status()
            .expect("psql runs");
        assert!(made.success());
        format!("{}/{name}", self.url.rsplit_once('/').unwrap().0)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(root().join("tests/postgres/cluster"))
            .args(["stop", self.dir.path().to_str().unwrap()])
            .status();
    }
}

/// A daemon; killed when dropped.
struct Daemon {
    child: Child,
    uri: String,
}

impl Daemon {
    /// `opcode serve` on `db`, with `home` as its HOME (the daemons share
    /// one, where the file their steps read is).
    fn start(binary: &Path, db: &str, home: &Path) -> Daemon {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::fs::File::create(home.join(format!("daemon-{port}.log"))).unwrap();
        let child = Command::new(binary)
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--db",
                db,
            ])
            .env("HOME", home)
            .stderr(log)
            .spawn()
            .expect("starts opcode");
        let daemon = Daemon {
            child,
            uri: format!("http://127.0.0.1:{port}/mcp"),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the daemon did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        daemon
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `n` `fs.stat` steps of `tiny`, chained or side by side.
fn stats(n: usize, chained: bool, tiny: &Path) -> Value {
    let steps: Vec<Value> = (0..n)
        .map(|i| {
            let mut step = json!({"id": format!("s{i}"), "action": "fs.stat",
                "params": {"path": tiny.display().to_string()}});
            if chained && i > 0 {
                step["depends_on"] = json!([format!("s{}", i - 1)]);
            }
            step
        })
        .collect();
    json!({"steps": steps})
}

/// One `opcode.run` that waits, checked.
async fn run(http: &reqwest::Client, uri: &str, template: &str) -> Duration {
    let started = Instant::now();
    let answer = bare_call(http, uri, "opcode.run", &json!({"template_name": template})).await;
    let status = &answer["result"]["structuredContent"]["status"];
    assert_eq!(status, "completed", "{answer}");
    started.elapsed()
}

async fn latency(uri: &str, template: &str, runs: usize) -> (Duration, Duration) {
    let http = reqwest::Client::new();
    for _ in 0..runs / 10 {
        run(&http, uri, template).await;
    }
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        times.push(run(&http, uri, template).await);
    }
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.99))
}

/// seq10 steps per second, `clients` clients spread over `uris`.
async fn throughput(uris: &[String], clients: usize, for_how_long: Duration) -> f64 {
    let deadline = Instant::now() + for_how_long;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let uri = uris[c % uris.len()].clone();
        tasks.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            let mut steps = 0u64;
            while Instant::now() < deadline {
                run(&http, &uri, "seq10").await;
                steps += 10;
            }
            steps
        }));
    }
    let mut steps = 0;
    for task in tasks {
        steps += task.await.expect("client");
    }
    steps as f64 / started.elapsed().as_secs_f64()
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

async fn bench(binary: &Path, quick: bool) {
    let cluster = Cluster::start();
    let home = tempfile::tempdir().expect("temp dir");
    let tiny = home.path().join("tiny.txt");
    std::fs::write(&tiny, "x").unwrap();
    // Steps may read the file beside their workspaces.
    let settings = json!({"isolation": {"fs": {"read": [home.path()]}}});
    std::fs::create_dir_all(home.path().join(".opcode")).unwrap();
    std::fs::write(
        home.path().join(".opcode/settings.json"),
        settings.to_string(),
    )
    .unwrap();
    let runs = if quick { 50 } else { 200 };
    let secs = Duration::from_secs(if quick { 2 } else { 5 });
    for daemons in 1..=3 {
        let db = cluster.database(&format!("scale{daemons}"));
        let running: Vec<Daemon> = (0..daemons)
            .map(|_| Daemon::start(binary, &db, home.path()))
            .collect();
        let uris: Vec<String> = running.iter().map(|d| d.uri.clone()).collect();
        let http = reqwest::Client::new();
        for (name, workflow) in [
            ("seq10", stats(10, true, &tiny)),
            ("fan100", stats(100, false, &tiny)),
        ] {
            let answer = bare_call(
                &http,
                &uris[0],
                "opcode.define",
                &json!({"name": name, "definition": workflow}),
            )
            .await;
            assert_eq!(answer["result"]["isError"], false, "{answer}");
        }
        for name in ["seq10", "fan100"] {
            let (p50, p99) = latency(&uris[0], name, runs).await;
            println!(
                "{daemons} daemon(s)  {name:<8} p50 {:>10}   p99 {:>10}",
                ms(p50),
                ms(p99)
            );
        }
        let rate = throughput(&uris, 16, secs).await;
        println!("{daemons} daemon(s)  16 clients seq10 {rate:>8.0} steps/s");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `cargo bench` passes `--bench`; a test run (`cargo test --benches`) does not.
    if !args.iter().any(|a| a == "--bench") {
        return;
    }
    let quick = args.iter().any(|a| a == "quick");
    // reqwest is built without a TLS provider of its own.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let binary = std::env::var_os("OPCODE_BIN")
        .map_or_else(|| root().join("target/release/opcode"), PathBuf::from);
    assert!(
        binary.exists(),
        "{} is missing: cargo build --release -p opcode-daemon --bin opcode",
        binary.display()
    );
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(bench(&binary, quick));
}
