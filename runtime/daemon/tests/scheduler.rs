//! The scheduler on the in-memory store, with the clock in the test's hands.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use opcode_daemon::api::Api;
use opcode_daemon::scheduler::{GRACE_MS, tick};
use opcode_runtime::executor::Config;
use opcode_runtime::store::memory::MemoryStore;
use opcode_runtime::store::{Catalog, EventStore, RunLog, ScheduleRow, WorkflowFilter};
use opcode_runtime::time::{parse_ms, rfc3339};
use opcode_runtime::{Executor, Until};
use opcode_stdlib::exec::EnvSecrets;
use serde_json::json;

/// 2026-11-29T12:00:00Z.
const T0: u64 = 1_795_953_600_000;

fn executor(store: &Arc<MemoryStore>) -> Executor {
    let store: Arc<dyn EventStore> = store.clone();
    Executor::new(store, Arc::new(EnvSecrets), Config::default())
}

async fn define(exec: &Executor, name: &str, step: serde_json::Value) {
    let api = Api::new(exec.clone());
    api.call(
        "opcode.define",
        json!({"name": name, "definition": {"steps": [step]}}),
    )
    .await
    .unwrap();
}

fn job(id: &str, template: &str, cron: &str, missed: &str) -> ScheduleRow {
    ScheduleRow {
        id: id.into(),
        template_name: template.into(),
        cron: cron.into(),
        timezone: "UTC".into(),
        params: "{}".into(),
        enabled: true,
        missed: missed.into(),
        origin: "cli".into(),
        created_at: rfc3339(T0),
        ..ScheduleRow::default()
    }
}

async fn runs(store: &Arc<MemoryStore>) -> Vec<String> {
    let mut ids: Vec<String> = store
        .workflows(WorkflowFilter::default())
        .await
        .unwrap()
        .into_iter()
        .map(|w| w.id)
        .collect();
    ids.sort();
    ids
}

async fn the_job(store: &Arc<MemoryStore>) -> ScheduleRow {
    store.schedules().await.unwrap().remove(0)
}

#[tokio::test]
async fn each_fire_time_runs_once_across_ticks_and_restarts() {
    let store = Arc::new(MemoryStore::new());
    let exec = executor(&store);
    define(
        &exec,
        "ping",
        json!({"id": "p", "action": "workflow.log", "params": {"message": "ping"}}),
    )
    .await;
    store
        .save_schedule(job("j", "ping", "*/10 * * * * *", "run_once"))
        .await
        .unwrap();
    tick(&exec, T0 + 1).await.unwrap();
    assert_eq!(
        the_job(&store).await.next_run_at,
        Some(rfc3339(T0 + 10_000))
    );
    assert!(runs(&store).await.is_empty(), "nothing is due yet");
    for now in [T0 + 10_000, T0 + 10_400, T0 + 10_900] {
        tick(&exec, now).await.unwrap();
    }
    // A second daemon (or this one restarted) sees the same fire time as handled.
    let other = executor(&store);
    tick(&other, T0 + 10_950).await.unwrap();
    assert_eq!(runs(&store).await, [format!("sched-j-{}", T0 + 10_000)]);
    let job = the_job(&store).await;
    assert_eq!(job.next_run_at, Some(rfc3339(T0 + 20_000)));
    assert_eq!(job.last_run_at, Some(rfc3339(T0 + 10_000)));
    // A crash after starting the run but before moving the job on: the next
    // tick finds the run and only moves on.
    let crashed = format!("sched-j-{}", T0 + 20_000);
    let api = Api::new(exec.clone());
    let template = store.template("ping", None).await.unwrap().unwrap();
    opcode_daemon::api::start_template(&exec, &template, &json!({}), None, Some(crashed.clone()))
        .await
        .unwrap();
    tick(&exec, T0 + 20_000).await.unwrap();
    assert_eq!(runs(&store).await.len(), 2);
    assert_eq!(the_job(&store).await.last_workflow_id, Some(crashed));
    drop(api);
}

