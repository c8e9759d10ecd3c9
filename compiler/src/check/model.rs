//! The resolved shape of a workflow: every step and block numbered, with its
//! parent, its position and its enclosing loops.
//!
//! Steps are numbered in pre-order (a step before the steps nested in it),
//! top level first, then the `on_complete` and `on_error` hooks. Checks and
//! codegen both work on these indices instead of walking the AST by name.

use rustc_hash::FxHashMap as HashMap;

use crate::ast::{Block, Document, Step, StepKind};
use crate::diagnostics::codes::E0020;
use crate::diagnostics::{Diagnostic, Diagnostics, Fix, PatchOp};

/// Index of a step in [`Model::steps`].
pub type StepIdx = usize;
/// Index of a block in [`Model::blocks`].
pub type BlockIdx = usize;

/// What a block is for: the same roles the Program's blocks carry.
pub use opcode_vm::program::BlockRole;

/// One step in the model.
#[derive(Debug)]
pub struct StepInfo<'a> {
    /// The AST node.
    pub step: &'a Step,
    /// The block it belongs to.
    pub block: BlockIdx,
    /// Its index in that block.
    pub position: usize,
    /// The step owning that block (`None` at the top level and in hooks).
    pub parent: Option<StepIdx>,
    /// Enclosing loop steps, outermost first.
    pub loops: Vec<StepIdx>,
    /// Blocks nested directly in this step.
    pub children: Vec<BlockIdx>,
}

/// One block in the model.
#[derive(Debug)]
pub struct BlockInfo<'a> {
    /// The AST node (`None` for a hook, which is a single step).
    pub block: Option<&'a Block>,
    /// The step owning it (`None` for root and hooks).
    pub owner: Option<StepIdx>,
    /// What it is for.
    pub role: BlockRole,
    /// Its steps, in source order.
    pub steps: Vec<StepIdx>,
}

impl BlockInfo<'_> {
    /// Do the block's steps run in source order (every block but the root)?
    pub fn sequential(&self) -> bool {
        self.role != BlockRole::Root
    }
}

/// The numbered workflow.
#[derive(Debug)]
pub struct Model<'a> {
    /// Every step, in pre-order.
    pub steps: Vec<StepInfo<'a>>,
    /// Every block; block 0 is the root.
    pub blocks: Vec<BlockInfo<'a>>,
    /// Step index by id (the first step with that id).
    pub by_id: HashMap<&'a str, StepIdx>,
}

