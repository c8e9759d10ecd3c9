//! `GET /panel/live`: one SSE `change` event per commit that appended log
//! entries, so open pages refresh what they show.

use std::convert::Infallible;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;

use super::Panel;

/// The stream; it ends when the daemon begins to stop.
pub async fn stream(panel: Panel) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let feed = panel.api.executor().appended();
    let stopping = panel.api.stopping().clone();
    // Counted open for as long as the stream lives (the client's
    // disconnect drops it).
    let open = panel.api.metrics().panel_stream();
    let events = futures::stream::unfold((feed, open), |(mut feed, open)| async move {
        let data = match feed.recv().await {
            Ok(appended) => {
                let types: Vec<&str> = appended
                    .entries
                    .iter()
                    .map(|e| e.event_type.as_str())
                    .collect();
                json!({"workflow_id": appended.workflow_id, "status": appended.status, "types": types})
            }
            // Missed some: every page should look again.
            Err(RecvError::Lagged(_)) => json!({"workflow_id": null}),
            Err(RecvError::Closed) => return None,
        };
        Some((
            Ok(Event::default().event("change").data(data.to_string())),
            (feed, open),
        ))
    });
    let events = events.take_until(async move { stopping.begun().await });
    Sse::new(events).keep_alive(KeepAlive::default())
}
