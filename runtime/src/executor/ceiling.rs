//! The settings' isolation ceiling as the compiler's [`IsolationCheck`]:
//! a workflow whose step widens it does not compile here (E0052).

use opcode_compiler::{IsolationCheck, Widening};
use opcode_stdlib::isolation::block::SETTINGS_ONLY;
use opcode_stdlib::isolation::{Block, Ceiling, grant_name};
use serde_json::Value;

/// The ceiling of runs started by `agent`.
pub struct CeilingCheck<'a> {
    /// The settings' block.
    pub settings: &'a Block,
    /// The agent defining or starting the workflow.
    pub agent: Option<&'a str>,
}

impl IsolationCheck for CeilingCheck<'_> {
    fn widenings(&self, template: Option<&str>, block: &Value) -> Vec<Widening> {
        let name = grant_name(template, self.agent);
        let grant_help = |grant: &str| {
            format!(
                "only the daemon's settings may allow it: \"isolation\": {{\"grants\": [{grant}]}}"
            )
        };
        if let Value::Object(map) = block
            && let Some(key) = SETTINGS_ONLY.iter().find(|k| map.contains_key(**k))
        {
            return vec![Widening {
                key: (*key).to_owned(),
                message: "this key belongs to the daemon's settings, not to a step".into(),
                help: "remove it; the operator sets it in the settings' `isolation` block".into(),
            }];
        }
        // Other mistakes in the block are the step's own failure when it runs.
        let Ok(step) = Block::parse_step(Some(block)) else {
            return Vec::new();
        };
        Ceiling::of(self.settings, template, self.agent)
            .widenings(&step, &name)
            .into_iter()
            .map(|w| Widening {
                key: w.key.to_owned(),
                message: w.message,
                help: grant_help(&w.grant),
            })
            .collect()
    }
}
