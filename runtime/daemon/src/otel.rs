//! Optional OpenTelemetry traces (spec/panel.md): a span per run and per
//! step attempt, built from the event log as it is appended and exported
//! over OTLP/HTTP (JSON) to `{endpoint}/v1/traces`.

pub mod spans;

use std::time::Duration;

use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanExporter as _};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use self::spans::{Tracker, run_span};
use opcode_runtime::Executor;

/// How long finished spans wait to be sent together.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// Spans sent in one request at most.
const BATCH: usize = 512;

/// Starts exporting the spans of `exec`'s runs to the OTLP/HTTP collector
/// at `endpoint` (such as `http://localhost:4318`), until `stop`.
pub fn start(exec: &Executor, endpoint: &str, stop: CancellationToken) -> Result<(), String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| format!("cannot build the OTLP client: {e}"))?;
    let mut exporter = SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(Protocol::HttpJson)
        .with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
        .build()
        .map_err(|e| format!("cannot export traces to {endpoint}: {e}"))?;
    exporter.set_resource(&Resource::builder().with_service_name("opcode").build());
    tokio::spawn(export(exec.clone(), exporter, stop));
    Ok(())
}

async fn export(exec: Executor, exporter: SpanExporter, stop: CancellationToken) {
    let mut feed = exec.appended();
    let mut tracker = Tracker::default();
    let mut pending: Vec<SpanData> = Vec::new();
    let mut tick = tokio::time::interval(FLUSH_EVERY);
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = tick.tick() => flush(&exporter, &mut pending).await,
            appended = feed.recv() => match appended {
                Ok(appended) => {
                    let (spans, end) = tracker.entries(&appended.workflow_id, &appended.entries);
                    pending.extend(spans);
                    if let Some(end) = end
                        && let Ok(Some(row)) = exec.store().workflow(&appended.workflow_id).await
                    {
                        pending.push(run_span(&row, &end));
                    }
                    if pending.len() >= BATCH {
                        flush(&exporter, &mut pending).await;
                    }
                }
                Err(RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "traces: fell behind the event log; some spans are lost");
                }
                Err(RecvError::Closed) => break,
            },
        }
    }
    flush(&exporter, &mut pending).await;
}

async fn flush(exporter: &SpanExporter, pending: &mut Vec<SpanData>) {
    if pending.is_empty() {
        return;
    }
    let batch = std::mem::take(pending);
    let count = batch.len();
    if let Err(e) = exporter.export(batch).await {
        tracing::warn!(error = %e, spans = count, "traces: export failed; spans dropped");
    }
}
