//! Keeps one [`Consumer`] for each template whose newest version has a
//! `triggers.stream`: started when a template gains one, restarted when
//! it changes, stopped when it goes (spec/triggers-stream.md).

use std::collections::BTreeMap;
use std::time::Duration;

use opcode_runtime::store::TemplateFilter;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::consumer::Consumer;
use super::trigger::{Brokers, StreamTrigger};
use crate::api::Api;

/// How often the templates are looked at.
const EVERY: Duration = Duration::from_secs(2);

/// Runs the consumers of `api`'s templates, reading `brokers`, until
/// `stop`; `member` names this daemon in every group.
pub async fn run(api: Api, brokers: Brokers, member: String, stop: CancellationToken) {
    let mut running: BTreeMap<String, (StreamTrigger, CancellationToken)> = BTreeMap::new();
    loop {
        match wanted(&api).await {
            Ok(wanted) => {
                running.retain(|name, (trigger, token)| {
                    let keep = wanted.get(name) == Some(trigger);
                    if !keep {
                        token.cancel();
                    }
                    keep
                });
                for (name, trigger) in wanted {
                    if running.contains_key(&name) {
                        continue;
                    }
                    if let Some((_, why)) = brokers.refusal(&trigger) {
                        tracing::warn!(template = %name, "stream trigger not read: {why}");
                        continue;
                    }
                    let Some(broker) = brokers.0.get(&trigger.broker).cloned() else {
                        continue;
                    };
                    let token = stop.child_token();
                    let consumer = Consumer {
                        api: api.clone(),
                        template: name.clone(),
                        trigger: trigger.clone(),
                        broker,
                        member: member.clone(),
                    };
                    tokio::spawn(consumer.run(token.clone()));
                    running.insert(name, (trigger, token));
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "stream triggers: cannot list templates; retrying");
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(EVERY) => {}
        }
    }
}

/// Each template's trigger, by name, from the newest versions.
async fn wanted(api: &Api) -> Result<BTreeMap<String, StreamTrigger>, String> {
    let filter = TemplateFilter {
        latest_only: true,
        ..TemplateFilter::default()
    };
    let templates = api
        .executor()
        .store()
        .templates(filter)
        .await
        .map_err(|e| e.to_string())?;
    Ok(templates
        .into_iter()
        .filter(|t| t.triggers.contains("\"stream\""))
        .filter_map(|t| {
            let triggers: Map<String, Value> = serde_json::from_str(&t.triggers).ok()?;
            let trigger = StreamTrigger::of(&t.name, &triggers).ok()??;
            Some((t.name, trigger))
        })
        .collect())
}
