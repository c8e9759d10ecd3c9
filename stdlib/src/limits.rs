//! The run-time bounds of spec/limits.md, as the settings' `limits` block
//! may raise them.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::cel::budget::Budget;
use crate::isolation::Size;

/// The settings' `limits` block; every field optional.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Block {
    /// Units of work one CEL evaluation may take.
    pub cel_cost: Option<u64>,
    /// Bytes of any value one CEL evaluation may build.
    pub cel_memory: Option<Size>,
    /// Memory of one jq evaluation.
    pub jq_memory: Option<Size>,
    /// Outputs of one jq evaluation.
    pub jq_outputs: Option<u64>,
    /// Memory of one Expr evaluation.
    pub expr_memory: Option<Size>,
    /// Iterations of one loop instance.
    pub loop_iterations: Option<u64>,
    /// Step instances the loops of one run may make in all.
    pub step_instances: Option<u64>,
    /// Runs one run tree may nest (`workflow.run` in `workflow.run`).
    pub run_depth: Option<u64>,
    /// Runs one run tree may make besides its root.
    pub run_tree: Option<u64>,
    /// Children of one `workflow.map`.
    pub map_items: Option<u64>,
    /// Bytes of one action's output (as JSON).
    pub output_bytes: Option<Size>,
    /// Bytes of all the action outputs one run takes in (as JSON).
    pub run_outputs: Option<Size>,
    /// Bytes of all the action outputs the runs of one tree take in.
    pub tree_outputs: Option<Size>,
    /// Recoveries a run may end the daemon in before it is quarantined.
    pub recoveries: Option<u32>,
    /// Open Streamable HTTP sessions.
    pub sessions: Option<usize>,
    /// How long a Streamable HTTP session may stay idle (`30m`).
    pub session_idle: Option<String>,
}

/// The bounds in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// One CEL evaluation.
    pub cel: Budget,
    /// Bytes of memory one jq evaluation may use.
    pub jq_memory: u64,
    /// Outputs one jq evaluation may give.
    pub jq_outputs: u64,
    /// Bytes of memory one Expr evaluation may use.
    pub expr_memory: u64,
    /// Iterations of one loop instance.
    pub loop_iterations: u64,
    /// Step instances the loops of one run may make in all.
    pub step_instances: u64,
    /// Runs one run tree may nest.
    pub run_depth: u64,
    /// Runs one run tree may make besides its root.
    pub run_tree: u64,
    /// Children of one `workflow.map`.
    pub map_items: u64,
    /// Bytes of one action's output.
    pub output_bytes: u64,
    /// Bytes of all the action outputs one run takes in.
    pub run_outputs: u64,
    /// Bytes of all the action outputs the runs of one tree take in.
    pub tree_outputs: u64,
    /// Recoveries before a run is quarantined.
    pub recoveries: u32,
    /// Open Streamable HTTP sessions.
    pub sessions: usize,
    /// How long a Streamable HTTP session may stay idle.
    pub session_idle: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            cel: Budget::default(),
            jq_memory: 1 << 30,
            jq_outputs: 100_000,
            expr_memory: 1 << 30,
            loop_iterations: opcode_vm::limits::LOOP_ITERATIONS,
            step_instances: opcode_vm::limits::STEP_INSTANCES,
            run_depth: 16,
            run_tree: 10_000,
            map_items: 10_000,
            output_bytes: 64 << 20,
            run_outputs: opcode_vm::limits::RUN_OUTPUT_BYTES,
            tree_outputs: 4 * opcode_vm::limits::RUN_OUTPUT_BYTES,
            recoveries: 3,
            sessions: 1000,
            session_idle: Duration::from_mins(30),
        }
    }
}

impl Limits {
    /// The bounds the settings' `limits` block gives (`null`: the defaults).
    pub fn parse(value: Option<&Value>) -> Result<Limits, String> {
        let block = match value {
            None | Some(Value::Null) => Block::default(),
            Some(v) => Block::deserialize(v).map_err(|e| format!("`limits`: {e}"))?,
        };
        let base = Limits::default();
        let session_idle = match &block.session_idle {
            Some(text) => crate::call::parse_duration(text)
                .map_err(|e| format!("`limits.session_idle`: {e}"))?,
            None => base.session_idle,
        };
        Ok(Limits {
            cel: Budget {
                cost: block.cel_cost.unwrap_or(base.cel.cost),
                memory: block.cel_memory.map_or(base.cel.memory, |s| s.0),
            },
            jq_memory: block.jq_memory.map_or(base.jq_memory, |s| s.0),
            jq_outputs: block.jq_outputs.unwrap_or(base.jq_outputs),
            expr_memory: block.expr_memory.map_or(base.expr_memory, |s| s.0),
            loop_iterations: block.loop_iterations.unwrap_or(base.loop_iterations),
            step_instances: block.step_instances.unwrap_or(base.step_instances),
            run_depth: block.run_depth.unwrap_or(base.run_depth).max(1),
            run_tree: block.run_tree.unwrap_or(base.run_tree).max(1),
            map_items: block.map_items.unwrap_or(base.map_items),
            output_bytes: block.output_bytes.map_or(base.output_bytes, |s| s.0),
            run_outputs: block.run_outputs.map_or(base.run_outputs, |s| s.0),
            tree_outputs: block.tree_outputs.map_or(base.tree_outputs, |s| s.0),
            recoveries: block.recoveries.unwrap_or(base.recoveries).max(1),
            sessions: block.sessions.unwrap_or(base.sessions).max(1),
            session_idle,
        })
    }
}

pub use opcode_vm::limits::json_bytes;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn settings_raise_the_bounds_and_typos_are_errors() {
        let limits = Limits::parse(Some(
            &json!({"jq_memory": "2GiB", "loop_iterations": 7, "session_idle": "2h"}),
        ))
        .unwrap();
        assert_eq!((limits.jq_memory, limits.loop_iterations), (2 << 30, 7));
        assert_eq!(limits.session_idle, Duration::from_hours(2));
        assert_eq!(limits.map_items, Limits::default().map_items);
        assert!(
            Limits::parse(Some(&json!({"loop_iteration": 7})))
                .unwrap_err()
                .contains("loop_iteration")
        );
    }
}
