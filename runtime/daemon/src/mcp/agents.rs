//! Where `workflow.notify` goes: the MCP session each agent last called from.
//!
//! Messages are sent as `notifications/message` (MCP's logging
//! notification) with `logger: "opcode"` and `data: {message, workflow_id,
//! step_id, data}`. The 2026-07-28 revision deprecates that notification
//! (SEP-2577) and has no sessions; clients of the session-based revisions
//! (SSE, and Streamable HTTP before 2026-07-28) still receive it.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::RoleServer;
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::Peer;
use serde_json::{Value, json};

use opcode_runtime::executor::Notifier;

/// Each agent's latest MCP session (the last call that named it wins),
/// where `workflow.notify` sends its messages.
#[derive(Default)]
pub struct AgentSessions {
    peers: Mutex<HashMap<String, (Peer<RoleServer>, SessionLevel)>>,
}

/// The least severe level a session asked to receive (`logging/setLevel`);
/// everything until it asks.
#[derive(Debug, Clone, Default)]
pub struct SessionLevel(Arc<AtomicU8>);

impl SessionLevel {
    /// Sets the level.
    pub fn set(&self, level: LoggingLevel) {
        self.0.store(rank(level), Ordering::Relaxed);
    }

    /// Does the session want messages of `level`?
    pub fn wants(&self, level: LoggingLevel) -> bool {
        rank(level) >= self.0.load(Ordering::Relaxed)
    }
}

/// Severity order of MCP's levels (RFC 5424).
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

impl std::fmt::Debug for AgentSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentSessions").finish_non_exhaustive()
    }
}

impl AgentSessions {
    fn peers(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, (Peer<RoleServer>, SessionLevel)>> {
        self.peers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes that `agent` is reachable through `peer`, whose session
    /// wants messages from `level` up.
    pub fn remember(&self, agent: &str, peer: Peer<RoleServer>, level: SessionLevel) {
        self.peers().insert(agent.to_owned(), (peer, level));
    }

    /// The session `agent` last called from, while it is open.
    pub fn peer(&self, agent: &str) -> Option<Peer<RoleServer>> {
        let mut peers = self.peers();
        match peers.get(agent) {
            Some((peer, _)) if peer.is_transport_closed() => {
                peers.remove(agent);
                None
            }
            found => found.map(|(peer, _)| peer.clone()),
        }
    }
}

impl Notifier for AgentSessions {
    fn notify(&self, agent_id: Option<&str>, note: Value) -> Value {
        let Some(agent) = agent_id else {
            return json!({"notified": false, "reason": "no_agent"});
        };
        let peer = self.peer(agent).and_then(|peer| {
            let level = self.peers().get(agent)?.1.clone();
            Some((peer, level))
        });
        let Some((peer, level)) = peer else {
            return json!({"notified": false, "reason": "agent_not_connected"});
        };
        if !level.wants(LoggingLevel::Info) {
            return json!({"notified": false, "reason": "below_session_log_level"});
        }
        let param =
            LoggingMessageNotificationParam::new(LoggingLevel::Info, note).with_logger("opcode");
        tokio::spawn(async move {
            let sent = peer.notify_logging_message(param).await;
            if let Err(e) = sent {
                tracing::debug!(error = %e, "workflow.notify was not delivered");
            }
        });
        json!({"notified": true})
    }
}