#[tokio::test]
async fn missed_fire_times_follow_the_policy() {
    for (policy, expect_runs) in [("skip", 0), ("run_once", 1)] {
        let store = Arc::new(MemoryStore::new());
        let exec = executor(&store);
        define(
            &exec,
            "ping",
            json!({"id": "p", "action": "workflow.log", "params": {"message": "x"}}),
        )
        .await;
        let mut j = job("j", "ping", "* * * * *", policy);
        // Due five minutes ago: the daemon was down.
        j.next_run_at = Some(rfc3339(T0 - 5 * 60_000));
        store.save_schedule(j).await.unwrap();
        tick(&exec, T0 + 1).await.unwrap();
        assert_eq!(runs(&store).await.len(), expect_runs, "{policy}");
        let job = the_job(&store).await;
        assert!(
            parse_ms(job.next_run_at.as_deref().unwrap()).unwrap() > T0,
            "{policy}"
        );
        if policy == "skip" {
            assert_eq!(job.last_run_status.as_deref(), Some("skipped"));
        }
        // Late by less than the grace: not missed, it runs whatever the policy.
        let mut late = job.clone();
        late.next_run_at = Some(rfc3339(T0 + 60_000));
        store.save_schedule(late).await.unwrap();
        tick(&exec, T0 + 60_000 + GRACE_MS / 2).await.unwrap();
        assert_eq!(runs(&store).await.len(), expect_runs + 1, "{policy}");
    }
}

#[tokio::test]
async fn last_run_status_is_the_workflows_outcome() {
    let store = Arc::new(MemoryStore::new());
    let exec = executor(&store);
    define(
        &exec,
        "boom",
        json!({"id": "b", "action": "workflow.fail", "params": {"message": "no"}}),
    )
    .await;
    let mut j = job("j", "boom", "* * * * *", "run_once");
    j.next_run_at = Some(rfc3339(T0));
    store.save_schedule(j).await.unwrap();
    tick(&exec, T0 + 1).await.unwrap();
    let id = the_job(&store).await.last_workflow_id.unwrap();
    exec.wait(&id, Until::Ended).await.unwrap();
    tick(&exec, T0 + 2).await.unwrap();
    assert_eq!(
        the_job(&store).await.last_run_status.as_deref(),
        Some("failed")
    );
    // A job whose template is gone records why nothing ran.
    let mut orphan = job("k", "gone", "* * * * *", "run_once");
    orphan.next_run_at = Some(rfc3339(T0));
    store.save_schedule(orphan).await.unwrap();
    tick(&exec, T0 + 3).await.unwrap();
    let k = store
        .schedules()
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.id == "k")
        .unwrap();
    assert!(
        k.last_run_status
            .unwrap()
            .starts_with("error: template `gone`")
    );
}

#[tokio::test]
async fn define_with_a_cron_trigger_creates_and_replaces_a_schedule() {
    let store = Arc::new(MemoryStore::new());
    let api = Api::new(executor(&store));
    let steps =
        json!({"steps": [{"id": "p", "action": "workflow.log", "params": {"message": "x"}}]});
    let bad = api
        .call(
            "opcode.define",
            json!({"name": "t", "definition": steps, "triggers": {"cron": "61 * * * *"}}),
        )
        .await
        .unwrap_err();
    assert_eq!(bad.details.unwrap()["pointer"], "/triggers/cron");
    let ok = api
        .call(
            "opcode.define",
            json!({"name": "t", "definition": steps,
            "triggers": {"cron": "0 9 * * 1-5", "timezone": "Europe/Madrid", "params": {"a": 1}}}),
        )
        .await
        .unwrap();
    assert_eq!(ok["schedule"]["id"], "trigger:t");
    let listed = api
        .call("opcode.query", json!({"resource": "schedules"}))
        .await
        .unwrap();
    assert_eq!(listed["schedules"][0]["timezone"], "Europe/Madrid");
    assert_eq!(listed["schedules"][0]["params"]["a"], 1);
    api.call("opcode.define", json!({"name": "t", "definition": steps}))
        .await
        .unwrap();
    assert!(
        store.schedules().await.unwrap().is_empty(),
        "a version without triggers removes it"
    );
}
