//! Runs across crashes and stops: step rows rewritten at load, recoveries
//! counted until quarantine, graceful shutdowns, lapsed leases.

use std::sync::Arc;
use std::time::Duration;

use opcode_runtime::executor::Config;
use opcode_runtime::store::RunLog;
use opcode_runtime::store::memory::MemoryStore;
use opcode_runtime::{Delivery, ExecError, Until};
use opcode_vm::event::Event;
use serde_json::{Value, json};

use super::common::{config, executor, request, runtime};
use super::{entries, settle};

/// Starts a run of [`slow_step`] in a process that dies once the step has
/// started (its runtime is dropped); the run's id.
fn start_then_die(store: &Arc<MemoryStore>, config: Config) -> String {
    let first = runtime();
    let id = first.block_on(async {
        let exec = executor(store, config);
        let id = exec.start(request(&slow_step(), &json!({}))).await.unwrap();
        await_entries(store, &id, "step_started", 1).await;
        id
    });
    first.shutdown_timeout(Duration::from_millis(10));
    id
}

/// A step that stays in flight long enough to "crash" under it.
fn slow_step() -> Value {
    json!({"steps": [
        {"id": "slow", "action": "shell.exec", "params": {"command": "sleep 0.5; echo done >> trace", "shell": true}}
    ]})
}

/// Waits until `id`'s log has `count` entries of `event_type`.
async fn await_entries(store: &MemoryStore, id: &str, event_type: &str, count: usize) {
    for _ in 0..500 {
        let log = entries(store, id).await;
        if log.iter().filter(|e| e.event_type == event_type).count() >= count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{id} never logged {count} {event_type}");
}

/// Two shell steps, the second in flight for `seconds`.
fn quick_then_slow(seconds: f64) -> Value {
    json!({"steps": [
        {"id": "one", "action": "shell.exec", "params": {"command": "echo one", "shell": true}},
        {"id": "two", "action": "shell.exec", "depends_on": ["one"],
         "params": {"command": format!("sleep {seconds}; echo two >> trace"), "shell": true}}
    ]})
}

/// `(step, status)` of each of `id`'s step rows.
async fn step_statuses(store: &MemoryStore, id: &str) -> Vec<(String, String)> {
    let steps = store.steps(id).await.unwrap();
    steps
        .iter()
        .map(|s| (s.step_id.clone(), s.status.as_str().to_owned()))
        .collect()
}

/// The `at` of `id`'s first entry of `event_type` about `step`.
async fn logged_at(store: &MemoryStore, id: &str, event_type: &str, step: &str) -> String {
    let log = entries(store, id).await;
    let entry = log
        .iter()
        .find(|e| e.event_type == event_type && e.step_id.as_deref() == Some(step));
    entry.unwrap().at.clone()
}

fn pair(step: &str, status: &str) -> (String, String) {
    (step.to_owned(), status.to_owned())
}

#[test]
fn a_running_runs_step_rows_wait_until_it_rests_and_a_dead_writers_are_rewritten_at_load() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    // Rows wait for a rest only: never for time, in this test.
    let config = || Config {
        step_rows_within: Duration::from_mins(10),
        ..config(dir.path())
    };
    let first = runtime();
    let id = first.block_on(async {
        let exec = executor(&store, config());
        let id = exec
            .start(request(&quick_then_slow(0.3), &json!({})))
            .await
            .unwrap();
        await_entries(&store, &id, "step_started", 2).await;
        // `one`'s start and end and `two`'s start are in the log only.
        assert_eq!(step_statuses(&store, &id).await, []);
        id
    });
    first.shutdown_timeout(Duration::from_millis(10));
    runtime().block_on(async {
        let exec = executor(&store, config());
        assert_eq!(exec.recover().await.unwrap(), std::slice::from_ref(&id));
        let row = settle(&exec, &id, Until::Ended).await;
        assert_eq!(row.status.as_str(), "completed");
        // The replay rewrote `one`, which the last commit did not touch.
        let rows = store.steps(&id).await.unwrap();
        let statuses: Vec<_> = rows.iter().map(|s| s.status.as_str()).collect();
        assert_eq!(statuses, ["completed", "completed"], "{rows:?}");
        let one = &rows[0];
        assert_eq!(
            one.started_at.as_deref(),
            Some(logged_at(&store, &id, "step_started", "one").await.as_str())
        );
        assert_eq!(
            one.completed_at.as_deref(),
            Some(
                logged_at(&store, &id, "step_completed", "one")
                    .await
                    .as_str()
            )
        );
        assert!(one.duration_ms.is_some_and(|ms| ms >= 0), "{one:?}");
    });
}

