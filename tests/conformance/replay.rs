//! Crash recovery after every commit of a run, through the engine's
//! executor. The original run's store kept a copy of itself after each
//! commit: each copy is how a process that died right then leaves the
//! database. For each, a new executor recovers what was running and the
//! run is taken to rest; its calls are answered from the results the
//! original run recorded (a call the record never finished stays in
//! flight until the run's timeouts or cancels end it), decisions as
//! `expect.toml` answers them, signals the original got later are sent
//! again. It must end exactly as the original did.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use libtest_mimic::Failed;
use opcode_runtime::executor::{Answer, StandIn};
use opcode_runtime::log;
use opcode_runtime::store::memory::MemoryStore;
use opcode_runtime::store::{EventStore, RunLog, WorkflowFilter, WorkflowStatus};
use opcode_vm::effect::{Dispatch, InstRef};
use opcode_vm::error::ActionError;
use opcode_vm::event::Event;
use serde_json::Value;

use crate::run::{Outcome, engine_over, runtime, settle};

/// A call, as recoveries know it: its run, step instance and attempt (its
/// effect id depends on the order results came in, which a recovery
/// changes).
type CallKey = (String, InstRef, u32);

/// Notes which call each of the original run's effects was; calls every
/// action as usual.
#[derive(Default)]
pub struct Calls(Mutex<HashMap<(String, u64), CallKey>>);

impl StandIn for Calls {
    fn answer(&self, run_id: &str, dispatch: &Dispatch) -> Answer {
        let call = (run_id.to_owned(), dispatch.inst.clone(), dispatch.attempt);
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((run_id.to_owned(), dispatch.effect), call);
        Answer::Call
    }
}

/// The recorded results of every run's calls.
struct Recorded(HashMap<CallKey, Result<Value, ActionError>>);

impl StandIn for Recorded {
    fn answer(&self, run_id: &str, dispatch: &Dispatch) -> Answer {
        let call = (run_id.to_owned(), dispatch.inst.clone(), dispatch.attempt);
        self.0
            .get(&call)
            .map_or(Answer::Hold, |result| Answer::Give(result.clone()))
    }
}

/// The inputs of a run's log, with their sequence numbers.
async fn inputs(store: &dyn EventStore, id: &str) -> Result<Vec<(u64, Event)>, String> {
    let entries = store
        .entries(id, 0, true)
        .await
        .map_err(|e| e.to_string())?;
    entries
        .iter()
        .map(|entry| log::decode(entry).map(|(_, event)| (entry.seq, event)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())
}

/// What every run of `store` got back from its calls.
async fn recorded(store: &MemoryStore, calls: &Calls) -> Result<Recorded, String> {
    let calls = calls
        .0
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let mut results = HashMap::new();
    let runs = store
        .workflows(WorkflowFilter::default())
        .await
        .map_err(|e| e.to_string())?;
    for run in runs {
        for (_, event) in inputs(store, &run.id).await? {
            if let Event::ActionFinished { effect, result } = event {
                let call = calls
                    .get(&(run.id.clone(), effect))
                    .ok_or_else(|| format!("effect {effect} of {} was never called", run.id))?;
                results.insert(call.clone(), result);
            }
        }
    }
    Ok(Recorded(results))
}

/// Recovers the run of `outcome` after each of its store's commits.
pub fn check_replay(dir: &Path, outcome: &Outcome) -> Result<(), Failed> {
    runtime()?.block_on(async {
        let recorded = Arc::new(recorded(&outcome.store, &outcome.calls).await?);
        let signals = inputs(outcome.store.as_ref(), &outcome.id).await?;
        let reference = opcode_runtime::summary::untimed(&outcome.summary);
        // The recoveries are independent: run them all at once (a run
        // that waits or backs off then takes its time once, not per commit).
        let snapshots = outcome.store.snapshots();
        let total = snapshots.len();
        let recoveries = snapshots
            .into_iter()
            .map(|snapshot| recover(dir, snapshot, &signals, recorded.clone(), outcome));
        let ends = futures::future::join_all(recoveries).await;
        for (n, end) in ends.into_iter().enumerate() {
            let got = end.map_err(|e| format!("recovering after commit {} of {total}: {e}", n + 1))?;
            if let Some(got) = got.map(|g| opcode_runtime::summary::untimed(&g))
                && got != reference
            {
                return Err(Failed::from(format!(
                    "recovered after commit {} of {total}, the run ends differently:\nexpected {reference}\ngot {got}",
                    n + 1
                )));
            }
        }
        Ok(())
    })
}

/// Recovers `store` with a new executor and takes the run to rest; `None`
/// when the run had already ended there.
async fn recover(
    dir: &Path,
    store: MemoryStore,
    log: &[(u64, Event)],
    recorded: Arc<Recorded>,
    outcome: &Outcome,
) -> Result<Option<Value>, String> {
    let id = outcome.id.as_str();
    let Some(row) = store.workflow(id).await.map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    if row.status.is_ended() {
        return Ok(None);
    }
    store.expire_leases();
    let store = Arc::new(store);
    let executor = engine_over(store.clone(), dir);
    executor.set_stand_in(recorded);
    // Recovery first: started before it, the background loop may load a
    // run with a due timer itself (recovered and counted all the same, but
    // not in this list).
    let recovered = executor.recover().await.map_err(|e| e.to_string())?;
    let _background = executor.background();
    let interrupted = matches!(row.status, WorkflowStatus::Pending | WorkflowStatus::Active);
    if interrupted && !recovered.iter().any(|r| r == id) {
        return Err(format!(
            "recover() left the run {} ({recovered:?})",
            row.status
        ));
    }
    let mut answers = outcome.answers.clone();
    answers.signals = log
        .iter()
        .filter(|(seq, _)| *seq > row.last_seq)
        .filter_map(|(_, event)| match event {
            Event::Signal { name, payload } => Some((name.clone(), payload.clone())),
            _ => None,
        })
        .collect();
    let (summary, _refused) = settle(&executor, &store, id, &answers).await?;
    executor.shutdown(Duration::from_secs(1)).await;
    Ok(Some(summary))
}
