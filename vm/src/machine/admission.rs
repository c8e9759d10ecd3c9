//! Flow control in the VM (spec/flow-control.md): waiting for a slot of the
//! run's concurrency key ("Admission": a run whose template has a
//! `concurrency` block starts its steps only once the runtime answers
//! [`Event::Admitted`](crate::Event)), and the keys of rate-limited calls.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::Vm;
use crate::admission::{RateLimit, key_text};
use crate::codes;
use crate::effect::{AdmitRequest, Effect, Rate};
use crate::error::{ActionError, StepError};
use crate::host::Host;

impl Vm {
    /// The rate limit of a call of step `step`, its key made: the template's
    /// name, `:`, and the key text (the step's id when it has none); none for
    /// `host`, the call's target, which the runtime names.
    pub(super) fn rate_of(&self, limit: &RateLimit, step: &str) -> Rate {
        let key = (!limit.by_host()).then(|| {
            let text = if limit.key.is_empty() {
                step.to_owned()
            } else {
                key_text(&limit.key, &self.roots())
            };
            format!("{}:{text}", self.template_name())
        });
        Rate {
            key,
            limit: limit.limit,
            per_ms: limit.per_ms,
        }
    }

    /// The namespaces a key may read: `inputs` and `workflow`.
    fn roots(&self) -> Value {
        let mut roots = Map::new();
        roots.insert("inputs".into(), self.inputs.clone());
        roots.insert("workflow".into(), self.workflow.clone());
        Value::Object(roots)
    }

    /// The template the run runs (its program's name for a file).
    fn template_name(&self) -> String {
        self.meta
            .template_name
            .clone()
            .unwrap_or_else(|| self.plan.program.header.name.clone())
    }

    /// Asks for a slot when the program has a concurrency key: true when
    /// the run now waits for one.
    pub(super) fn ask_admission(&mut self) -> bool {
        let Some(concurrency) = &self.plan.program.run.concurrency else {
            return false;
        };
        let request = Arc::new(AdmitRequest {
            key: format!(
                "{}:{}",
                self.template_name(),
                key_text(&concurrency.key, &self.roots())
            ),
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
