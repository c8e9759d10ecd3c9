//! Agent sessions' turns on the libSQL connection: a turn and the trim of
//! the session's oldest are one transaction, which the single writer
//! orders.

use libsql::Value;

use super::{Db, backend, get};
use crate::store::sessions::{RECORD, TRIM, TURNS};
use crate::store::{SessionTurn, StoreResult};

impl Db {
    /// [`Sessions::session_turns`](crate::store::Sessions::session_turns).
    pub fn session_turns(&self, session: &str) -> StoreResult<Vec<String>> {
        self.block(self.query_all(TURNS, vec![session.into()], |row| get(row, 0)))
    }

    /// [`Sessions::record_turn`](crate::store::Sessions::record_turn).
    pub fn record_turn(&self, turn: &SessionTurn, keep: u32) -> StoreResult<()> {
        self.block(self.in_transaction(async {
            let recorded: Vec<Value> = vec![
                turn.session.as_str().into(),
                turn.workflow_id.as_str().into(),
                turn.step.as_str().into(),
                turn.turn.as_str().into(),
            ];
            self.conn.execute(RECORD, recorded).await.map_err(backend)?;
            let trimmed: Vec<Value> = vec![turn.session.as_str().into(), i64::from(keep).into()];
            self.conn.execute(TRIM, trimmed).await.map_err(backend)?;
            Ok(())
        }))
    }
}
