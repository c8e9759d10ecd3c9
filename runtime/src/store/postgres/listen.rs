//! The listening connection: one of its own, outside the pool, that turns
//! the `NOTIFY`s of every writer into [`Notice`]s. Notifications sent while
//! it is disconnected are lost, so after every reconnection it announces
//! [`Notice::Missed`]: listeners look at everything again.

use std::time::Duration;

use futures::StreamExt;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio_postgres::AsyncMessage;

use super::connect::Target;
use super::{CHANNEL, backend};
use crate::store::{Notice, StoreResult};

/// How long the listener waits before connecting again.
const RECONNECT: Duration = Duration::from_millis(500);

/// The listening task; dropping it stops listening.
pub(super) struct Listener {
    task: JoinHandle<()>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Listener {
    /// Connects and listens; the first connection must succeed.
    pub async fn start(
        target: Target,
        notices: broadcast::Sender<Notice>,
    ) -> StoreResult<Listener> {
        let first = listen(&target, &notices).await?;
        let task = tokio::spawn(async move {
            first.await;
            loop {
                tokio::time::sleep(RECONNECT).await;
                match listen(&target, &notices).await {
                    Ok(session) => {
                        // Anything sent while away was missed.
                        let _ = notices.send(Notice::Missed);
                        session.await;
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot listen to the database; retrying"),
                }
            }
        });
        Ok(Listener { task })
    }
}

/// Opens a connection that listens on the channel; the future it returns
/// forwards notices until the connection is lost.
async fn listen(
    target: &Target,
    notices: &broadcast::Sender<Notice>,
) -> StoreResult<impl Future<Output = ()> + use<>> {
    let (client, mut connection) = target
        .config
        .connect(target.tls.clone())
        .await
        .map_err(backend)?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    let _ = tx.send(n.payload().to_owned());
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "the database's listening connection was lost");
                    break;
                }
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN {CHANNEL}"))
        .await
        .map_err(backend)?;
    let notices = notices.clone();
    Ok(async move {
        // The client lives as long as the session: dropping it closes it.
        let _client = client;
        while let Some(payload) = rx.recv().await {
            if let Some(notice) = Notice::decode(&payload) {
                let _ = notices.send(notice);
            }
        }
        driver.abort();
    })
}
