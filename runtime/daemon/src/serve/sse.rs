//! The legacy MCP HTTP+SSE transport (protocol revision 2024-11-05), which
//! opcode's users are configured for: `GET /sse` opens an event stream whose
//! first event, `endpoint`, names where to `POST` messages
//! (`/message?sessionId=…`); each POST is answered `202 Accepted` and the
//! JSON-RPC reply arrives on the stream as a `message` event. rmcp has no
//! server for it, so this is one, on rmcp's [`Transport`] trait.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::serve_server;
use rmcp::transport::Transport;
use serde::Deserialize;
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::mcp::OpcodeServer;
use crate::stopping::{Answering, Stopping};

/// Messages queued for one session before a slow client holds the server up.
const QUEUE: usize = 64;

/// The open SSE sessions.
#[derive(Clone)]
pub struct Sessions {
    server: OpcodeServer,
    base_url: Option<String>,
    open: Arc<Mutex<HashMap<String, Open>>>,
    stopping: Stopping,
    shutdown: CancellationToken,
}

/// An open session: where its client's messages go, and the requests it
/// has not answered yet.
#[derive(Clone)]
struct Open {
    to_server: mpsc::Sender<ClientJsonRpcMessage>,
    unanswered: Unanswered,
}

/// A session's requests not answered yet, by id (their JSON), each
/// counted by the daemon's stop until its answer is on the stream.
type Unanswered = Arc<Mutex<HashMap<String, Answering>>>;

impl Sessions {
    /// No sessions yet, each to be handled by one of `server`'s session
    /// handlers; `base_url` (if any) prefixes the endpoint URL. At
    /// `shutdown` the streams end, after what they hold; `stopping`
    /// waits for the answers to the requests they have.
    pub fn new(
        server: OpcodeServer,
        base_url: Option<String>,
        stopping: Stopping,
        shutdown: CancellationToken,
    ) -> Sessions {
        Sessions {
            server,
            base_url,
            open: Arc::default(),
            stopping,
            shutdown,
        }
    }

    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<String, Open>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A session's unanswered requests, locked.
fn unanswered(map: &Unanswered) -> std::sync::MutexGuard<'_, HashMap<String, Answering>> {
    map.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One session's side of rmcp: what the server sends goes to the stream,
/// what clients POST comes from the inbox.
struct SseTransport {
    outbox: mpsc::Sender<ServerJsonRpcMessage>,
    inbox: mpsc::Receiver<ClientJsonRpcMessage>,
}

/// The client went away.
#[derive(Debug, thiserror::Error)]
#[error("the SSE stream was closed")]
pub struct Closed;

impl Transport<RoleServer> for SseTransport {
    type Error = Closed;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Closed>> + Send + 'static {
        let outbox = self.outbox.clone();
        async move { outbox.send(item).await.map_err(|_| Closed) }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ClientJsonRpcMessage>> {
        self.inbox.recv()
    }

    async fn close(&mut self) -> Result<(), Closed> {
        self.inbox.close();
        Ok(())
    }
}

/// Removes a session when its stream is dropped (the client left).
struct Leave {
    sessions: Sessions,
    id: String,
}

impl Drop for Leave {
    fn drop(&mut self) {
        self.sessions.open().remove(&self.id);
    }
}

/// `GET /sse`: opens a session and streams its messages.
pub async fn connect(State(sessions): State<Sessions>, headers: HeaderMap) -> Response {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (to_server, inbox) = mpsc::channel(QUEUE);
    let (outbox, messages) = mpsc::channel::<ServerJsonRpcMessage>(QUEUE);
    let open = Open {
        to_server,
        unanswered: Unanswered::default(),
    };
    let answers = open.unanswered.clone();
    sessions.open().insert(id.clone(), open);
    let transport = SseTransport { outbox, inbox };
    let server = sessions.server.for_session();
    tokio::spawn(async move {
        if let Ok(running) = serve_server(server, transport).await {
            let _ = running.waiting().await;
        }
    });
    let stream = SessionStream {
        endpoint: Some(endpoint_url(sessions.base_url.as_deref(), &headers, &id)),
        messages,
        answers,
        ended: Box::pin(sessions.shutdown.clone().cancelled_owned()),
        _leave: Leave { sessions, id },
    };
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// Where the client is told to POST: under the base URL if one is set,
/// else under the host the client reached us by.
fn endpoint_url(base_url: Option<&str>, headers: &HeaderMap, id: &str) -> String {
    let path = format!("/message?sessionId={id}");
    match (
        base_url,
        headers.get(header::HOST).and_then(|h| h.to_str().ok()),
    ) {
        (Some(base), _) => format!("{}{path}", base.trim_end_matches('/')),
        (None, Some(host)) => format!("http://{host}{path}"),
        (None, None) => path,
    }
}

/// One session's event stream: `endpoint` first, then each message; it
/// ends at the daemon's shutdown once it has sent what it holds.
struct SessionStream {
    endpoint: Option<String>,
    messages: mpsc::Receiver<ServerJsonRpcMessage>,
    answers: Unanswered,
    ended: Pin<Box<WaitForCancellationFutureOwned>>,
    _leave: Leave,
}

impl Stream for SessionStream {
    type Item = Result<Event, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(endpoint) = self.endpoint.take() {
            return Poll::Ready(Some(Ok(Event::default().event("endpoint").data(endpoint))));
        }
        match self.messages.poll_recv(cx) {
            Poll::Ready(Some(message)) => {
                if let Some(id) = answered(&message) {
                    unanswered(&self.answers).remove(&id);
                }
                let data = serde_json::to_string(&message).unwrap_or_default();
                Poll::Ready(Some(Ok(Event::default().event("message").data(data))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => self.ended.as_mut().poll(cx).map(|()| None),
        }
    }
}

/// The id (its JSON) of the request `message` answers, if it is an answer.
fn answered(message: &ServerJsonRpcMessage) -> Option<String> {
    let id = match message {
        JsonRpcMessage::Response(response) => &response.id,
        JsonRpcMessage::Error(error) => error.id.as_ref()?,
        JsonRpcMessage::Request(_) | JsonRpcMessage::Notification(_) => return None,
    };
    serde_json::to_string(id).ok()
}

/// The query of `POST /message`.
#[derive(Debug, Deserialize)]
pub struct SessionQuery {
    #[serde(rename = "sessionId")]
    session_id: String,
}

/// `POST /message?sessionId=…`: hands a client message to its session.
pub async fn post(
    State(sessions): State<Sessions>,
    Query(query): Query<SessionQuery>,
    body: Bytes,
) -> Response {
    let Some(open) = sessions.open().get(&query.session_id).cloned() else {
        return (StatusCode::NOT_FOUND, "unknown or closed session").into_response();
    };
    let found = super::depth::depth(&body);
    if found > super::depth::MAX_DEPTH {
        return super::depth::too_deep(found);
    }
    let message: ClientJsonRpcMessage = match serde_json::from_slice(&body) {
        Ok(message) => message,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                Json(serde_json::json!({"error": format!("not a JSON-RPC message: {e}")})),
            )
                .into_response();
        }
    };
    let asked = match &message {
        JsonRpcMessage::Request(request) => serde_json::to_string(&request.id).ok(),
        _ => None,
    };
    if let Some(id) = &asked {
        unanswered(&open.unanswered).insert(id.clone(), sessions.stopping.answering());
    }
    if open.to_server.send(message).await.is_ok() {
        return StatusCode::ACCEPTED.into_response();
    }
    if let Some(id) = &asked {
        unanswered(&open.unanswered).remove(id);
    }
    (StatusCode::GONE, "the session has ended").into_response()
}
