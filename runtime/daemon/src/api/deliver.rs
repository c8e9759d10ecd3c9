//! A webhook delivery: authenticated by the template's `triggers.webhook`,
//! its body validated as the run's params, started once per delivery id.

use opcode_runtime::executor::ExecError;
use opcode_runtime::store::{Debounced, StoreError, WorkflowStatus};
use serde_json::{Map, Value};

use super::webhook::{MIN_SECRET_LEN, Webhook, run_id};
use super::{Api, ToolError};

/// What a delivery started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    /// The run.
    pub workflow_id: String,
    /// Its status now.
    pub status: WorkflowStatus,
    /// The delivery was seen before: this is the run it started then.
    pub duplicate: bool,
    /// The delivery joined a debounced burst: when its run starts, and how
    /// many deliveries the burst has (the run is `workflow_id`).
    pub debounced: Option<(u64, u64)>,
}

/// Why a delivery started nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum Undelivered {
    /// No such template, or it has no `triggers.webhook` (404).
    NoHook,
    /// The signature or token is missing or wrong (401).
    Unauthentic,
    /// The body is not a JSON object (400).
    NotJson(String),
    /// The body does not match `input_schema`, or the run could not start (R0108: 422).
    Refused(ToolError),
    /// The hook's secret is not set, or too short to be safe (503).
    Misconfigured(String),
}

impl Api {
    /// Delivers `body` with `header`s to template `name`'s webhook; `now_s`
    /// is the clock (Stripe's signatures carry a time).
    pub async fn deliver<'h>(
        &self,
        name: &str,
        header: impl Fn(&str) -> Option<&'h str>,
        body: &[u8],
        now_s: i64,
    ) -> Result<Delivered, Undelivered> {
        let template = super::run::kept_template(self, name, None)
            .await
            .map_err(|_| Undelivered::NoHook)?;
        let triggers: Map<String, Value> =
            serde_json::from_str(&template.triggers).unwrap_or_default();
        let webhook = Webhook::of(&triggers)
            .ok()
            .flatten()
            .ok_or(Undelivered::NoHook)?;
        let secret = self.exec.secret(&webhook.secret).await.ok_or_else(|| {
            Undelivered::Misconfigured(format!(
                "the webhook's secret `{}` is not set: opcode secret set {}",
                webhook.secret, webhook.secret
            ))
        })?;
        if secret.chars().count() < MIN_SECRET_LEN {
            return Err(Undelivered::Misconfigured(format!(
                "the webhook's secret `{}` is shorter than {MIN_SECRET_LEN} characters",
                webhook.secret
            )));
        }
        if !webhook.authentic(&secret, &header, body, now_s) {
            return Err(Undelivered::Unauthentic);
        }
        let body: Value = serde_json::from_slice(body)
            .map_err(|e| Undelivered::NotJson(format!("the body is not JSON: {e}")))?;
        if !body.is_object() && webhook.body_as.is_none() {
            return Err(Undelivered::NotJson(
                "the body must be a JSON object: it is the run's params (or name the input \
                 it goes to with triggers.webhook.body_as)"
                    .into(),
            ));
        }
        let id = webhook
            .delivery_id(&header, &body)
            .map(|delivery| run_id(name, &delivery));
        let params = webhook.params_of(body);
        if let Some(debounce) = &webhook.debounce {
            // Checked now, so that a bad delivery is refused at once.
            super::run::template_request(&self.exec, &template, &params, None, None)
                .map_err(Undelivered::Refused)?;
            let key = params
                .as_object()
                .map(|p| debounce.key_of(p))
                .unwrap_or_default();
            let delivery = Debounced {
                template: name.to_owned(),
                key: key.clone(),
                inputs: params.to_string(),
                now_ms: opcode_runtime::time::now_ms(),
                period_ms: debounce.period_ms,
                max_wait_ms: debounce.max_wait_ms,
                keep_last: debounce.keep_last,
            };
            let start = self
                .store()
                .debounce(delivery)
                .await
                .map_err(|e| Undelivered::Refused(e.into()))?;
            return Ok(Delivered {
                workflow_id: super::debounce::run_id(name, &key, start.first_ms),
                status: WorkflowStatus::Pending,
                duplicate: false,
                debounced: Some((start.due_ms, start.deliveries)),
            });
        }
        let request =
            super::run::template_request(&self.exec, &template, &params, None, id.clone())
                .map_err(Undelivered::Refused)?;
        let (workflow_id, duplicate) = match (self.exec.start(request).await, id) {
            (Ok(started), _) => (started, false),
            (Err(ExecError::Store(StoreError::Exists(_))), Some(id)) => (id, true),
            (Err(e), _) => return Err(Undelivered::Refused(e.into())),
        };
        let status = match self.store().workflow(&workflow_id).await {
            Ok(Some(row)) => row.status,
            _ => WorkflowStatus::Pending,
        };
        Ok(Delivered {
            workflow_id,
            status,
            duplicate,
            debounced: None,
        })
    }
}
