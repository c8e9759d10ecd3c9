//! Flow steps: conditions, loops and parallel steps start child frames and
//! finish when those frames report back.

use serde_json::{Map, Value};

use super::Vm;
use super::state::{Flow, ForkState, LoopState, Owner, StepStatus, Wait};
use super::steps::{expression_error, kind_of};
use crate::effect::{InstRef, Record};
use crate::error::{ActionError, StepError};
use crate::host::Host;
use crate::instr::{ExprId, Instr};
use crate::policy::{LoopMode, ParallelMode};
use crate::value::branch_key;

impl Vm {
    /// The body instruction of a flow step instance.
    fn body_instr(&self, key: &InstRef) -> Option<Instr> {
        let pc = self.inst(key)?.pc;
        self.plan.program.code.get(pc as usize).cloned()
    }

    /// A condition: evaluate, pick a branch, run it.
    pub(super) fn branch(&mut self, key: &InstRef, expr: ExprId, table: u32, host: &dyn Host) {
        let value = match self.eval(expr, key, None, host) {
            Ok(v) => v,
            Err(error) => return self.fail_attempt(key, error, host),
        };
        let plan = self.plan.clone();
        let t = &plan.program.branch_tables[table as usize];
        let k = branch_key(&value);
        let chosen = t
            .branches
            .iter()
            .find(|(key, _)| *key == k)
            .map(|(_, b)| (k.clone(), *b))
            .or_else(|| t.default.map(|b| ("default".to_owned(), b)));
        self.record(Record::ConditionEvaluated {
            inst: key.clone(),
            branch: chosen
                .as_ref()
                .map_or_else(|| k.clone(), |(name, _)| name.clone()),
            value,
        });
        let Some((name, block)) = chosen else {
            let mut out = Map::new();
            out.insert("branch".into(), k.into());
            out.insert("skipped".into(), true.into());
            return self.complete(key, Value::Object(out), host);
        };
        let f = self.new_frame(
            block,
            key.iters.clone(),
            Owner::Step {
                inst: key.clone(),
                slot: 0,
            },
            None,
        );
        if let Some(inst) = self.inst_mut(key) {
            inst.flow = Some(Box::new(Flow::Branch {
                key: name,
                frame: f,
            }));
            inst.wait = Wait::Children;
        }
        self.start_frame(f, host);
    }

    /// A `for_each` loop: evaluate the list, then run the iterations.
    pub(super) fn for_each(
        &mut self,
        key: &InstRef,
        over: ExprId,
        max_iter: Option<u64>,
        host: &dyn Host,
    ) {
        let items = match self.eval(over, key, None, host) {
            Ok(Value::Array(items)) => items,
            Ok(other) => {
                let message = format!("`over` must give a list, not {}", kind_of(&other));
                return self.fail_attempt(key, expression_error(message), host);
            }
            Err(error) => return self.fail_attempt(key, error, host),
        };
        let mut items = items;
        let mut truncated = false;
        if let Some(max) = max_iter.and_then(|m| usize::try_from(m).ok())
            && items.len() > max
        {
            items.truncate(max);
            truncated = true;
        }
        let limit = self.loop_limit();
        if items.len() as u64 > limit {
            let message = format!(
                "the loop has {} items; a loop may make at most {limit} iterations (limits.loop_iterations)",
                items.len()
            );
            let error =
                crate::limits::exceeded("loop_iterations", items.len() as u64, limit, message);
            return self.fail_attempt(key, error, host);
        }
        if let Some(inst) = self.inst_mut(key) {
            inst.flow = Some(Box::new(Flow::Loop(LoopState {
                items: Some(items),
                index: 0,
                results: Vec::new(),
                truncated,
                frame: None,
            })));
        }
        self.loop_next(key, host);
    }

