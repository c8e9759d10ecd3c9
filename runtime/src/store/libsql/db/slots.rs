//! Slots of concurrency keys on the libSQL connection (spec/flow-control.md,
//! "Admission"): each call is one `BEGIN IMMEDIATE` transaction, so the
//! database's single writer is the key's lock.

use std::future::Future;

use libsql::Value;

use super::{Db, get, run};
use crate::store::slots::{AHEAD, HOLD, HOLDERS, INSERT, LIMIT, MINE, NEXT, SWEEP, WAITING_KEYS};
use crate::store::{Admission, Admitted, StoreResult};

impl Db {
    /// [`Slots::admit`](crate::store::Slots::admit).
    pub fn admit(&self, ask: &Admission) -> StoreResult<Admitted> {
        self.block(self.in_transaction(self.admit_open(ask)))
    }

    async fn admit_open(&self, ask: &Admission) -> StoreResult<Admitted> {
        let id = ask.workflow_id.as_str();
        let holders = self
            .query_all(HOLDERS, vec![ask.key.as_str().into()], |row| {
                get::<String>(row, 0)
            })
            .await?;
        let mine = self
            .query_one(MINE, vec![id.into()], |row| {
                Ok((
                    get::<i64>(row, 0)?,
                    get::<i64>(row, 1)?,
                    get::<String>(row, 2)?,
                ))
            })
            .await?;
        let (priority, at) = match mine {
            Some((1, _, _)) => return Ok(Admitted::Holds),
            Some((_, priority, at)) => (priority, at),
            None if holders.len() < ask.limit as usize || !ask.wait => {
                if holders.len() >= ask.limit as usize {
                    return Ok(Admitted::Refused { holders });
                }
                self.insert_slot(ask, true).await?;
                return Ok(Admitted::Holds);
            }
            None => {
                self.insert_slot(ask, false).await?;
                (i64::from(ask.priority), ask.at.clone())
            }
        };
        let params = vec![
            ask.key.as_str().into(),
            priority.into(),
            at.into(),
            id.into(),
        ];
        let position = self
            .query_one(AHEAD, params, |row| get::<i64>(row, 0))
            .await?
            .unwrap_or(0) as u64;
        Ok(Admitted::Waits { position, holders })
    }

    async fn insert_slot(&self, ask: &Admission, held: bool) -> StoreResult<()> {
        let params: Vec<Value> = vec![
            ask.key.as_str().into(),
            ask.workflow_id.as_str().into(),
            i64::from(ask.limit).into(),
            i64::from(ask.priority).into(),
            i64::from(held).into(),
            ask.at.as_str().into(),
        ];
        self.change(INSERT, params).await.map(drop)
    }

    /// [`Slots::promote`](crate::store::Slots::promote).
    pub fn promote(&self, key: &str) -> StoreResult<Vec<String>> {
        self.block(self.in_transaction(async {
            self.change(SWEEP, vec![key.into()]).await?;
            let limit = self
                .query_one(LIMIT, vec![key.into()], |row| get::<i64>(row, 0))
                .await?
                .unwrap_or(0);
            let holding = self
                .query_all(HOLDERS, vec![key.into()], |row| get::<String>(row, 0))
                .await?
                .len() as i64;
            let free = (limit - holding).max(0);
            if free == 0 {
                return Ok(Vec::new());
            }
            let next = self
                .query_all(NEXT, vec![key.into(), free.into()], |row| {
                    get::<String>(row, 0)
                })
                .await?;
            for id in &next {
                self.change(HOLD, vec![id.as_str().into()]).await?;
            }
            Ok(next)
        }))
    }

    /// [`Slots::waiting_keys`](crate::store::Slots::waiting_keys).
    pub fn waiting_keys(&self) -> StoreResult<Vec<String>> {
        self.block(self.query_all(WAITING_KEYS, Vec::new(), |row| get::<String>(row, 0)))
    }

    /// Runs `work` in a transaction of its own: committed if it succeeds,
    /// rolled back if not.
    async fn in_transaction<T>(
        &self,
        work: impl Future<Output = StoreResult<T>>,
    ) -> StoreResult<T> {
        run(&self.writes.begin, Vec::new()).await?;
        match work.await {
            Ok(value) => {
                self.end().await?;
                Ok(value)
            }
            Err(e) => {
                let _ = run(&self.writes.rollback, Vec::new()).await;
                Err(e)
            }
        }
    }

    /// Runs one statement in the open transaction; the rows it changed.
    async fn change(&self, sql: &str, params: Vec<Value>) -> StoreResult<u64> {
        self.conn.execute(sql, params).await.map_err(super::backend)
    }
}
