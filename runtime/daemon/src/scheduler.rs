//! The scheduler: fires scheduled jobs (from `opcode schedule add` and from
//! templates' `triggers.cron`) at their cron times, each due time exactly
//! once, also across restarts and with several daemons on one database.
//!
//! A fire time's run gets the id `sched-{job}-{fire time in ms}`, and the
//! job moves to its next time only after that run started, with a
//! compare-and-set on `next_run_at`. A crash between the two starts nothing
//! twice: at the next tick the same id already exists, and the job just
//! moves on. A fire time more than [`GRACE_MS`] late (the daemon was down)
//! follows the job's missed-run policy: `run_once` runs it once, `skip`
//! does not run it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::api::start_template;
use crate::metrics::Metrics;
use opcode_runtime::executor::Executor;
use opcode_runtime::schedule::{Missed, Schedule};
use opcode_runtime::store::{ScheduleAdvance, ScheduleRow, StoreError};
use opcode_runtime::time::{now_ms, parse_ms, rfc3339};

/// A fire time later than this counts as missed.
pub const GRACE_MS: u64 = 60_000;

/// How often the scheduler looks at its jobs.
const TICK: Duration = Duration::from_millis(500);

/// Runs the scheduler until `stop`, counting each fire in `metrics`.
pub async fn run(exec: Executor, metrics: Arc<Metrics>, stop: CancellationToken) {
    loop {
        match tick(&exec, now_ms()).await {
            Ok(fires) => fires.into_iter().for_each(|started| metrics.fired(started)),
            Err(e) => tracing::warn!(error = %e, "scheduler tick failed; retrying"),
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(TICK) => {}
        }
    }
}

/// Handles every job once at time `now` (milliseconds); for each job it
/// fired, whether its run started.
pub async fn tick(exec: &Executor, now: u64) -> Result<Vec<bool>, StoreError> {
    start_debounced(exec, now).await?;
    let mut fires = Vec::new();
    for job in exec.store().schedules().await? {
        refresh_status(exec, &job).await?;
        if job.enabled {
            fires.extend(handle(exec, &job, now).await?);
        }
    }
    Ok(fires)
}

/// Brings `last_run_status` up to date with the last run's workflow.
async fn refresh_status(exec: &Executor, job: &ScheduleRow) -> Result<(), StoreError> {
    let Some(workflow_id) = &job.last_workflow_id else {
        return Ok(());
    };
    let Some(row) = exec.store().workflow(workflow_id).await? else {
        return Ok(());
    };
    if job.last_run_status.as_deref() != Some(row.status.as_str()) {
        exec.store()
            .set_schedule_status(&job.id, workflow_id, row.status.as_str())
            .await?;
    }
    Ok(())
}

/// Fires `job` if it is due; whether its run started, if it fired.
async fn handle(exec: &Executor, job: &ScheduleRow, now: u64) -> Result<Option<bool>, StoreError> {
    let schedule = match Schedule::parse(&job.cron, &job.timezone) {
        Ok(schedule) => schedule,
        Err(e) => {
            // Stored before validation existed, or edited by hand: say so once.
            if job.next_run_at.is_some() || job.last_run_status.is_none() {
                let advance = ScheduleAdvance {
                    id: job.id.clone(),
                    expected_next: job.next_run_at.clone(),
                    next_run_at: None,
                    last_run_at: None,
                    last_workflow_id: None,
                    last_run_status: Some(format!("error: {e}")),
                };
                exec.store().advance_schedule(advance).await?;
            }
            return Ok(None);
        }
    };
    let Some(due) = job.next_run_at.as_deref().and_then(parse_ms) else {
        // New (or re-enabled) job: its first fire time is the next one from now.
        let advance = ScheduleAdvance {
            id: job.id.clone(),
            expected_next: job.next_run_at.clone(),
            next_run_at: schedule.next_after(now).map(rfc3339),
            last_run_at: None,
            last_workflow_id: None,
            last_run_status: None,
        };
        exec.store().advance_schedule(advance).await?;
        return Ok(None);
    };
    if due > now {
        return Ok(None);
    }
    let next = schedule.next_after(now.max(due)).map(rfc3339);
    let missed = now.saturating_sub(due) > GRACE_MS;
    let policy = Missed::parse(&job.missed).unwrap_or(Missed::RunOnce);
    let (workflow_id, status, fired) = if missed && policy == Missed::Skip {
        tracing::info!(job = %job.id, due = %rfc3339(due), "missed while down; skipped");
        (None, "skipped".to_owned(), None)
    } else {
        let id = format!("sched-{}-{due}", job.id);
        match fire(exec, job, &id).await {
            Ok(()) => (Some(id), "running".to_owned(), Some(true)),
            Err(message) => {
                tracing::warn!(job = %job.id, error = %message, "scheduled run did not start");
                (None, format!("error: {message}"), Some(false))
            }
        }
    };
    let advance = ScheduleAdvance {
        id: job.id.clone(),
        expected_next: job.next_run_at.clone(),
        next_run_at: next,
        last_run_at: Some(rfc3339(due)),
        last_workflow_id: workflow_id,
        last_run_status: Some(status),
    };
    exec.store().advance_schedule(advance).await?;
    Ok(fired)
}

/// Starts the runs of debounced bursts that fell quiet by `now`
/// (spec/flow-control.md, "Debounce"), each as the id its burst names, then
/// forgets the burst: a crash between the two starts nothing twice. A burst
/// whose run cannot start (its template gone, its params no longer valid)
/// is forgotten with a warning.
async fn start_debounced(exec: &Executor, now: u64) -> Result<(), StoreError> {
    for start in exec.store().due_starts(now, 64).await? {
        let id = crate::api::debounce::run_id(&start.template, &start.key, start.first_ms);
        let params: Value = serde_json::from_str(&start.inputs).unwrap_or(Value::Null);
        let started = match exec.store().template(&start.template, None).await? {
            Some(template) => start_template(exec, &template, &params, None, Some(id.clone()))
                .await
                .map_err(|e| e.message),
            None => Err(format!("template `{}` is not defined", start.template)),
        };
        match started {
            Ok(_) => tracing::info!(template = %start.template, workflow = %id,
                deliveries = start.deliveries, "debounced run started"),
            Err(error) => tracing::warn!(template = %start.template, key = %start.key, %error,
                "a debounced burst could not start its run; dropped"),
        }
        exec.store().forget_start(&start).await?;
    }
    Ok(())
}

/// Starts the run of a fire time, as `id`; an existing `id` means it
/// already started (before a crash), which is success.
async fn fire(exec: &Executor, job: &ScheduleRow, id: &str) -> Result<(), String> {
    let template = exec
        .store()
        .template(&job.template_name, job.template_version)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("template `{}` is not defined", job.template_name))?;
    let params: Value =
        serde_json::from_str(&job.params).unwrap_or_else(|_| Value::Object(serde_json::Map::new()));
    match start_template(
        exec,
        &template,
        &params,
        job.agent_id.as_deref(),
        Some(id.to_owned()),
    )
    .await
    {
        Ok(_) => {
            tracing::info!(job = %job.id, workflow = %id, "scheduled run started");
            Ok(())
        }
        Err(e) => Err(e.message),
    }
}