#[test]
fn a_running_runs_step_rows_catch_up_with_its_log_while_a_step_is_in_flight() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let id = exec
            .start(request(&quick_then_slow(30.0), &json!({})))
            .await
            .unwrap();
        let expected = [pair("one", "completed"), pair("two", "running")];
        let mut rows = Vec::new();
        for _ in 0..500 {
            rows = step_statuses(&store, &id).await;
            if rows == expected {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(rows, expected);
        let row = store.workflow(&id).await.unwrap().unwrap();
        assert_eq!(row.status.as_str(), "active");
        let cancel = Event::Cancel {
            reason: "seen".into(),
        };
        assert_eq!(exec.deliver(&id, cancel).await.unwrap(), Delivery::Applied);
        settle(&exec, &id, Until::Ended).await;
        let rows = step_statuses(&store, &id).await;
        assert_eq!(rows, [pair("one", "completed"), pair("two", "cancelled")]);
    });
}

#[test]
fn a_run_whose_recoveries_keep_ending_the_process_is_quarantined_until_resumed() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let limits = opcode_stdlib::limits::Limits {
        recoveries: 2,
        ..opcode_stdlib::limits::Limits::default()
    };
    let config = || Config {
        limits,
        ..config(dir.path())
    };
    let id = start_then_die(&store, config());
    // Each recovery re-dispatches the step, and the process "dies" again.
    for recovery in 1..=2 {
        let again = runtime();
        again.block_on(async {
            let exec = executor(&store, config());
            assert_eq!(exec.recover().await.unwrap(), std::slice::from_ref(&id));
            await_entries(&store, &id, "action_redispatched", recovery).await;
        });
        again.shutdown_timeout(Duration::from_millis(10));
    }
    runtime().block_on(async {
        let exec = executor(&store, config());
        assert!(
            exec.recover().await.unwrap().is_empty(),
            "quarantined, not resumed"
        );
        let row = store.workflow(&id).await.unwrap().unwrap();
        assert_eq!(row.status.as_str(), "quarantined");
        let log = entries(&store, &id).await;
        let note = log.last().unwrap();
        assert_eq!(note.event_type, "workflow_quarantined");
        assert!(
            note.payload.contains("\"recoveries\":2"),
            "{}",
            note.payload
        );
        // Nothing loads it by itself, not even a signal...
        let signal = Event::Signal {
            name: "go".into(),
            payload: Value::Null,
        };
        assert!(matches!(
            exec.deliver(&id, signal).await,
            Err(ExecError::Quarantined(_))
        ));
        assert!(exec.recover().await.unwrap().is_empty());
        // ...but a hand resumes it, and it finishes.
        exec.resume(&id).await.unwrap();
        let row = settle(&exec, &id, Until::Ended).await;
        assert_eq!(row.status.as_str(), "completed");
    });
    let trace = std::fs::read_to_string(dir.path().join("trace")).unwrap();
    assert_eq!(trace.lines().count(), 1, "{trace}");
}

#[test]
fn an_interrupted_run_that_a_due_timer_loads_is_recovered_and_counted() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    // A timer runs beside the slow step: after the crash it is due, and the
    // background loop, not `recover`, is the first to see the run.
    let workflow = json!({"steps": [
        {"id": "slow", "action": "shell.exec", "params": {"command": "sleep 0.5; echo done >> trace", "shell": true}},
        {"id": "nap", "type": "wait", "config": {"duration": "50ms"}}
    ]});
    let first = runtime();
    let id = first.block_on(async {
        let exec = executor(&store, config(dir.path()));
        let id = exec.start(request(&workflow, &json!({}))).await.unwrap();
        await_entries(&store, &id, "step_started", 2).await;
        id
    });
    first.shutdown_timeout(Duration::from_millis(10));
    store.expire_leases();
    runtime().block_on(async {
        let exec = executor(&store, config(dir.path()));
        let _background = exec.background();
        let row = settle(&exec, &id, Until::Ended).await;
        assert_eq!(row.status.as_str(), "completed");
        let log = entries(&store, &id).await;
        assert!(
            log.iter().any(|e| e.event_type == "workflow_recovered"),
            "the recovery was not counted: {:?}",
            log.iter()
                .map(|e| e.event_type.as_str())
                .collect::<Vec<_>>()
        );
    });
}

