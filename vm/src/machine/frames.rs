//! Frames: starting a block instance, starting its steps as their
//! dependencies finish (in level order), and reporting to the owner when it
//! ends.

use serde_json::{Map, Value};

use super::Vm;
use super::state::{Frame, FrameId, FrameState, Instance, Owner, Phase, StepStatus, Wait};
use crate::effect::{InstRef, Record};
use crate::error::{ActionError, StepError};
use crate::host::Host;
use crate::instr::{BlockId, StepId};
use crate::program::BlockRole;

impl Vm {
    /// The instance, if it exists.
    pub(super) fn inst(&self, key: &InstRef) -> Option<&Instance> {
        if key.iters.is_empty() {
            self.top.get(key.step as usize).and_then(Option::as_ref)
        } else {
            self.nested.get(key)
        }
    }

    /// The instance, mutably.
    pub(super) fn inst_mut(&mut self, key: &InstRef) -> Option<&mut Instance> {
        if key.iters.is_empty() {
            self.top.get_mut(key.step as usize).and_then(Option::as_mut)
        } else {
            self.nested.get_mut(key)
        }
    }

    /// Stores an instance.
    pub(super) fn put_inst(&mut self, key: InstRef, inst: Instance) {
        if key.iters.is_empty() {
            if let Some(slot) = self.top.get_mut(key.step as usize) {
                *slot = Some(inst);
            }
        } else {
            self.nested.insert(key, inst);
        }
    }

    /// Creates a frame for `block`.
    pub(super) fn new_frame(
        &mut self,
        block: BlockId,
        iters: Vec<u32>,
        owner: Owner,
        loop_var: Option<(Value, u32)>,
    ) -> FrameId {
        let id = self.frames.len();
        let innermost_loop = if loop_var.is_some() {
            Some(id)
        } else {
            match &owner {
                Owner::Run => None,
                Owner::Step { inst, .. } => self
                    .inst(inst)
                    .and_then(|i| self.frames[i.frame].innermost_loop),
            }
        };
        let program = &self.plan.program;
        let b = &program.blocks[block as usize];
        let waiting: Vec<u32> = b.deps.iter().map(|d| d.len() as u32).collect();
        let unfinished = b
            .steps
            .iter()
            .filter(|&&s| !program.steps[s as usize].fallback_only)
            .count() as u32;
        self.frames.push(Frame {
            block,
            iters,
            owner,
            innermost_loop,
            loop_var,
            started: vec![false; b.steps.len()],
            waiting,
            unfinished,
            state: FrameState::Running,
        });
        id
    }

    /// Starts every step of a new frame that has no dependencies.
    pub(super) fn start_frame(&mut self, f: FrameId, host: &dyn Host) {
        if self.frames[f].unfinished == 0 {
            self.frame_ended(f, Ok(Value::Null), host);
            return;
        }
        self.start_ready(f, host);
    }

    /// Starts, in level order, the frame's steps whose dependencies have all
    /// finished and that have not started.
    pub(super) fn start_ready(&mut self, f: FrameId, host: &dyn Host) {
        let block = self.frames[f].block as usize;
        let ready = {
            let frame = &self.frames[f];
            let program = &self.plan.program;
            program.blocks[block]
                .steps
                .iter()
                .enumerate()
                .filter(|&(pos, &s)| {
                    !frame.started[pos]
                        && frame.waiting[pos] == 0
                        && !program.steps[s as usize].fallback_only
                })
                .map(|(_, &s)| s)
                .collect()
        };
        self.start_steps(f, ready, host);
    }

    /// Starts `ready` steps of frame `f` in rank order, stopping when a
    /// start ends the frame or halts the run.
    fn start_steps(&mut self, f: FrameId, mut ready: Vec<StepId>, host: &dyn Host) {
        ready.sort_by_key(|&s| self.plan.rank[s as usize]);
        for s in ready {
            if self.frames[f].state != FrameState::Running || self.halted {
                return;
            }
            let pos = self.plan.position[s as usize] as usize;
            self.frames[f].started[pos] = true;
            self.start_step(f, s, host);
        }
    }

    /// A step instance finished (completed, skipped, or failed and handled):
    /// release its dependents, and end the frame when it was the last.
    pub(super) fn step_finished(&mut self, key: &InstRef, host: &dyn Host) {
        let Some(f) = self.inst(key).map(|i| i.frame) else {
            return;
        };
        if self.frames[f].state != FrameState::Running {
            return;
        }
        let block = self.frames[f].block as usize;
        let pos = self.plan.position[key.step as usize] as usize;
        let mut released = Vec::new();
        {
            let frame = &mut self.frames[f];
            let program = &self.plan.program;
            frame.unfinished = frame.unfinished.saturating_sub(1);
            for &d in &self.plan.dependents[block][pos] {
                let d = d as usize;
                let w = &mut frame.waiting[d];
                *w = w.saturating_sub(1);
                let s = program.blocks[block].steps[d];
                if *w == 0 && !frame.started[d] && !program.steps[s as usize].fallback_only {
                    released.push(s);
                }
            }
        }
        if self.frames[f].unfinished == 0 {
            let output = self.frame_output(f);
            self.frame_ended(f, Ok(output), host);
        } else if !released.is_empty() {
            self.start_steps(f, released, host);
        }
    }

    /// A step instance failed and nothing handled it: its frame fails.
    pub(super) fn step_failed_unhandled(
        &mut self,
        key: &InstRef,
        error: StepError,
        host: &dyn Host,
    ) {
        let Some(f) = self.inst(key).map(|i| i.frame) else {
            return;
        };
        if self.frames[f].state != FrameState::Running {
            return;
        }
        self.frames[f].state = FrameState::Failed;
        self.cancel_frame_contents(f, "cancelled");
        self.frame_ended(f, Err(error), host);
    }