impl<'a> Model<'a> {
    /// Numbers the document's steps and reports duplicate ids.
    pub fn build(doc: &'a Document, sink: &mut Diagnostics) -> Model<'a> {
        let mut model = Model {
            steps: Vec::new(),
            blocks: Vec::new(),
            by_id: HashMap::default(),
        };
        model.add_block(&doc.workflow.steps, None, BlockRole::Root, &[]);
        let hooks = [
            (&doc.workflow.on_complete, BlockRole::OnComplete),
            (&doc.workflow.on_error, BlockRole::OnError),
        ];
        for (hook, role) in hooks {
            if let Some(step) = hook {
                let block = model.blocks.len();
                model.blocks.push(BlockInfo {
                    block: None,
                    owner: None,
                    role,
                    steps: Vec::new(),
                });
                model.add_step(step, block, 0, None, &[]);
            }
        }
        model.report_duplicates(sink);
        model
    }

    /// E0020 for every step whose id an earlier step has, with a rename
    /// to an id no step has as the fix.
    fn report_duplicates(&self, sink: &mut Diagnostics) {
        let taken: std::collections::HashSet<&str> = self
            .steps
            .iter()
            .map(|s| s.step.id.value.as_str())
            .collect();
        let mut given: std::collections::HashSet<String> = std::collections::HashSet::new();
        for (idx, info) in self.steps.iter().enumerate() {
            let id = info.step.id.value.as_str();
            let Some(&first) = self.by_id.get(id) else {
                continue;
            };
            if id.is_empty() || first == idx {
                continue;
            }
            // Among as many candidates as there are steps, one is free.
            let fresh = (2..self.steps.len() + 3)
                .map(|n| format!("{id}-{n}"))
                .find(|c| !taken.contains(c.as_str()) && !given.contains(c))
                .unwrap_or_default();
            given.insert(fresh.clone());
            let step = info.step;
            sink.push(
                Diagnostic::error(E0020, step.id.span, format!("duplicate step id `{id}`"))
                    .with_secondary(self.steps[first].step.id.span, "first used here")
                    .with_help(
                        "step ids must be unique in the whole workflow, nested steps included",
                    )
                    .with_fix(Fix::replace(
                        format!("rename it `{fresh}`"),
                        step.id.span,
                        format!("\"{fresh}\""),
                        Some(PatchOp::Replace {
                            path: format!("{}/id", step.pointer),
                            value: fresh.clone().into(),
                        }),
                    ))
                    .with_pointer(format!("{}/id", step.pointer)),
            );
        }
    }

    fn add_block(
        &mut self,
        block: &'a Block,
        owner: Option<StepIdx>,
        role: BlockRole,
        loops: &[StepIdx],
    ) -> BlockIdx {
        let idx = self.blocks.len();
        self.blocks.push(BlockInfo {
            block: Some(block),
            owner,
            role,
            steps: Vec::with_capacity(block.steps.len()),
        });
        for (position, step) in block.steps.iter().enumerate() {
            self.add_step(step, idx, position, owner, loops);
        }
        idx
    }

    fn add_step(
        &mut self,
        step: &'a Step,
        block: BlockIdx,
        position: usize,
        parent: Option<StepIdx>,
        loops: &[StepIdx],
    ) {
        let idx = self.steps.len();
        self.steps.push(StepInfo {
            step,
            block,
            position,
            parent,
            loops: loops.to_vec(),
            children: Vec::new(),
        });
        self.blocks[block].steps.push(idx);
        let id = step.id.value.as_str();
        if !id.is_empty() {
            // The first step with an id owns it; later ones are reported
            // once every id is known (`report_duplicates`).
            self.by_id.entry(id).or_insert(idx);
        }
        let mut inner_loops = loops.to_vec();
        if matches!(step.kind, StepKind::Loop(_)) {
            inner_loops.push(idx);
        }
        let roles: Vec<(BlockRole, &Block)> = match &step.kind {
            StepKind::Condition(c) => c
                .branches
                .iter()
                .map(|(k, b)| (BlockRole::Branch(k.value.clone()), b))
                .chain(c.default.iter().map(|b| (BlockRole::Default, b)))
                .collect(),
            StepKind::Loop(l) => vec![(BlockRole::Body, &l.body)],
            StepKind::Parallel(p) => p
                .branches
                .iter()
                .enumerate()
                .map(|(i, b)| (BlockRole::Parallel(u32::try_from(i).unwrap_or(u32::MAX)), b))
                .collect(),
            StepKind::Action(_) | StepKind::Wait(_) | StepKind::Reasoning(_) => Vec::new(),
        };
        for (role, child) in roles {
            let child_idx = self.add_block(child, Some(idx), role, &inner_loops);
            self.steps[idx].children.push(child_idx);
        }
    }

    /// The step with this id.
    pub fn step(&self, id: &str) -> Option<&StepInfo<'a>> {
        self.by_id.get(id).map(|&i| &self.steps[i])
    }

    /// Is `inner` nested (at any depth) inside `outer`?
    pub fn is_inside(&self, inner: StepIdx, outer: StepIdx) -> bool {
        let mut current = self.steps[inner].parent;
        while let Some(p) = current {
            if p == outer {
                return true;
            }
            current = self.steps[p].parent;
        }
        false
    }

    /// The chain of ids from the top level down to the step (`[loop, cond, step]`).
    pub fn path_of(&self, idx: StepIdx) -> Vec<StepIdx> {
        let mut chain = vec![idx];
        let mut current = self.steps[idx].parent;
        while let Some(p) = current {
            chain.push(p);
            current = self.steps[p].parent;
        }
        chain.reverse();
        chain
    }
}
