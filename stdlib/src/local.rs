//! Running a Program in-process, without a database: what `opcodec run` and
//! the conformance tests use.
//!
//! The driver applies events to the VM, performs the effects (actions on
//! tokio, timers with tokio's clock), and feeds the answers back until the
//! run ends, or is suspended with nothing left to do but wait for a decision
//! or a signal nobody will send. Every applied event is kept, so a test can
//! replay the log.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opcode_vm::effect::{Effect, Record, TimerPurpose};
use opcode_vm::event::{Event, Resolution, RunMeta};
use opcode_vm::{Plan, Vm};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use crate::cel::CelHost;
use crate::exec::{Actions, Call, Secrets};

/// Milliseconds since the epoch, now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// How to run.
pub struct LocalRun {
    /// The program.
    pub plan: Arc<Plan>,
    /// The actions.
    pub actions: Arc<Actions>,
    /// Where secrets come from.
    pub secrets: Arc<dyn Secrets>,
    /// Answers to reasoning steps, by step id (each time the step asks).
    pub decisions: HashMap<String, String>,
    /// Signals delivered right after the start, in order.
    pub signals: Vec<(String, Value)>,
    /// Facts about the run.
    pub meta: RunMeta,
    /// When the run waits only for decisions or signals, how long to keep
    /// waiting for their timeouts (a decision due in an hour is not waited for).
    pub max_wait: Duration,
}

/// What happened.
pub struct Outcome {
    /// The VM at the end.
    pub vm: Vm,
    /// Every event applied, with its time.
    pub log: Vec<(u64, Event)>,
    /// Every record, with its time.
    pub records: Vec<(u64, Record)>,
    /// Answers the VM refused (a `--decide` choice that is not an option…).
    pub rejected: Vec<String>,
}

