//! AG-UI 1.0 run streams (spec/panel.md): `GET /api/runs/{id}/ag-ui`
//! follows a workflow to its next stop; `POST` takes a `RunAgentInput`, as
//! `HttpAgent` sends it, whose `resume` entries answer the interrupts
//! (decisions) before following. The log is read from the store; the
//! executor's feed only says when to read again.

mod agent;
pub mod map;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use self::agent::AgentStream;
use self::map::{Mapper, Stop, stop_of, stop_of_row};
use crate::api::{Api, ToolError};
use opcode_runtime::executor::Emitted;
use opcode_runtime::store::{EntryKind, EventName, EventStore, LogEntry};

/// How often a stream re-reads the log when no change was announced (a
/// workflow another process drives announces nothing here).
const POLL: Duration = Duration::from_secs(1);

/// Entries of the log's tail a stream reads at its start (for steps whose
/// rows lag the log).
const TAIL: u64 = 64;

/// The part of a `RunAgentInput` this endpoint reads.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunInput {
    thread_id: Option<String>,
    run_id: Option<String>,
    #[serde(default)]
    resume: Vec<ResumeEntry>,
}

/// An answer to an interrupt.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResumeEntry {
    interrupt_id: String,
    status: String,
    #[serde(default)]
    payload: Value,
}

/// `GET /api/runs/{id}/ag-ui`.
pub async fn observe(State(api): State<Api>, Path(id): Path<String>) -> Response {
    stream(api, id, RunInput::default()).await
}

/// `POST /api/runs/{id}/ag-ui`.
pub async fn run(
    State(api): State<Api>,
    Path(id): Path<String>,
    Json(input): Json<RunInput>,
) -> Response {
    if input.thread_id.as_deref().is_some_and(|t| t != id) {
        let message = format!("threadId must be the workflow id `{id}`");
        return (StatusCode::BAD_REQUEST, Json(json!({"error": message}))).into_response();
    }
    stream(api, id, input).await
}

async fn stream(api: Api, id: String, input: RunInput) -> Response {
    let row = match api.executor().store().workflow(&id).await {
        Ok(Some(row)) => row,
        Ok(None) => {
            let message = format!("workflow `{id}` not found");
            return (StatusCode::NOT_FOUND, Json(json!({"error": message}))).into_response();
        }
        Err(e) => {
            let message = e.to_string();
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({"error": message})),
            )
                .into_response();
        }
    };
    let run_id = input
        .run_id
        .clone()
        .unwrap_or_else(|| format!("{id}@{}", row.last_seq));
    let (tx, rx) = mpsc::channel::<Value>(64);
    tokio::spawn(async move {
        // A stop ends the stream with R0134: the run carries on at the
        // next start, where the client can follow it again.
        let followed = api.unless_stopping(&id, follow(&api, &id, &run_id, input.resume, &tx));
        if let Err(e) = followed.await {
            let _ = tx
                .send(json!({"type": "RUN_ERROR", "message": e.message, "code": e.code.id}))
                .await;
        }
    });
    Sse::new(frames(rx))
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn frames(rx: mpsc::Receiver<Value>) -> impl Stream<Item = Result<Event, Infallible>> {
    futures::stream::unfold(rx, |mut rx| async move {
        let event = rx.recv().await?;
        Some((Ok(Event::default().data(event.to_string())), rx))
    })
}

