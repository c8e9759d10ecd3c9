//! A simulated runtime for the VM: a manual clock, actions answered by the
//! test, timers fired by advancing time. Everything is deterministic.

use std::collections::BTreeMap;
use std::sync::Arc;

use opcode_compiler::Compiler;
use opcode_stdlib::cel::CelHost;
use opcode_vm::effect::{DecisionRequest, Dispatch, Effect};
use opcode_vm::error::{ActionError, Rejected};
use opcode_vm::event::{Event, Resolution, RunMeta};
use opcode_vm::{Plan, Program, RunStatus, Vm};
use serde_json::Value;

/// A VM with a fake world around it.
pub struct Sim {
    pub vm: Vm,
    host: CelHost,
    pub now: u64,
    /// Actions in flight, by effect id.
    pub inflight: BTreeMap<u64, Dispatch>,
    /// Timers by id: due time.
    pub timers: BTreeMap<u64, u64>,
    /// Every effect seen.
    pub effects: Vec<Effect>,
    /// Every event applied.
    pub log: Vec<(u64, Event)>,
}

/// Compiles a workflow source.
pub fn program(source: &str) -> Program {
    let compiler = Compiler::new().with_actions(opcode_stdlib::catalog());
    let (program, diagnostics) = compiler.compile(source, "test.json");
    program.unwrap_or_else(|| {
        panic!(
            "does not compile: {:?}",
            diagnostics.iter().map(|d| &d.message).collect::<Vec<_>>()
        )
    })
}

impl Sim {
    /// A simulation of `source`, started with `inputs` at time 1000.
    pub fn start(source: &str, inputs: Value) -> Sim {
        let meta = RunMeta {
            run_id: "run-1".into(),
            ..RunMeta::default()
        };
        Sim::start_with(source, inputs, meta)
    }

    /// [`Sim::start`] with the run's `meta`.
    pub fn start_with(source: &str, inputs: Value, meta: RunMeta) -> Sim {
        let program = program(source);
        let host = CelHost::new(&program);
        let mut sim = Sim {
            vm: Vm::new(Plan::new(program)),
            host,
            now: 1000,
            inflight: BTreeMap::new(),
            timers: BTreeMap::new(),
            effects: Vec::new(),
            log: Vec::new(),
        };
        sim.apply(Event::Started {
            inputs,
            meta: Box::new(meta),
            secrets: Vec::new(),
        })
        .expect("start");
        sim
    }

    /// Applies an event now.
    pub fn apply(&mut self, event: Event) -> Result<Vec<Effect>, Rejected> {
        let effects = self.vm.apply(self.now, &event, &self.host)?;
        self.log.push((self.now, event));
        for effect in &effects {
            match effect {
                Effect::Dispatch(d) => {
                    self.inflight.insert(d.effect, (**d).clone());
                }
                Effect::CancelDispatch { effect } => {
                    self.inflight.remove(effect);
                }
                Effect::StartTimer { timer, due, .. } => {
                    self.timers.insert(*timer, *due);
                }
                Effect::CancelTimer { timer } => {
                    self.timers.remove(timer);
                }
                _ => {}
            }
        }
        self.effects.extend(effects.iter().cloned());
        Ok(effects)
    }

    /// The in-flight dispatch of a step instance (by its name).
    pub fn dispatch_of(&self, name: &str) -> Option<Dispatch> {
        self.inflight
            .values()
            .find(|d| self.vm.instance_name(&d.inst) == name)
            .cloned()
    }

    /// Answers the in-flight action of step instance `name`.
    pub fn finish(&mut self, name: &str, result: Result<Value, ActionError>) {
        let d = self.dispatch_of(name).unwrap_or_else(|| {
            panic!(
                "no dispatch in flight for {name}; in flight: {:?}",
                self.in_flight_names()
            )
        });
        self.inflight.remove(&d.effect);
        self.apply(Event::ActionFinished {
            effect: d.effect,
            result,
        })
        .expect("action result applies");
    }

    /// Names of the instances with an action in flight.
    pub fn in_flight_names(&self) -> Vec<String> {
        self.inflight
            .values()
            .map(|d| self.vm.instance_name(&d.inst))
            .collect()
    }

    /// Advances the clock by `ms`, firing due timers in order.
    pub fn advance(&mut self, ms: u64) {
        let until = self.now + ms;
        loop {
            let next = self
                .timers
                .iter()
                .filter(|(_, due)| **due <= until)
                .min_by_key(|(id, due)| (**due, **id))
                .map(|(id, due)| (*id, *due));
            let Some((timer, due)) = next else { break };
            self.timers.remove(&timer);
            self.now = self.now.max(due);
            self.apply(Event::TimerFired { timer })
                .expect("timer applies");
        }
        self.now = until;
    }

    /// Resolves a pending decision.
    pub fn decide(&mut self, id: &str, choice: &str, by: &str) -> Result<Vec<Effect>, Rejected> {
        self.apply(Event::DecisionResolved {
            decision: id.into(),
            resolution: Resolution {
                choice: choice.into(),
                reasoning: None,
                data: None,
                resolved_by: Some(by.into()),
            },
        })
    }

    /// The pending decision requests.
    pub fn decisions(&self) -> Vec<DecisionRequest> {
        self.vm.pending_decisions().cloned().collect()
    }

    /// Records seen, by opcode event name.
    pub fn record_names(&self) -> Vec<&'static str> {
        self.effects
            .iter()
            .filter_map(|e| match e {
                Effect::Record(r) => Some(r.event_type()),
                _ => None,
            })
            .collect()
    }

    /// The run's status.
    pub fn status(&self) -> RunStatus {
        self.vm.status()
    }

    /// A step instance's view.
    pub fn step(&self, name: &str) -> opcode_vm::machine::StepView {
        self.vm
            .steps()
            .into_iter()
            .find(|v| v.name == name)
            .unwrap_or_else(|| panic!("no step {name}"))
    }

    /// A fresh VM that replayed this log.
    pub fn replayed(&self) -> Vm {
        let mut vm = Vm::new(Arc::clone(self.vm.plan()));
        for (at, event) in &self.log {
            vm.apply(*at, event, &self.host).expect("replay applies");
        }
        vm
    }
}
