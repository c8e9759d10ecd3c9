//! What a client is told without asking: `notifications/tools/list_changed`
//! when exposed templates change, `notifications/resources/updated`
//! for the run resources it subscribed to — to a session (the 2025
//! revisions, `resources/subscribe`) or through `subscriptions/listen`
//! (2026-07-28).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use opcode_runtime::Appended;
use rmcp::model::{ResourceUpdatedNotificationParam, SubscriptionFilter};
use rmcp::service::{Peer, SubscriptionContext};
use rmcp::{ErrorData, RoleServer};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio_util::sync::CancellationToken;

use crate::api::Api;

/// Something a watcher may have to tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Happened {
    /// The exposed templates' tools changed.
    Tools,
    /// Run `id` committed.
    Run(String),
    /// Notices were lost: any run may have changed.
    Lagged,
}

/// The changes a watcher listens to.
#[derive(Debug)]
pub struct Feed {
    tools: broadcast::Receiver<()>,
    appended: broadcast::Receiver<Arc<Appended>>,
}

impl Feed {
    /// Listens to `api`'s changes from now on.
    pub fn of(api: &Api) -> Feed {
        Feed {
            tools: api.watch_tools(),
            appended: api.executor().appended(),
        }
    }

    /// The next change (`None` once the daemon shuts down).
    pub async fn next(&mut self) -> Option<Happened> {
        tokio::select! {
            tools = self.tools.recv() => match tools {
                Ok(()) | Err(RecvError::Lagged(_)) => Some(Happened::Tools),
                Err(RecvError::Closed) => None,
            },
            appended = self.appended.recv() => match appended {
                Ok(appended) => Some(Happened::Run(appended.workflow_id.clone())),
                Err(RecvError::Lagged(_)) => Some(Happened::Lagged),
                Err(RecvError::Closed) => None,
            },
        }
    }
}

/// The resource URIs a session subscribed to.
#[derive(Debug, Clone, Default)]
pub struct Subscriptions(Arc<Mutex<BTreeSet<String>>>);

impl Subscriptions {
    /// Adds `uri`.
    pub fn add(&self, uri: &str) {
        self.lock().insert(uri.to_owned());
    }

    /// Removes `uri`.
    pub fn remove(&self, uri: &str) {
        self.lock().remove(uri);
    }

    /// The subscribed URIs that `happened` may have changed.
    pub fn touched(&self, happened: &Happened) -> Vec<String> {
        touched(self.lock().iter(), happened)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The URIs among `uris` that `happened` may have changed: a run's
/// resources when it commits, templates when the tools change, all after
/// a loss.
pub fn touched<'a>(uris: impl Iterator<Item = &'a String>, happened: &Happened) -> Vec<String> {
    uris.filter(|uri| match happened {
        Happened::Lagged => true,
        Happened::Tools => uri.starts_with("opcode://templates/"),
        Happened::Run(id) => {
            let prefix = format!("opcode://runs/{}", opcode_runtime::summary::segment(id));
            uri.strip_prefix(&prefix).is_some_and(|rest| {
                rest.is_empty() || rest.starts_with('/') || rest.starts_with('?')
            })
        }
    })
    .cloned()
    .collect()
}

/// Tells session `peer` what changed, until `ended` (its handler dropped)
/// or the session stops taking messages.
pub fn follow_session(
    peer: Peer<RoleServer>,
    api: &Api,
    subscriptions: Subscriptions,
    ended: CancellationToken,
) {
    let mut feed = Feed::of(api);
    tokio::spawn(async move {
        loop {
            let happened = tokio::select! {
                () = ended.cancelled() => return,
                happened = feed.next() => match happened {
                    Some(happened) => happened,
                    None => return,
                },
            };
            if happened == Happened::Tools && peer.notify_tool_list_changed().await.is_err() {
                return;
            }
            for uri in subscriptions.touched(&happened) {
                let updated = ResourceUpdatedNotificationParam::new(uri);
                if peer.notify_resource_updated(updated).await.is_err() {
                    return;
                }
            }
        }
    });
}

/// What `subscriptions/listen` accepts of `requested`: the tool list, and
/// the `opcode://` resources.
pub fn accepted(requested: &SubscriptionFilter) -> SubscriptionFilter {
    let mut filter = SubscriptionFilter::new();
    filter.tools_list_changed = requested.tools_list_changed;
    filter.resource_subscriptions = requested.resource_subscriptions.as_ref().map(|uris| {
        uris.iter()
            .filter(|u| u.starts_with("opcode://"))
            .cloned()
            .collect()
    });
    filter
}

/// Runs one `subscriptions/listen` stream until the client cancels it.
pub async fn listen(api: &Api, context: SubscriptionContext) -> Result<(), ErrorData> {
    let mut feed = Feed::of(api);
    let wants_tools = context.accepted().tools_list_changed == Some(true);
    let uris = context
        .accepted()
        .resource_subscriptions
        .clone()
        .unwrap_or_default();
    loop {
        let happened = tokio::select! {
            () = context.cancelled() => return Ok(()),
            happened = feed.next() => match happened {
                Some(happened) => happened,
                None => return Ok(()),
            },
        };
        let sink = context.sink();
        if happened == Happened::Tools
            && wants_tools
            && sink.notify_tool_list_changed().await.is_err()
        {
            return Ok(());
        }
        for uri in touched(uris.iter(), &happened) {
            if sink.notify_resource_updated(uri).await.is_err() {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_touches_its_own_resources_only() {
        let uris: Vec<String> = [
            "opcode://runs/ab",
            "opcode://runs/ab/steps/x/output",
            "opcode://runs/abc",
            "opcode://templates/t",
        ]
        .map(String::from)
        .into();
        let run = touched(uris.iter(), &Happened::Run("ab".into()));
        assert_eq!(run, ["opcode://runs/ab", "opcode://runs/ab/steps/x/output"]);
        assert_eq!(
            touched(uris.iter(), &Happened::Tools),
            ["opcode://templates/t"]
        );
        assert_eq!(touched(uris.iter(), &Happened::Lagged).len(), 4);
    }
}