#[test]
fn a_quarantined_run_can_be_cancelled_without_running_its_step_again() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let config = || Config {
        limits: opcode_stdlib::limits::Limits {
            recoveries: 1,
            ..opcode_stdlib::limits::Limits::default()
        },
        ..config(dir.path())
    };
    let id = start_then_die(&store, config());
    let again = runtime();
    again.block_on(async {
        let exec = executor(&store, config());
        exec.recover().await.unwrap();
        await_entries(&store, &id, "action_redispatched", 1).await;
    });
    again.shutdown_timeout(Duration::from_millis(10));
    runtime().block_on(async {
        let exec = executor(&store, config());
        exec.recover().await.unwrap();
        let cancel = Event::Cancel {
            reason: "enough".into(),
        };
        exec.deliver(&id, cancel).await.unwrap();
        let row = settle(&exec, &id, Until::Ended).await;
        assert_eq!(row.status.as_str(), "cancelled");
        tokio::time::sleep(Duration::from_millis(700)).await;
    });
    assert!(
        !dir.path().join("trace").exists(),
        "the step never ran to its end"
    );
}

#[test]
fn a_graceful_shutdown_lets_runs_go_and_is_not_counted_as_a_crash() {
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let config = || Config {
        limits: opcode_stdlib::limits::Limits {
            recoveries: 1,
            ..opcode_stdlib::limits::Limits::default()
        },
        ..config(dir.path())
    };
    let mut id = String::new();
    for round in 0..3 {
        let rt = runtime();
        rt.block_on(async {
            let exec = executor(&store, config());
            if round == 0 {
                id = exec.start(request(&slow_step(), &json!({}))).await.unwrap();
            } else {
                assert_eq!(exec.recover().await.unwrap(), std::slice::from_ref(&id));
            }
            await_entries(&store, &id, "step_started", 1).await;
            exec.shutdown(Duration::from_secs(5)).await;
            assert!(exec.loaded().is_empty());
            await_entries(&store, &id, "workflow_interrupted", round + 1).await;
        });
    }
    runtime().block_on(async {
        let exec = executor(&store, config());
        assert_eq!(exec.recover().await.unwrap(), std::slice::from_ref(&id));
        let row = settle(&exec, &id, Until::Ended).await;
        assert_eq!(row.status.as_str(), "completed");
    });
}

/// A store that refuses writes for longer than a lease lives: the run's
/// leases lapse, so this process stops driving it (another may take it);
/// it is loaded again and completes once writes succeed.
#[test]
fn runs_stop_when_their_leases_lapse_and_come_back_with_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(MemoryStore::new());
    let exec = executor(
        &store,
        Config {
            lease_ttl: Duration::from_millis(600),
            ..config(dir.path())
        },
    );
    runtime().block_on(async {
        let _background = exec.background();
        let workflow =
            json!({"steps": [{"id": "w", "type": "wait", "config": {"duration": "1500ms"}}]});
        let id = exec.start(request(&workflow, &json!({}))).await.unwrap();
        assert!(exec.loaded().contains(&id));
        store.refuse_writes(Some("disk full"));
        tokio::time::sleep(Duration::from_millis(1200)).await;
        assert!(
            !exec.loaded().contains(&id),
            "still driven after its leases lapsed"
        );
        let failure = exec
            .write_failure()
            .expect("the refusal is the store's health");
        assert!(failure.error.contains("disk full"), "{failure:?}");
        store.refuse_writes(None);
        let row = settle(&exec, &id, Until::Ended).await;
        assert_eq!(row.status.as_str(), "completed");
        assert!(exec.write_failure().is_none());
    });
}
