//! The order in which a workflow's steps are shown: the DAG's, not the
//! alphabet's (`s1, s2, … s10`, a step after those it depends on).

use crate::instr::{BlockId, StepId};
use crate::program::Program;

impl Program {
    /// Every step id, in DAG order: a block's steps level by level (each
    /// step after the steps it depends on, source order within a level),
    /// a step's nested blocks right after it, fallback-only steps at the
    /// end of their block, the hooks last.
    pub fn step_order(&self) -> Vec<&str> {
        let mut order = Vec::with_capacity(self.steps.len());
        let roots = std::iter::once(0)
            .chain(self.on_complete)
            .chain(self.on_error);
        for block in roots {
            self.push_block(block, &mut order);
        }
        order
    }

    fn push_block<'a>(&'a self, block: BlockId, order: &mut Vec<&'a str>) {
        let Some(found) = self.blocks.get(block as usize) else {
            return;
        };
        let scheduled = found.levels.iter().flatten();
        let unscheduled = found
            .steps
            .iter()
            .filter(|s| !found.levels.iter().any(|level| level.contains(s)));
        for &step in scheduled.chain(unscheduled) {
            self.push_step(step, order);
        }
    }

    fn push_step<'a>(&'a self, step: StepId, order: &mut Vec<&'a str>) {
        let Some(info) = self.steps.get(step as usize) else {
            return;
        };
        order.push(&info.id);
        let owned = self
            .blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| b.owner == Some(step));
        for (index, _) in owned {
            self.push_block(index as BlockId, order);
        }
    }
}