    /// What a finished frame produced: for the top level, each leaf step's
    /// output by id; for nested lists, the last step's output.
    fn frame_output(&self, f: FrameId) -> Value {
        let frame = &self.frames[f];
        let block = &self.plan.program.blocks[frame.block as usize];
        let output_of = |s: StepId| {
            let key = InstRef {
                step: s,
                iters: frame.iters.clone(),
            };
            self.inst(&key).map_or(Value::Null, |i| i.output.clone())
        };
        if block.role == BlockRole::Root {
            let mut map = Map::new();
            for &s in &block.leaves {
                map.insert(self.plan.id(s).to_owned(), output_of(s));
            }
            Value::Object(map)
        } else {
            block.leaves.last().map_or(Value::Null, |&s| output_of(s))
        }
    }

    /// A frame ended: tell its owner.
    pub(super) fn frame_ended(
        &mut self,
        f: FrameId,
        result: Result<Value, StepError>,
        host: &dyn Host,
    ) {
        if self.frames[f].state == FrameState::Running {
            self.frames[f].state = if result.is_ok() {
                FrameState::Done
            } else {
                FrameState::Failed
            };
        }
        match self.frames[f].owner.clone() {
            Owner::Run => self.run_frame_ended(result, host),
            Owner::Step { inst, slot } => self.child_ended(&inst, slot, result, host),
        }
    }

    /// The top level or a hook ended.
    fn run_frame_ended(&mut self, result: Result<Value, StepError>, host: &dyn Host) {
        match (self.phase.clone(), result) {
            (Phase::Steps, Ok(leaves)) => {
                let output = match self.plan.program.output {
                    Some(t) => match self.render_output(t) {
                        Ok(v) => v,
                        Err(error) => {
                            self.fail_run(
                                StepError {
                                    step: String::new(),
                                    error,
                                },
                                host,
                            );
                            return;
                        }
                    },
                    None => leaves,
                };
                match self.plan.program.on_complete {
                    Some(hook) => {
                        self.phase = Phase::CompleteHook(output);
                        let f = self.new_frame(hook, Vec::new(), Owner::Run, None);
                        self.start_frame(f, host);
                    }
                    None => self.complete_run(output),
                }
            }
            (Phase::Steps, Err(error)) => self.fail_run(error, host),
            (Phase::CompleteHook(output), result) => {
                if let Err(error) = result {
                    self.record(Record::HookFailed {
                        error: Box::new(error),
                    });
                }
                self.complete_run(output);
            }
            (Phase::ErrorHook(error), result) => {
                if let Err(hook_error) = result {
                    self.record(Record::HookFailed {
                        error: Box::new(hook_error),
                    });
                }
                self.finish_failed(error);
            }
            (Phase::Done, _) => {}
        }
    }

    /// The run completed with `output`.
    pub(super) fn complete_run(&mut self, output: Value) {
        if let Some(t) = self.run_timer.take() {
            self.cancel_timer(t);
        }
        self.phase = Phase::Done;
        self.status = super::RunStatus::Completed;
        self.output = Some(output.clone());
        self.record(Record::RunCompleted { output });
    }

    /// The run failed: stop everything, run `on_error` if there is one.
    pub(super) fn fail_run(&mut self, error: StepError, host: &dyn Host) {
        if matches!(self.phase, Phase::ErrorHook(_) | Phase::Done) {
            return;
        }
        self.cancel_everything("cancelled");
        if let Value::Object(map) = &mut self.workflow {
            let mut e = Map::new();
            e.insert("code".into(), error.error.code.clone().into());
            e.insert("kind".into(), error.error.kind.clone().into());
            e.insert("message".into(), error.error.message.clone().into());
            e.insert("step_id".into(), error.step.clone().into());
            map.insert("error".into(), Value::Object(e));
        }
        match self.plan.program.on_error {
            Some(hook) => {
                self.phase = Phase::ErrorHook(error);
                self.halted = false;
                let f = self.new_frame(hook, Vec::new(), Owner::Run, None);
                self.start_frame(f, host);
            }
            None => self.finish_failed(error),
        }
    }

    fn finish_failed(&mut self, error: StepError) {
        if let Some(t) = self.run_timer.take() {
            self.cancel_timer(t);
        }
        self.phase = Phase::Done;
        self.status = super::RunStatus::Failed;
        self.error = Some(error.clone());
        self.record(Record::RunFailed {
            error: Box::new(error),
        });
    }

    /// The run was cancelled: stop everything; no hook runs. Its error
    /// (R0106) says why, for whoever reads its status.
    pub(super) fn cancel_run(&mut self, reason: &str) {
        self.cancel_everything("cancelled");
        if let Some(t) = self.run_timer.take() {
            self.cancel_timer(t);
        }
        self.admitting = false;
        self.phase = Phase::Done;
        self.status = super::RunStatus::Cancelled;
        let error = ActionError::new(crate::codes::R0106, "CANCELLED_ERROR", reason, false);
        self.error = Some(StepError {
            step: String::new(),
            error,
        });
        self.record(Record::RunCancelled {
            reason: reason.to_owned(),
        });
    }

    /// Marks a finished instance's status and records it (the caller then
    /// calls [`Vm::step_finished`] or forwards to the step it stands in for).
    pub(super) fn set_finished(&mut self, key: &InstRef, status: StepStatus, output: Value) {
        if let Some(d) = self.inst(key).and_then(|i| i.deadline) {
            self.cancel_timer(d);
        }
        if let Some(inst) = self.inst_mut(key) {
            inst.status = status;
            inst.output = output;
            inst.wait = Wait::Nothing;
            inst.deadline = None;
            inst.flow = None;
        }
    }
}