impl LocalRun {
    /// Runs with `inputs` (already prepared) until the run ends or can only wait.
    pub async fn run(self, inputs: Value) -> Outcome {
        let host = CelHost::new(&self.plan.program);
        let mut vm = Vm::new(self.plan.clone());
        let (tx, mut rx) = mpsc::unbounded_channel::<Event>();
        let mut queue: VecDeque<Event> = VecDeque::new();
        queue.push_back(Event::Started {
            inputs,
            meta: self.meta.clone(),
            secrets: Vec::new(),
        });
        for (name, payload) in &self.signals {
            queue.push_back(Event::Signal {
                name: name.clone(),
                payload: payload.clone(),
            });
        }
        let mut tasks: HashMap<u64, AbortHandle> = HashMap::new();
        let mut timers: HashMap<u64, (AbortHandle, TimerPurpose, u64)> = HashMap::new();
        let mut log = Vec::new();
        let mut records = Vec::new();
        let mut rejected = Vec::new();
        loop {
            while let Some(event) = queue.pop_front() {
                let at = now_ms();
                let effects = match vm.apply(at, &event, &host) {
                    Ok(effects) => effects,
                    Err(rejection) => {
                        // A late answer to something cancelled is not part of
                        // the run; a refused decision or signal is reported.
                        if matches!(event, Event::DecisionResolved { .. } | Event::Signal { .. }) {
                            rejected.push(rejection.to_string());
                        }
                        continue;
                    }
                };
                if let Event::ActionFinished { effect, .. } = &event {
                    tasks.remove(effect);
                }
                if let Event::TimerFired { timer } = &event {
                    timers.remove(timer);
                }
                log.push((at, event));
                for effect in effects {
                    self.perform(
                        &vm,
                        effect,
                        at,
                        &tx,
                        &mut tasks,
                        &mut timers,
                        &mut queue,
                        &mut records,
                    );
                }
            }
            if vm.status().is_terminal() {
                break;
            }
            // Suspended with nothing to do but wait for a decision or a
            // signal nobody will send here: stop, unless a timeout that
            // would end the wait is close.
            let horizon = now_ms().saturating_add(self.max_wait.as_millis() as u64);
            let only_waiting = tasks.is_empty()
                && timers.values().all(|(_, purpose, due)| {
                    matches!(
                        purpose,
                        TimerPurpose::DecisionTimeout
                            | TimerPurpose::SignalTimeout
                            | TimerPurpose::RunTimeout
                    ) && *due > horizon
                });
            if only_waiting && vm.status() == opcode_vm::RunStatus::Suspended {
                break;
            }
            match rx.recv().await {
                Some(event) => queue.push_back(event),
                None => break,
            }
        }
        for (_, handle) in tasks {
            handle.abort();
        }
        for (_, (handle, _, _)) in timers {
            handle.abort();
        }
        Outcome {
            vm,
            log,
            records,
            rejected,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn perform(
        &self,
        vm: &Vm,
        effect: Effect,
        at: u64,
        tx: &mpsc::UnboundedSender<Event>,
        tasks: &mut HashMap<u64, AbortHandle>,
        timers: &mut HashMap<u64, (AbortHandle, TimerPurpose, u64)>,
        queue: &mut VecDeque<Event>,
        records: &mut Vec<(u64, Record)>,
    ) {
        match effect {
            Effect::Dispatch(dispatch) => {
                let step = vm.instance_name(&dispatch.inst);
                let effect_id = dispatch.effect;
                let tx = tx.clone();
                let actions = self.actions.clone();
                let secrets = self.secrets.clone();
                let (run_id, agent_id) = (self.meta.run_id.clone(), self.meta.agent_id.clone());
                let handle = tokio::spawn(async move {
                    let call = Call::prepare(
                        &dispatch,
                        &run_id,
                        &step,
                        agent_id.as_deref(),
                        secrets.as_ref(),
                    )
                    .await;
                    let result = match call {
                        Ok(call) => actions.run(&call).await,
                        Err(e) => Err(e),
                    };
                    let _ = tx.send(Event::ActionFinished {
                        effect: effect_id,
                        result,
                    });
                });
                tasks.insert(effect_id, handle.abort_handle());
            }
            Effect::CancelDispatch { effect } => {
                if let Some(handle) = tasks.remove(&effect) {
                    handle.abort();
                }
            }
            Effect::StartTimer {
                timer,
                due,
                purpose,
                ..
            } => {
                let tx = tx.clone();
                let wait = Duration::from_millis(due.saturating_sub(at));
                let handle = tokio::spawn(async move {
                    tokio::time::sleep(wait).await;
                    let _ = tx.send(Event::TimerFired { timer });
                });
                timers.insert(timer, (handle.abort_handle(), purpose, due));
            }
            Effect::CancelTimer { timer } => {
                if let Some((handle, _, _)) = timers.remove(&timer) {
                    handle.abort();
                }
            }
            Effect::RequestDecision(request) => {
                let step = vm.plan().id(request.inst.step).to_owned();
                if let Some(choice) = self.decisions.get(&step) {
                    queue.push_back(Event::DecisionResolved {
                        decision: request.id.clone(),
                        resolution: Resolution {
                            choice: choice.clone(),
                            reasoning: Some("answered on the command line".into()),
                            data: None,
                            resolved_by: Some(
                                request
                                    .target_agent
                                    .clone()
                                    .unwrap_or_else(|| "opcodec".into()),
                            ),
                        },
                    });
                }
            }
            Effect::CancelDecision { .. } | Effect::AwaitSignal { .. } => {}
            Effect::Record(record) => records.push((at, record)),
        }
    }
}

/// The run's result as JSON: `{status, output, steps, pending_decisions, error}`.
pub fn summary(vm: &Vm) -> Value {
    let mut steps = serde_json::Map::new();
    for view in vm.steps() {
        steps.insert(
            view.name.clone(),
            serde_json::json!({
                "status": view.status.as_str(),
                "output": view.output,
                "error": view.error,
                "attempts": view.attempt,
            }),
        );
    }
    let pending: Vec<Value> = vm
        .pending_decisions()
        .map(|d| {
            serde_json::json!({
                "id": d.id,
                "step_id": vm.plan().id(d.inst.step),
                "prompt": d.prompt,
                "options": d.options,
                "data": d.data,
                "timeout_at": d.timeout_at,
                "fallback": d.fallback,
                "target_agent": d.target_agent,
            })
        })
        .collect();
    serde_json::json!({
        "status": vm.status().as_str(),
        "output": vm.output(),
        "steps": steps,
        "pending_decisions": pending,
        "awaiting_signals": vm.awaited_signals(),
        "error": vm.error(),
    })
}