/// Streams one AG-UI run of workflow `id` into `tx`.
async fn follow(
    api: &Api,
    id: &str,
    run_id: &str,
    resume: Vec<ResumeEntry>,
    tx: &mpsc::Sender<Value>,
) -> Result<(), ToolError> {
    let store = api.executor().store().clone();
    let mut feed = api.executor().appended();
    let mut live = api.executor().emitted();
    let mut agents = AgentStream::default();
    let mut pending: Vec<Emitted> = Vec::new();
    let row = store
        .workflow(id)
        .await?
        .ok_or_else(|| ToolError::new(opcode_vm::codes::R0121, "workflow vanished"))?;
    let steps = store.steps(id).await?;
    let (mut mapper, events) = Mapper::start(id, run_id, &row, &steps);
    send(tx, events).await;
    let mut last_seq = row.last_seq;
    // Step rows may lag the log by 50 ms (decision 0042): a step the log's
    // tail starts and does not end is running too.
    let tail = store
        .entries(id, last_seq.saturating_sub(TAIL), false)
        .await?;
    for step in started_in(&tail, last_seq) {
        send(tx, mapper.open(&step)).await;
    }
    // A run waiting for a slot of its concurrency key says so once; its
    // steps follow when it is admitted (spec/flow-control.md).
    if let Some(queue) = crate::api::view::queue(store.as_ref(), &row, &steps).await? {
        let queued = json!({"type": "CUSTOM", "name": "opcode.queued", "value": queue});
        send(tx, vec![queued]).await;
    }
    // The answers are given while the stream follows what they cause: the
    // tool returns only once the run stops again, and a refused answer ends
    // the run with its error.
    let mut answering = None;
    if resume.is_empty() {
        let pending = store
            .decisions(
                Some(id),
                Some(opcode_runtime::store::DecisionStatus::Pending),
            )
            .await?;
        if let Some(stop) = stop_of_row(&row, pending) {
            send(tx, mapper.finish(&stop)).await;
            return Ok(());
        }
        if let Some(stop) = asked(&store, id).await? {
            send(tx, mapper.finish(&stop)).await;
            return Ok(());
        }
    } else {
        let (api, id) = (api.clone(), id.to_owned());
        answering = Some(tokio::spawn(async move {
            for entry in &resume {
                answer(&api, &id, entry).await?;
            }
            Ok::<(), ToolError>(())
        }));
    }
    loop {
        take_live(&mut live, id, &mut pending);
        for entry in store.entries(id, last_seq, false).await? {
            last_seq = entry.seq;
            // What an agent said while its step ran comes before the step ends.
            if let Some(step) = entry
                .step_id
                .as_deref()
                .filter(|_| entry.name().is_some_and(EventName::ends_step))
            {
                send(
                    tx,
                    agent_events(&mut mapper, &mut agents, &mut pending, Some(step)),
                )
                .await;
            }
            send(tx, mapper.entry(&entry)).await;
            let stop = match stop_of(&entry) {
                None if entry.name() == Some(EventName::ActionAsked) => asked(&store, id).await?,
                stop => stop,
            };
            if let Some(stop) = stop {
                send(
                    tx,
                    agent_events(&mut mapper, &mut agents, &mut pending, None),
                )
                .await;
                let stop = match stop {
                    Stop::Suspended(_) => Stop::Suspended(
                        store
                            .decisions(
                                Some(id),
                                Some(opcode_runtime::store::DecisionStatus::Pending),
                            )
                            .await?,
                    ),
                    other => other,
                };
                send(tx, mapper.finish(&stop)).await;
                return Ok(());
            }
        }
        send(
            tx,
            agent_events(&mut mapper, &mut agents, &mut pending, None),
        )
        .await;
        if tx.is_closed() {
            return Ok(());
        }
        match answering.as_mut() {
            None => tokio::select! {
                () = wait_for_change(&mut feed, id) => {}
                () = wait_for_live(&mut live, id, &mut pending) => {}
            },
            Some(task) => tokio::select! {
                () = wait_for_change(&mut feed, id) => {}
                () = wait_for_live(&mut live, id, &mut pending) => {}
                answered = task => {
                    answering = None;
                    answered.map_err(|e| {
                        ToolError::new(opcode_vm::codes::R0109, format!("the answer stopped: {e}"))
                    })??;
                }
            },
        }
    }
}

/// The interrupts of a run whose actions asked questions waiting for
/// answers (spec/agents.md, "Permission requests"): the run is active, and
/// the AG-UI run stops until they are answered (`resume`).
async fn asked(store: &Arc<dyn EventStore>, id: &str) -> Result<Option<Stop>, ToolError> {
    let pending = store
        .decisions(
            Some(id),
            Some(opcode_runtime::store::DecisionStatus::Pending),
        )
        .await?;
    let asks: Vec<_> = pending
        .into_iter()
        .filter(|d| opcode_vm::event::asking_step(&d.id).is_some())
        .collect();
    Ok((!asks.is_empty()).then_some(Stop::Suspended(asks)))
}

