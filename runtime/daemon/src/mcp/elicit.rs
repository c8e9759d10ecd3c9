//! Decisions asked as form elicitations (setting `elicit_decisions`,
//! spec/mcp.md "Decisions as elicitations"): when a run waits for a
//! decision, the session of the agent that should decide (the step's
//! `target_agent`, else the run's agent) is asked with `elicitation/create`
//! if its client supports forms; the answer resolves the decision as
//! `opcode.signal` would. The question lives in the store, not in the
//! request: after a restart it is asked again as soon as the agent's new
//! session calls a tool.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use opcode_runtime::store::{DecisionRow, DecisionStatus, EventName, WorkflowStatus};
use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitationAction};
use rmcp::service::Peer;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::AgentSessions;
use super::tasks::question;
use crate::api::Api;

/// Asks agents their decisions through their sessions.
#[derive(Debug)]
pub struct Elicitor {
    api: Api,
    sessions: Arc<AgentSessions>,
    /// The decisions asked and not yet answered.
    open: Asked,
}

/// Decisions asked and not yet answered: (workflow, decision).
#[derive(Debug, Clone, Default)]
struct Asked(Arc<Mutex<HashSet<(String, String)>>>);

impl Asked {
    /// Marks `key` asked; false when it already was.
    fn insert(&self, key: (String, String)) -> bool {
        self.lock().insert(key)
    }

    fn remove(&self, key: &(String, String)) {
        self.lock().remove(key);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<(String, String)>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Elicitor {
    /// An elicitor following `api`'s runs, when its settings ask for one.
    pub fn start(api: &Api, sessions: Arc<AgentSessions>) -> Option<Arc<Elicitor>> {
        if !api.elicits_decisions() {
            return None;
        }
        let elicitor = Arc::new(Elicitor {
            api: api.clone(),
            sessions,
            open: Asked::default(),
        });
        let mut appended = api.executor().appended();
        let following = elicitor.clone();
        tokio::spawn(async move {
            loop {
                match appended.recv().await {
                    Ok(appended) => {
                        let asks = appended.status == Some(WorkflowStatus::Suspended)
                            || appended
                                .entries
                                .iter()
                                .any(|e| e.name() == Some(EventName::ActionAsked));
                        if asks {
                            following.ask_run(Some(&appended.workflow_id)).await;
                        }
                    }
                    Err(RecvError::Lagged(_)) => following.ask_run(None).await,
                    Err(RecvError::Closed) => return,
                }
            }
        });
        Some(elicitor)
    }

    /// `agent` has a session (again): asks what waits for it.
    pub async fn arrived(&self, agent: &str) {
        for decision in self.pending(None).await {
            if self.decider(&decision).await.as_deref() == Some(agent) {
                self.ask(&decision, agent);
            }
        }
    }

    /// Asks the pending decisions of run `id` (of every run: `None`).
    async fn ask_run(&self, id: Option<&str>) {
        for decision in self.pending(id).await {
            if let Some(agent) = self.decider(&decision).await {
                self.ask(&decision, &agent);
            }
        }
    }

    async fn pending(&self, id: Option<&str>) -> Vec<DecisionRow> {
        let store = self.api.executor().store();
        store
            .decisions(id, Some(DecisionStatus::Pending))
            .await
            .unwrap_or_default()
    }

    /// Who should decide: the step's target agent, else the run's agent.
    async fn decider(&self, decision: &DecisionRow) -> Option<String> {
        if let Some(target) = decision.target_agent.clone().filter(|t| !t.is_empty()) {
            return Some(target);
        }
        let store = self.api.executor().store();
        let row = store.workflow(&decision.workflow_id).await.ok()??;
        row.agent_id
    }

    /// Sends `decision` to `agent`'s session, unless it is asked already or
    /// the session's client cannot show a form.
    fn ask(&self, decision: &DecisionRow, agent: &str) {
        let Some(peer) = self.sessions.peer(agent).filter(takes_forms) else {
            return;
        };
        let key = (decision.workflow_id.clone(), decision.id.clone());
        let Ok(params) = serde_json::from_value::<ElicitRequestParams>(question(decision)) else {
            return;
        };
        if !self.open.insert(key.clone()) {
            return;
        }
        let (api, agent, open) = (self.api.clone(), agent.to_owned(), self.open.clone());
        tokio::spawn(async move {
            let answered = peer.create_elicitation(params).await;
            open.remove(&key);
            let Ok(answer) = answered else {
                return; // The session went away: the decision stays pending.
            };
            let content = answer.content.unwrap_or(Value::Null);
            let args = match answer.action {
                ElicitationAction::Accept => {
                    let mut args = json!({"workflow_id": key.0, "signal_type": "decision",
                        "step_id": key.1, "payload": {"choice": content["choice"]},
                        "agent_id": agent, "wait": false});
                    if let Some(reasoning) = content.get("reasoning") {
                        args["reasoning"] = reasoning.clone();
                    }
                    args
                }
                ElicitationAction::Decline => json!({"workflow_id": key.0,
                    "signal_type": "cancel", "step_id": key.1, "agent_id": agent, "wait": false}),
                _ => return, // Dismissed: it stays pending, to answer later.
            };
            if let Err(e) = api.call("opcode.signal", args).await {
                tracing::info!(error = %e.message, "an elicited answer was refused");
            }
        });
    }
}

/// Does the session's client show forms (2025-11-25: `elicitation` with
/// `form`, or empty, which means form)?
fn takes_forms(peer: &Peer<RoleServer>) -> bool {
    peer.peer_info().is_some_and(|info| {
        info.capabilities
            .elicitation
            .as_ref()
            .is_some_and(|e| e.form.is_some() || e.url.is_none())
    })
}
