//! Waiting for a slot of the run's concurrency key (spec/flow-control.md,
//! "Admission"): a run whose template has a `concurrency` block starts
//! its steps only once the runtime answers [`Event::Admitted`](crate::Event).

use std::sync::Arc;

use serde_json::{Map, Value};

use super::Vm;
use crate::codes;
use crate::effect::{AdmitRequest, Effect};
use crate::error::{ActionError, StepError};
use crate::host::Host;

impl Vm {
    /// Asks for a slot when the program has a concurrency key: true when
    /// the run now waits for one.
    pub(super) fn ask_admission(&mut self) -> bool {
        let Some(concurrency) = &self.plan.program.run.concurrency else {
            return false;
        };
        let mut roots = Map::new();
        roots.insert("inputs".into(), self.inputs.clone());
        roots.insert("workflow".into(), self.workflow.clone());
        let template = self
            .meta
            .template_name
            .clone()
            .unwrap_or_else(|| self.plan.program.header.name.clone());
        let request = Arc::new(AdmitRequest {
            key: format!("{template}:{}", concurrency.key_of(&Value::Object(roots))),
            limit: concurrency.limit,
            on_limit: concurrency.on_limit,
            priority: self.meta.priority.unwrap_or(crate::limits::PRIORITY),
        });
        self.admission = Some(Arc::clone(&request));
        self.admitting = true;
        self.emit(Effect::Admit(request));
        true
    }

    /// The runtime's answer: the steps start, or the run fails (R0135).
    pub(super) fn admitted(&mut self, refused: Option<&str>, host: &dyn Host) {
        let Some(request) = self.admission.clone().filter(|_| self.admitting) else {
            return;
        };
        self.admitting = false;
        match refused {
            None => self.begin(host),
            Some(reason) => {
                let message = format!(
                    "concurrency key `{}` has {} runs holding a slot (its limit) and the template \
                     refuses the newest: {reason}",
                    request.key, request.limit
                );
                let error = ActionError::new(codes::R0135, "CONCURRENCY_LIMIT", message, false)
                    .with_details(serde_json::json!({"key": request.key, "limit": request.limit}));
                self.fail_run(
                    StepError {
                        step: String::new(),
                        error,
                    },
                    host,
                );
            }
        }
    }
}
