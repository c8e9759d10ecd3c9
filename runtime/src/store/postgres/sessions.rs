//! Agent sessions' turns on PostgreSQL: a turn and the trim of the
//! session's oldest are one transaction.

use super::{PostgresStore, backend};
use crate::store::sessions::{RECORD, TRIM, TURNS};
use crate::store::slots::numbered;
use crate::store::{BoxFuture, SessionTurn, Sessions, StoreResult};

impl Sessions for PostgresStore {
    fn session_turns<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<Vec<String>>> {
        Box::pin(async move {
            self.query(&numbered(TURNS), &[&session], |row| {
                row.try_get(0).map_err(backend)
            })
            .await
        })
    }

    fn record_turn(&self, turn: SessionTurn, keep: u32) -> BoxFuture<'_, StoreResult<()>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(backend)?;
            tx.execute(
                numbered(RECORD).as_str(),
                &[&turn.session, &turn.workflow_id, &turn.step, &turn.turn],
            )
            .await
            .map_err(backend)?;
            tx.execute(numbered(TRIM).as_str(), &[&turn.session, &i64::from(keep)])
                .await
                .map_err(backend)?;
            tx.commit().await.map_err(backend)
        })
    }
}