    /// Starts the next iteration, or completes the loop.
    pub(super) fn loop_next(&mut self, key: &InstRef, host: &dyn Host) {
        let Some(instr) = self.body_instr(key) else {
            return;
        };
        let (body, max_iter, mode) = match &instr {
            Instr::ForEach { body, max_iter, .. } => (*body, *max_iter, LoopMode::ForEach),
            Instr::Repeat {
                body,
                max_iter,
                mode,
                ..
            } => (*body, *max_iter, *mode),
            _ => return,
        };
        if self.inst(key).is_some_and(|i| i.flow.is_none())
            && let Some(inst) = self.inst_mut(key)
        {
            inst.flow = Some(Box::new(Flow::Loop(LoopState {
                items: None,
                index: 0,
                results: Vec::new(),
                truncated: false,
                frame: None,
            })));
        }
        let (index, item) = match self.inst(key).and_then(|i| i.flow.as_deref()) {
            Some(Flow::Loop(state)) => {
                let item = match &state.items {
                    Some(items) => match items.get(state.index as usize) {
                        Some(item) => Some(item.clone()),
                        None => return self.finish_loop(key, host),
                    },
                    None => None,
                };
                (state.index, item)
            }
            _ => return,
        };
        if max_iter.is_some_and(|m| u64::from(index) >= m) {
            return self.finish_loop(key, host);
        }
        let limit = self.loop_limit();
        if u64::from(index) >= limit {
            let message = format!(
                "the loop reached {limit} iterations, the most a loop may make (limits.loop_iterations)"
            );
            let error =
                crate::limits::exceeded("loop_iterations", u64::from(index) + 1, limit, message);
            return self.fail_attempt(key, error, host);
        }
        let held = self.nested.len() as u64;
        let body_steps = self.plan.program.blocks[body as usize].steps.len() as u64;
        let instances = self.instance_limit();
        if held + body_steps > instances {
            let message = format!(
                "the run's loops have made {held} step instances; one more iteration would pass \
                 {instances}, the most one run may hold (limits.step_instances)"
            );
            let error =
                crate::limits::exceeded("step_instances", held + body_steps, instances, message);
            return self.fail_attempt(key, error, host);
        }
        if mode == LoopMode::While {
            match self.loop_condition(key, index, host) {
                Ok(true) => {}
                Ok(false) => return self.finish_loop(key, host),
                Err(error) => return self.fail_attempt(key, error, host),
            }
        }
        let mut iters = key.iters.clone();
        iters.push(index);
        let var = (item.unwrap_or(Value::Null), index);
        let f = self.new_frame(
            body,
            iters,
            Owner::Step {
                inst: key.clone(),
                slot: index,
            },
            Some(var),
        );
        if let Some(inst) = self.inst_mut(key) {
            inst.wait = Wait::Children;
            if let Some(Flow::Loop(state)) = inst.flow.as_deref_mut() {
                state.frame = Some(f);
            }
        }
        self.record(Record::LoopIteration {
            inst: key.clone(),
            index,
        });
        self.start_frame(f, host);
    }

    /// Iterations one loop instance of this run may make.
    fn loop_limit(&self) -> u64 {
        self.meta
            .max_loop_iterations
            .unwrap_or(crate::limits::LOOP_ITERATIONS)
    }

    /// Step instances this run's loops may make in all.
    fn instance_limit(&self) -> u64 {
        self.meta
            .max_step_instances
            .unwrap_or(crate::limits::STEP_INSTANCES)
    }

    /// Evaluates a `while`/`until` condition for iteration `index`.
    fn loop_condition(
        &self,
        key: &InstRef,
        index: u32,
        host: &dyn Host,
    ) -> Result<bool, ActionError> {
        let Some(Instr::Repeat { cond, .. }) = self.body_instr(key) else {
            return Ok(false);
        };
        match self.eval(cond, key, Some(index), host)? {
            Value::Bool(b) => Ok(b),
            other => Err(expression_error(format!(
                "the loop condition must give true or false, not {}",
                kind_of(&other)
            ))),
        }
    }

    fn finish_loop(&mut self, key: &InstRef, host: &dyn Host) {
        let output = match self.inst(key).and_then(|i| i.flow.as_deref()) {
            Some(Flow::Loop(state)) => {
                let mut out = Map::new();
                out.insert("iterations".into(), state.results.len().into());
                out.insert("results".into(), Value::Array(state.results.clone()));
                out.insert("truncated".into(), state.truncated.into());
                Value::Object(out)
            }
            _ => Value::Null,
        };
        self.complete(key, output, host);
    }

    /// A parallel step: start its branches.
    pub(super) fn fork(&mut self, key: &InstRef, host: &dyn Host) {
        let Some(Instr::Fork { branches, .. }) = self.body_instr(key) else {
            return;
        };
        if let Some(inst) = self.inst_mut(key) {
            inst.flow = Some(Box::new(Flow::Fork(ForkState {
                frames: vec![None; branches.len()],
                outputs: vec![None; branches.len()],
                started: 0,
                running: 0,
                failed: 0,
                first_error: None,
            })));
            inst.wait = Wait::Children;
        }
        self.fork_more(key, host);
    }

    /// Starts branches while the concurrency limit allows.
    fn fork_more(&mut self, key: &InstRef, host: &dyn Host) {
        let Some(Instr::Fork {
            branches,
            max_concurrency,
            ..
        }) = self.body_instr(key)
        else {
            return;
        };
        loop {
            let next = match self.inst(key).and_then(|i| i.flow.as_deref()) {
                Some(Flow::Fork(state)) => {
                    let room = max_concurrency.is_none_or(|m| u64::from(state.running) < m);
                    ((state.started as usize) < branches.len() && room).then_some(state.started)
                }
                _ => None,
            };
            let Some(slot) = next else { return };
            let block = branches[slot as usize];
            let f = self.new_frame(
                block,
                key.iters.clone(),
                Owner::Step {
                    inst: key.clone(),
                    slot,
                },
                None,
            );
            if let Some(inst) = self.inst_mut(key)
                && let Some(Flow::Fork(state)) = inst.flow.as_deref_mut()
            {
                state.frames[slot as usize] = Some(f);
                state.started += 1;
                state.running += 1;
            }
            self.start_frame(f, host);
            // The branch may have finished the whole step already.
            if !self.inst(key).is_some_and(|i| i.wait == Wait::Children) {
                return;
            }
        }
    }

