//! Streamable HTTP sessions, bounded (spec/limits.md): at most
//! `limits.sessions` open, the least recently used closed to make room for
//! a new one, and each closed after `limits.session_idle` without a
//! request. A client whose session was closed gets 404 and opens a new
//! one, as MCP says. rmcp's [`LocalSessionManager`] does the rest.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::{
    RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};

/// The session manager of `/mcp`.
#[derive(Debug)]
pub struct BoundedSessions {
    inner: LocalSessionManager,
    /// When each open session last had a request.
    used: Mutex<HashMap<SessionId, Instant>>,
    most: usize,
    idle: Duration,
}

impl BoundedSessions {
    /// At most `most` sessions, each closed after `idle` without a
    /// request; a task closes the idle ones until the manager is dropped.
    pub fn new(most: usize, idle: Duration) -> Arc<BoundedSessions> {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(idle);
        let sessions = Arc::new(BoundedSessions {
            inner,
            used: Mutex::new(HashMap::new()),
            most: most.max(1),
            idle,
        });
        tokio::spawn(sweep(Arc::downgrade(&sessions)));
        sessions
    }

    /// How many sessions are open.
    pub fn open(&self) -> usize {
        self.used().len()
    }

    fn used(&self) -> MutexGuard<'_, HashMap<SessionId, Instant>> {
        self.used.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes a request in session `id`, if it is open.
    fn touch(&self, id: &SessionId) {
        if let Some(at) = self.used().get_mut(id) {
            *at = Instant::now();
        }
    }

    /// The least recently used session, if `most` are open.
    fn to_evict(&self) -> Option<SessionId> {
        let used = self.used();
        if used.len() < self.most {
            return None;
        }
        used.iter()
            .min_by_key(|(_, at)| **at)
            .map(|(id, _)| id.clone())
    }

    /// The sessions without a request for longer than `idle`.
    fn idle_ones(&self) -> Vec<SessionId> {
        self.used()
            .iter()
            .filter(|(_, at)| at.elapsed() > self.idle)
            .map(|(id, _)| id.clone())
            .collect()
    }
}

/// Closes idle sessions now and then, while the manager lives.
async fn sweep(sessions: Weak<BoundedSessions>) {
    let every = match sessions.upgrade() {
        Some(s) => (s.idle / 4).clamp(Duration::from_secs(1), Duration::from_mins(1)),
        None => return,
    };
    loop {
        tokio::time::sleep(every).await;
        let Some(sessions) = sessions.upgrade() else {
            return;
        };
        for id in sessions.idle_ones() {
            tracing::debug!(session = %id, "closing an idle MCP session");
            let _ = sessions.close_session(&id).await;
        }
    }
}

impl SessionManager for BoundedSessions {
    type Error = LocalSessionManagerError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        if let Some(oldest) = self.to_evict() {
            tracing::info!(session = %oldest, most = self.most, "closing the least recently used MCP session to open a new one (limits.sessions)");
            self.close_session(&oldest).await?;
        }
        let (id, transport) = self.inner.create_session().await?;
        self.used().insert(id.clone(), Instant::now());
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.touch(id);
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.used().remove(id);
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        self.inner.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.touch(id);
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        self.inner.resume(id, last_event_id).await
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        self.inner.restore_session(id).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[tokio::test]
    async fn the_least_recently_used_session_makes_room_and_idle_ones_are_found() {
        let sessions = BoundedSessions::new(2, Duration::from_hours(1));
        let (a, _ta) = sessions.create_session().await.unwrap();
        let (b, _tb) = sessions.create_session().await.unwrap();
        sessions.touch(&a);
        let (c, _tc) = sessions.create_session().await.unwrap();
        assert_eq!(sessions.open(), 2);
        assert!(sessions.has_session(&a).await.unwrap());
        assert!(
            !sessions.has_session(&b).await.unwrap(),
            "b was used least recently"
        );
        assert!(sessions.has_session(&c).await.unwrap());
        assert!(sessions.idle_ones().is_empty());
        sessions.used().insert(
            a.clone(),
            Instant::now().checked_sub(Duration::from_hours(2)).unwrap(),
        );
        assert_eq!(sessions.idle_ones(), [a]);
    }
}
