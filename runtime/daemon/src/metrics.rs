//! Prometheus metrics (`GET /metrics`, spec/panel.md): counters the executor
//! and the scheduler bump as things happen, and gauges read from the
//! database at each scrape.

use prometheus::core::Collector;
use prometheus::{
    Encoder, Gauge, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};
use serde_json::Value;

use opcode_runtime::executor::Observer;
use opcode_runtime::store::{
    DecisionStatus, EntryKind, EventName, EventStore, StoreError, WorkflowStatus,
};

/// Seconds an action call took: 1 ms to 5 minutes.
const ACTION_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0, 300.0,
];

/// A panel stream counted as open while this lives.
#[derive(Debug)]
pub struct OpenStream(IntGauge);

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The daemon's metrics.
pub struct Metrics {
    registry: Registry,
    actions: IntCounterVec,
    action_seconds: HistogramVec,
    events: IntCounterVec,
    finished: IntCounterVec,
    settled: IntCounterVec,
    fires: IntCounterVec,
    workflows: IntGaugeVec,
    decisions_pending: IntGauge,
    plugin_up: IntGaugeVec,
    sign_in: IntCounterVec,
    runnable: IntGauge,
    timers_due: IntGauge,
    oldest_runnable: Gauge,
    leases: IntGaugeVec,
    calls_waiting: IntGauge,
    queue_depth: IntGaugeVec,
    queue_wait: HistogramVec,
    rate_limited: IntCounterVec,
    panel_streams: IntGauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

fn counter(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).unwrap_or_else(|e| unreachable!("{e}"))
}

fn int_gauge(name: &str, help: &str) -> IntGauge {
    IntGauge::new(name, help).unwrap_or_else(|e| unreachable!("{e}"))
}

fn gauge(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    IntGaugeVec::new(Opts::new(name, help), labels).unwrap_or_else(|e| unreachable!("{e}"))
}

impl Metrics {
    /// Fresh metrics (counters at zero), with the process collector.
    pub fn new() -> Metrics {
        let metrics = Metrics {
            registry: Registry::new(),
            actions: counter(
                "opcode_actions_total",
                "Action calls, by action and outcome.",
                &["action", "outcome"],
            ),
            action_seconds: HistogramVec::new(
                HistogramOpts::new(
                    "opcode_action_duration_seconds",
                    "How long action calls took.",
                )
                .buckets(ACTION_BUCKETS.to_vec()),
                &["action"],
            )
            .unwrap_or_else(|e| unreachable!("{e}")),
            events: counter(
                "opcode_events_appended_total",
                "Event log entries appended, by kind.",
                &["kind"],
            ),
            finished: counter(
                "opcode_workflows_finished_total",
                "Workflows that ended, by final status.",
                &["status"],
            ),
            settled: counter(
                "opcode_decisions_settled_total",
                "Decisions resolved or cancelled.",
                &["how"],
            ),
            fires: counter(
                "opcode_scheduler_fires_total",
                "Scheduled jobs fired, by whether the run started.",
                &["outcome"],
            ),
            workflows: gauge("opcode_workflows", "Workflows by status.", &["status"]),
            decisions_pending: int_gauge(
                "opcode_decisions_pending",
                "Decisions waiting for an answer.",
            ),
            plugin_up: gauge(
                "opcode_plugin_up",
                "1 when the plugin's MCP server answers, else 0.",
                &["plugin"],
            ),
            sign_in: counter(
                "opcode_token_refusals_total",
                "Requests refused for their token: a wrong one, or one sent too soon after wrong ones.",
                &["reason"],
            ),
            runnable: int_gauge(
                "opcode_runnable_runs",
                "Runs pending or active that no live lease holds: work waiting for a daemon.",
            ),
            timers_due: int_gauge("opcode_timers_due", "Durable timers due and not yet fired."),
            oldest_runnable: Gauge::new(
                "opcode_oldest_runnable_seconds",
                "How long the oldest runnable run or due timer has waited.",
            )
            .unwrap_or_else(|e| unreachable!("{e}")),
            calls_waiting: int_gauge(
                "opcode_calls_waiting",
                "Action calls waiting for a worker slot (given out by run priority, then age).",
            ),
            queue_wait: HistogramVec::new(
                HistogramOpts::new(
                    "opcode_queue_wait_seconds",
                    "How long runs waited for a slot of their concurrency key, by key.",
                )
                .buckets(vec![0.1, 1.0, 10.0, 60.0, 600.0, 3600.0]),
                &["key"],
            )
            .unwrap_or_else(|e| unreachable!("{e}")),
            rate_limited: counter(
                "opcode_rate_limited_total",
                "Calls not made because their rate limit's window was full (each waits for the next), by key.",
                &["key"],
            ),
            queue_depth: gauge(
                "opcode_queue_depth",
                "Runs waiting for a slot of their concurrency key, by key.",
                &["key"],
            ),
            panel_streams: int_gauge(
                "opcode_panel_streams",
                "Open live streams of panel pages (`/panel/live`): one a browser, however many pages it shows.",
            ),
            leases: gauge(
                "opcode_leases_held",
                "Live run leases, by owning process (host:pid:start).",
                &["owner"],
            ),
        };
        let collectors: Vec<Box<dyn Collector>> = vec![
            Box::new(metrics.actions.clone()),
            Box::new(metrics.action_seconds.clone()),
            Box::new(metrics.events.clone()),
            Box::new(metrics.finished.clone()),
            Box::new(metrics.settled.clone()),
            Box::new(metrics.fires.clone()),
            Box::new(metrics.workflows.clone()),
            Box::new(metrics.decisions_pending.clone()),
            Box::new(metrics.plugin_up.clone()),
            Box::new(metrics.sign_in.clone()),
            Box::new(metrics.runnable.clone()),
            Box::new(metrics.timers_due.clone()),
            Box::new(metrics.oldest_runnable.clone()),
            Box::new(metrics.leases.clone()),
            Box::new(metrics.calls_waiting.clone()),
            Box::new(metrics.queue_depth.clone()),
            Box::new(metrics.rate_limited.clone()),
            Box::new(metrics.queue_wait.clone()),
            Box::new(metrics.panel_streams.clone()),
            Box::new(prometheus::process_collector::ProcessCollector::for_self()),
        ];
        for collector in collectors {
            // Names are distinct constants: registering cannot collide.
            let _ = metrics.registry.register(collector);
        }
        metrics
    }