    /// A child frame of a flow step ended.
    pub(super) fn child_ended(
        &mut self,
        key: &InstRef,
        slot: u32,
        result: Result<Value, StepError>,
        host: &dyn Host,
    ) {
        let Some(inst) = self.inst(key) else { return };
        if inst.wait != Wait::Children || inst.status != StepStatus::Running {
            return;
        }
        // Which flow, not the flow itself: a loop's state holds every item
        // and result, and copying it at each iteration made loops quadratic.
        let branch = match inst.flow.as_deref() {
            Some(Flow::Branch { key: name, .. }) => Some(Some(name.clone())),
            Some(Flow::Loop(_)) => Some(None),
            _ => None,
        };
        let fork = matches!(inst.flow.as_deref(), Some(Flow::Fork(_)));
        match (branch, fork, result) {
            (Some(Some(name)), _, Ok(output)) => {
                let mut out = Map::new();
                out.insert("branch".into(), name.into());
                out.insert("output".into(), output);
                self.complete(key, Value::Object(out), host);
            }
            (Some(None), _, Ok(output)) => self.iteration_done(key, slot, output, host),
            (None, true, Ok(output)) => self.branch_done(key, slot, output, host),
            (None, true, Err(error)) => self.branch_failed(key, error, host),
            (_, _, Err(error)) => self.fail_attempt(key, error.error, host),
            (None, false, Ok(_)) => {}
        }
    }

    fn iteration_done(&mut self, key: &InstRef, index: u32, output: Value, host: &dyn Host) {
        if let Some(inst) = self.inst_mut(key)
            && let Some(Flow::Loop(state)) = inst.flow.as_deref_mut()
        {
            state.results.push(output);
            state.index = index + 1;
            state.frame = None;
        }
        if let Some(Instr::Repeat {
            mode: LoopMode::Until,
            ..
        }) = self.body_instr(key)
        {
            match self.loop_condition(key, index, host) {
                Ok(true) => return self.finish_loop(key, host),
                Ok(false) => {}
                Err(error) => return self.fail_attempt(key, error, host),
            }
        }
        self.loop_next(key, host);
    }

    fn branch_done(&mut self, key: &InstRef, slot: u32, output: Value, host: &dyn Host) {
        let Some(Instr::Fork { mode, branches, .. }) = self.body_instr(key) else {
            return;
        };
        if mode == ParallelMode::Race {
            let others: Vec<usize> = match self.inst(key).and_then(|i| i.flow.as_deref()) {
                Some(Flow::Fork(state)) => state
                    .frames
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != slot as usize)
                    .filter_map(|(_, f)| *f)
                    .collect(),
                _ => Vec::new(),
            };
            for f in others {
                self.cancel_frame(f, "race_lost");
            }
            let mut out = Map::new();
            out.insert("mode".into(), "race".into());
            out.insert("winner".into(), slot.into());
            out.insert("output".into(), output);
            return self.complete(key, Value::Object(out), host);
        }
        let all_done = match self.inst_mut(key).and_then(|i| i.flow.as_deref_mut()) {
            Some(Flow::Fork(state)) => {
                state.outputs[slot as usize] = Some(output);
                state.running = state.running.saturating_sub(1);
                state.outputs.iter().all(Option::is_some)
            }
            _ => false,
        };
        if all_done {
            let outputs: Vec<Value> = match self.inst(key).and_then(|i| i.flow.as_deref()) {
                Some(Flow::Fork(state)) => state
                    .outputs
                    .iter()
                    .map(|o| o.clone().unwrap_or(Value::Null))
                    .collect(),
                _ => Vec::with_capacity(branches.len()),
            };
            let mut out = Map::new();
            out.insert("mode".into(), "all".into());
            out.insert("branches".into(), Value::Array(outputs));
            self.complete(key, Value::Object(out), host);
        } else {
            self.fork_more(key, host);
        }
    }

    fn branch_failed(&mut self, key: &InstRef, error: StepError, host: &dyn Host) {
        let Some(Instr::Fork { mode, branches, .. }) = self.body_instr(key) else {
            return;
        };
        let (running_frames, all_failed, first) =
            match self.inst_mut(key).and_then(|i| i.flow.as_deref_mut()) {
                Some(Flow::Fork(state)) => {
                    state.running = state.running.saturating_sub(1);
                    state.failed += 1;
                    if state.first_error.is_none() {
                        state.first_error = Some(error.clone());
                    }
                    let frames: Vec<usize> = state.frames.iter().flatten().copied().collect();
                    (
                        frames,
                        state.failed as usize == branches.len(),
                        state.first_error.clone(),
                    )
                }
                _ => return,
            };
        if mode == ParallelMode::All {
            for f in running_frames {
                self.cancel_frame(f, "cancelled");
            }
            return self.fail_attempt(key, error.error, host);
        }
        if all_failed {
            let error = first.unwrap_or(error);
            self.fail_attempt(key, error.error, host);
        } else {
            self.fork_more(key, host);
        }
    }
}
