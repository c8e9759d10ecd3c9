//! Tables derived from a [`Program`] once, shared by all its runs.

use std::sync::Arc;

use crate::instr::StepId;
use crate::program::Program;

/// A Program with the lookup tables the VM needs.
#[derive(Debug)]
pub struct Plan {
    /// The program.
    pub program: Program,
    /// Each step's position in its block.
    pub position: Vec<u32>,
    /// Each step's dispatch rank in its block (level, then position).
    pub rank: Vec<u32>,
    /// For each block and position: the positions that depend on it.
    pub dependents: Vec<Vec<Vec<u32>>>,
    /// The inputs the workflow declares (`input_schema.properties`, and
    /// the keys of the defaults): one not given reads as null, any other
    /// missing one is R0102.
    pub declared_inputs: std::collections::BTreeSet<String>,
}

impl Plan {
    /// Builds the tables; the program must be valid ([`Program::validate`]).
    pub fn new(program: Program) -> Arc<Plan> {
        let n = program.steps.len();
        let mut position = vec![0u32; n];
        let mut rank = vec![u32::MAX; n];
        let mut dependents = Vec::with_capacity(program.blocks.len());
        for block in &program.blocks {
            for (i, &s) in block.steps.iter().enumerate() {
                position[s as usize] = i as u32;
            }
            let mut r = 0;
            for level in &block.levels {
                for &s in level {
                    rank[s as usize] = r;
                    r += 1;
                }
            }
            let mut deps_of = vec![Vec::new(); block.steps.len()];
            for (i, deps) in block.deps.iter().enumerate() {
                for d in deps {
                    if let Some(p) = block.steps.iter().position(|s| s == d) {
                        deps_of[p].push(i as u32);
                    }
                }
            }
            dependents.push(deps_of);
        }
        let declared_inputs = declared_inputs(&program);
        Arc::new(Plan {
            program,
            position,
            rank,
            dependents,
            declared_inputs,
        })
    }

    /// The step's id.
    pub fn id(&self, step: StepId) -> &str {
        &self.program.steps[step as usize].id
    }

    /// The name of a step instance: the step id, with loop indices in
    /// brackets (`hash`, `hash[2]`, `hash[1,0]`).
    pub fn instance_name(&self, inst: &crate::InstRef) -> String {
        let id = self.id(inst.step);
        if inst.iters.is_empty() {
            return id.to_owned();
        }
        let indices: Vec<String> = inst.iters.iter().map(u32::to_string).collect();
        format!("{id}[{}]", indices.join(","))
    }
}

/// The input names `program` declares: its schema's properties and its
/// defaults' keys.
fn declared_inputs(program: &Program) -> std::collections::BTreeSet<String> {
    let run = &program.run;
    let constant = |id: Option<u32>| id.and_then(|c| program.consts.get(c as usize));
    let properties = constant(run.input_schema)
        .and_then(|schema| schema.get("properties"))
        .and_then(serde_json::Value::as_object);
    let defaults = constant(run.input_defaults).and_then(serde_json::Value::as_object);
    properties
        .into_iter()
        .chain(defaults)
        .flat_map(|map| map.keys().cloned())
        .collect()
}