    /// Adds `collector` to what `/metrics` shows (names must be unique).
    pub fn register(&self, collector: Box<dyn Collector>) {
        if let Err(e) = self.registry.register(collector) {
            tracing::warn!(error = %e, "a metric was not registered");
        }
    }

    /// Counts a live stream of the panel open until the guard is dropped.
    pub fn panel_stream(&self) -> OpenStream {
        self.panel_streams.inc();
        OpenStream(self.panel_streams.clone())
    }

    fn finish(&self, status: &str) {
        self.finished.with_label_values(&[status]).inc();
    }

    /// How many action calls wait for a worker slot now.
    pub fn calls_waiting(&self, count: usize) {
        self.calls_waiting.set(count as i64);
    }

    /// A request was refused for its token (`wrong_token`, `throttled`).
    pub fn sign_in(&self, reason: &str) {
        self.sign_in.with_label_values(&[reason]).inc();
    }

    /// The scheduler fired a job; `started` says whether its run started.
    pub fn fired(&self, started: bool) {
        let outcome = if started { "started" } else { "failed" };
        self.fires.with_label_values(&[outcome]).inc();
    }

    /// The text exposition, after reading the gauges from `store` and the
    /// plugins' `report` (objects with `name` and `status`).
    pub async fn render(
        &self,
        store: &dyn EventStore,
        plugins: &[Value],
    ) -> Result<String, StoreError> {
        let counts = store.workflow_counts().await?;
        let pending = store
            .decisions(None, Some(DecisionStatus::Pending))
            .await?
            .len();
        self.workflows.reset();
        for status in WorkflowStatus::ALL {
            let count = counts.iter().find(|(s, _)| *s == status).map_or(0, |c| c.1);
            self.workflows
                .with_label_values(&[status.as_str()])
                .set(count as i64);
        }
        self.decisions_pending.set(pending as i64);
        let backlog = store.backlog().await?;
        self.runnable.set(backlog.runnable as i64);
        self.timers_due.set(backlog.timers_due as i64);
        self.oldest_runnable.set(backlog.oldest_seconds);
        self.leases.reset();
        for (owner, count) in &backlog.leases {
            self.leases.with_label_values(&[owner]).set(*count as i64);
        }
        self.queue_depth.reset();
        for (key, waiting) in store.waiting().await? {
            self.queue_depth
                .with_label_values(&[&key])
                .set(waiting as i64);
        }
        self.plugin_up.reset();
        for plugin in plugins {
            let name = plugin.get("name").and_then(Value::as_str).unwrap_or("?");
            let up = plugin.get("status").and_then(Value::as_str) == Some("up");
            self.plugin_up.with_label_values(&[name]).set(i64::from(up));
        }
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .map_err(|e| StoreError::Backend(format!("cannot encode metrics: {e}")))?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// The content type of [`Metrics::render`]'s text.
    pub fn content_type() -> &'static str {
        prometheus::TEXT_FORMAT
    }
}

