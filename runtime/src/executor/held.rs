//! Waiting for a run as an agent does: until it settles, until a child
//! run below it suspends on a decision, which holds it (spec/mcp.md,
//! "Decisions of child runs"), or until one of its actions asks a question
//! (spec/agents.md, "Permission requests").

use std::sync::Arc;

use tokio::sync::broadcast::{self, error::RecvError};

use super::{Change, ExecError, Executor, Until};
use crate::store::{WorkflowState, WorkflowStatus};

impl Executor {
    /// Waits for run `id` to settle, for a run below it to suspend, or for
    /// one of its actions to ask a question;
    /// answers the run's state when the settling commit read it.
    /// `children` must be taken (from [`Executor::changes`]) before
    /// whatever it waits for could happen, and so must `changes` when
    /// given (the run was started here after it was taken); without it the
    /// store is read too.
    pub async fn settled_or_held(
        &self,
        id: &str,
        changes: Option<broadcast::Receiver<Change>>,
        mut children: broadcast::Receiver<Change>,
    ) -> Result<Option<Arc<WorkflowState>>, ExecError> {
        let below = format!("{id}.");
        let held = async {
            loop {
                match children.recv().await {
                    Ok(change)
                        if change.id.starts_with(&below)
                            && change.status == Some(WorkflowStatus::Suspended) =>
                    {
                        return;
                    }
                    Ok(change) if change.asking && change.id == id => return,
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => std::future::pending::<()>().await,
                }
            }
        };
        let settled = async {
            match changes {
                Some(changes) => Ok(self.wait_from(id, Until::Settled, changes).await?.state),
                None => self.wait(id, Until::Settled).await.map(|_| None),
            }
        };
        tokio::select! {
            settled = settled => settled,
            () = held => Ok(None),
        }
    }
}