/// Does a log entry of this type end its step?
/// The steps that `tail` (entries up to `upto`) starts and does not end.
fn started_in(tail: &[LogEntry], upto: u64) -> Vec<String> {
    let mut running: Vec<String> = Vec::new();
    for entry in tail
        .iter()
        .filter(|e| e.seq <= upto && e.kind == EntryKind::Record)
    {
        let Some(step) = entry.step_id.as_deref() else {
            continue;
        };
        match entry.name() {
            Some(EventName::StepStarted) if !running.iter().any(|s| s == step) => {
                running.push(step.to_owned());
            }
            Some(name) if name.ends_step() => running.retain(|s| s != step),
            _ => {}
        }
    }
    running
}

/// The AG-UI events of the pending agent events of `step` (all, if none
/// is named), taken out of `pending`.
fn agent_events(
    mapper: &mut Mapper,
    agents: &mut AgentStream,
    pending: &mut Vec<Emitted>,
    step: Option<&str>,
) -> Vec<Value> {
    if pending.is_empty() {
        return Vec::new();
    }
    let (now, later): (Vec<Emitted>, Vec<Emitted>) = std::mem::take(pending)
        .into_iter()
        .partition(|e| step.is_none_or(|s| e.step_id == s));
    *pending = later;
    let mut events = Vec::new();
    for e in &now {
        let said = agents.event(&e.step_id, &e.event_type, &e.payload);
        if !said.is_empty() {
            events.extend(mapper.open(&e.step_id));
            events.extend(said);
        }
    }
    events
}

/// Keeps the live events of `id` published so far (a lagging receiver
/// loses some: the transcript keeps everything).
fn take_live(live: &mut broadcast::Receiver<Emitted>, id: &str, pending: &mut Vec<Emitted>) {
    loop {
        match live.try_recv() {
            Ok(e) if e.workflow_id == id => pending.push(e),
            Ok(_) | Err(broadcast::error::TryRecvError::Lagged(_)) => {}
            Err(_) => return,
        }
    }
}

/// Waits for a live event of `id` (forever, once the channel closed).
async fn wait_for_live(
    live: &mut broadcast::Receiver<Emitted>,
    id: &str,
    pending: &mut Vec<Emitted>,
) {
    loop {
        match live.recv().await {
            Ok(e) if e.workflow_id == id => {
                pending.push(e);
                return;
            }
            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
        }
    }
}

/// Waits until the feed announces entries of `id`, or [`POLL`] passes.
async fn wait_for_change(feed: &mut broadcast::Receiver<Arc<opcode_runtime::Appended>>, id: &str) {
    let _ = tokio::time::timeout(POLL, async {
        loop {
            match feed.recv().await {
                Ok(appended) if appended.workflow_id != id => {}
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => return,
                Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
            }
        }
    })
    .await;
}

/// Applies one resume entry as `opcode.signal` would.
async fn answer(api: &Api, id: &str, entry: &ResumeEntry) -> Result<(), ToolError> {
    let cancelled = entry.status == "cancelled";
    let args = if entry.interrupt_id == "resume" {
        match entry.payload.get("signal").and_then(Value::as_str) {
            Some(name) if !cancelled => json!({
                "workflow_id": id, "signal_type": "signal",
                "payload": {"name": name, "data": entry.payload.get("data").cloned().unwrap_or(Value::Null)},
            }),
            _ if cancelled => json!({"workflow_id": id, "signal_type": "cancel"}),
            _ => json!({"workflow_id": id, "signal_type": "resume"}),
        }
    } else if cancelled {
        json!({"workflow_id": id, "signal_type": "cancel", "step_id": entry.interrupt_id})
    } else {
        let (payload, reasoning) = match &entry.payload {
            Value::String(choice) => (json!({"choice": choice}), None),
            Value::Object(fields) => {
                let mut payload =
                    json!({"choice": fields.get("choice").cloned().unwrap_or(Value::Null)});
                if let Some(data) = fields.get("data") {
                    payload["data"] = data.clone();
                }
                (payload, fields.get("reasoning").cloned())
            }
            _ => (json!({}), None),
        };
        let mut args = json!({
            "workflow_id": id, "signal_type": "decision",
            "step_id": entry.interrupt_id, "payload": payload,
        });
        if let Some(reasoning) = reasoning {
            args["reasoning"] = reasoning;
        }
        args
    };
    api.call("opcode.signal", args).await.map(|_| ())
}

async fn send(tx: &mpsc::Sender<Value>, events: Vec<Value>) {
    for event in events {
        if tx.send(event).await.is_err() {
            return;
        }
    }
}