impl Observer for Metrics {
    fn action_ended(&self, action: &str, ok: bool, seconds: f64) {
        let outcome = if ok { "ok" } else { "error" };
        self.actions.with_label_values(&[action, outcome]).inc();
        self.action_seconds
            .with_label_values(&[action])
            .observe(seconds);
    }

    fn throttled(&self, key: &str) {
        self.rate_limited.with_label_values(&[key]).inc();
    }

    fn admitted(&self, key: &str, seconds: f64) {
        self.queue_wait.with_label_values(&[key]).observe(seconds);
    }

    fn appended(&self, entries: &[(EntryKind, Option<EventName>)]) {
        for &(kind, name) in entries {
            self.events.with_label_values(&[kind.as_str()]).inc();
            let Some(name) = name else {
                continue;
            };
            match (kind, name) {
                (EntryKind::Record, EventName::WorkflowCompleted) => self.finish("completed"),
                (EntryKind::Record, EventName::WorkflowFailed) => self.finish("failed"),
                (EntryKind::Record, EventName::WorkflowCancelled) => self.finish("cancelled"),
                (EntryKind::Input, EventName::DecisionResolved) => {
                    self.settled.with_label_values(&["resolved"]).inc();
                }
                (EntryKind::Input, EventName::DecisionCancelled) => {
                    self.settled.with_label_values(&["cancelled"]).inc();
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opcode_runtime::store::memory::MemoryStore;

    #[tokio::test]
    async fn counts_what_happened_and_reads_gauges() {
        let metrics = Metrics::new();
        metrics.action_ended("http.get", true, 0.003);
        metrics.action_ended("http.get", false, 0.2);
        metrics.appended(&[
            (EntryKind::Input, Some(EventName::DecisionResolved)),
            (EntryKind::Record, Some(EventName::WorkflowCompleted)),
        ]);
        metrics.fired(true);
        metrics.throttled("host:https://api.github.com");
        metrics.admitted("deploy:prod", 2.5);
        let plugins = [serde_json::json!({"name": "files", "status": "down"})];
        let store = MemoryStore::default();
        // A run nobody holds, waiting for a daemon.
        let orphan = opcode_runtime::store::Commit {
            workflow_id: "w".into(),
            create: Some(opcode_runtime::store::NewWorkflow {
                id: "w".into(),
                created_at: "2026-01-01T00:00:00.000Z".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        opcode_runtime::store::RunLog::commit(&store, orphan)
            .await
            .unwrap();
        let text = metrics.render(&store, &plugins).await.unwrap();
        for line in [
            "opcode_actions_total{action=\"http.get\",outcome=\"ok\"} 1",
            "opcode_actions_total{action=\"http.get\",outcome=\"error\"} 1",
            "opcode_action_duration_seconds_count{action=\"http.get\"} 2",
            "opcode_events_appended_total{kind=\"input\"} 1",
            "opcode_workflows_finished_total{status=\"completed\"} 1",
            "opcode_decisions_settled_total{how=\"resolved\"} 1",
            "opcode_scheduler_fires_total{outcome=\"started\"} 1",
            "opcode_rate_limited_total{key=\"host:https://api.github.com\"} 1",
            "opcode_queue_wait_seconds_count{key=\"deploy:prod\"} 1",
            "opcode_workflows{status=\"active\"} 0",
            "opcode_runnable_runs 1",
            "opcode_timers_due 0",
            "opcode_decisions_pending 0",
            "opcode_plugin_up{plugin=\"files\"} 0",
        ] {
            assert!(text.contains(line), "missing `{line}` in\n{text}");
        }
    }
}
