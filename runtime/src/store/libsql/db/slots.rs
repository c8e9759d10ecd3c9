//! Slots of concurrency keys on the libSQL connection (spec/flow-control.md,
//! "Admission"): each call is one `BEGIN IMMEDIATE` transaction, so the
//! database's single writer is the key's lock.

use libsql::Value;

use super::{Db, get};
use crate::store::slots::{
    AHEAD, CALL, CALLS, DUE, FORGET, HOLD, HOLDERS, INSERT, LIMIT, MINE, NEXT, PAST_WINDOWS,
    PENDING, PUT_PENDING, SWEEP, TELL, WAITING, admitted_mail,
};
use crate::store::{
    Admission, Admitted, Debounced, PendingStart, RateCall, Rated, Standing, StoreResult,
};

impl Db {
    /// [`Slots::admit`](crate::store::Slots::admit).
    pub fn admit(&self, ask: &Admission) -> StoreResult<Admitted> {
        self.block(self.in_transaction(self.admit_open(ask)))
    }

    async fn admit_open(&self, ask: &Admission) -> StoreResult<Admitted> {
        if let Some(standing) = self.standing_open(&ask.workflow_id).await? {
            return Ok(standing.admitted);
        }
        let holders = self.holders(&ask.key).await?;
        let full = holders.len() >= ask.limit as usize;
        if full && !ask.wait {
            return Ok(Admitted::Refused { holders });
        }
        self.insert_slot(ask, !full).await?;
        let standing = self.standing_open(&ask.workflow_id).await?;
        Ok(standing.map_or(Admitted::Holds, |s| s.admitted))
    }

    /// [`Slots::standing`](crate::store::Slots::standing).
    pub fn standing(&self, id: &str) -> StoreResult<Option<Standing>> {
        self.block(self.standing_open(id))
    }

    async fn standing_open(&self, id: &str) -> StoreResult<Option<Standing>> {
        let mine = self
            .query_one(MINE, vec![id.into()], |row| {
                Ok((
                    get::<i64>(row, 0)?,
                    get::<i64>(row, 1)?,
                    get::<String>(row, 2)?,
                    get::<String>(row, 3)?,
                    get::<i64>(row, 4)?,
                ))
            })
            .await?;
        let Some((held, turn, _at, key, limit)) = mine else {
            return Ok(None);
        };
        let admitted = if held == 1 {
            Admitted::Holds
        } else {
            let params = vec![key.as_str().into(), turn.into(), id.into()];
            let position = self
                .query_one(AHEAD, params, |row| get::<i64>(row, 0))
                .await?
                .unwrap_or(0) as u64;
            let holders = self.holders(&key).await?;
            Admitted::Waits { position, holders }
        };
        Ok(Some(Standing {
            key,
            limit: u32::try_from(limit).unwrap_or(u32::MAX),
            admitted,
        }))
    }

    async fn holders(&self, key: &str) -> StoreResult<Vec<String>> {
        self.query_all(HOLDERS, vec![key.into()], |row| get::<String>(row, 0))
            .await
    }

    async fn insert_slot(&self, ask: &Admission, held: bool) -> StoreResult<()> {
        let params: Vec<Value> = vec![
            ask.key.as_str().into(),
            ask.workflow_id.as_str().into(),
            i64::from(ask.limit).into(),
            (ask.turn as i64).into(),
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
            let holding = self.holders(key).await?.len() as i64;
            let free = (limit - holding).max(0);
            if free == 0 {
                return Ok(Vec::new());
            }
            let next = self
                .query_all(NEXT, vec![key.into(), free.into()], |row| {
                    get::<String>(row, 0)
                })
                .await?;
            let (mail, at) = (admitted_mail(), crate::time::rfc3339(crate::time::now_ms()));
            for id in &next {
                self.change(HOLD, vec![id.as_str().into()]).await?;
                let told = vec![id.as_str().into(), mail.as_str().into(), at.as_str().into()];
                self.change(TELL, told).await?;
            }
            Ok(next)
        }))
    }

    /// [`Slots::waiting`](crate::store::Slots::waiting).
    pub fn waiting(&self) -> StoreResult<Vec<(String, u64)>> {
        self.block(self.query_all(WAITING, Vec::new(), |row| {
            Ok((get::<String>(row, 0)?, get::<i64>(row, 1)? as u64))
        }))
    }

    /// [`Slots::take_call`](crate::store::Slots::take_call): the clock is
    /// read in the transaction, under the single writer.
    pub fn take_call(&self, call: &RateCall) -> StoreResult<Rated> {
        self.block(self.in_transaction(async {
            let key = call.key.as_str();
            let now = crate::time::now_ms();
            let window = call.window_at(now);
            let next = window + call.per_ms;
            let count = async |start: u64| {
                let at = vec![key.into(), (start as i64).into()];
                self.query_one(CALLS, at, |row| get::<i64>(row, 0))
                    .await
                    .map(|calls| calls.unwrap_or(0) as u64)
            };
            let rated = call.rated(now, window, count(window).await?, count(next).await?);
            if matches!(rated, Rated::Counted { .. }) {
                self.change(PAST_WINDOWS, vec![key.into(), (window as i64).into()])
                    .await?;
                self.change(CALL, vec![key.into(), (window as i64).into()])
                    .await?;
                if call.spills(now, window) {
                    self.change(CALL, vec![key.into(), (next as i64).into()])
                        .await?;
                }
            }
            Ok(rated)
        }))
    }

    /// [`Slots::debounce`](crate::store::Slots::debounce).
    pub fn debounce(&self, delivery: &Debounced) -> StoreResult<PendingStart> {
        self.block(self.in_transaction(async {
            let at = vec![
                delivery.template.as_str().into(),
                delivery.key.as_str().into(),
            ];
            let open = self.query_one(PENDING, at, pending_start).await?;
            let start = delivery.applied_to(open.as_ref());
            let params: Vec<Value> = vec![
                start.template.as_str().into(),
                start.key.as_str().into(),
                start.inputs.as_str().into(),
                (start.first_ms as i64).into(),
                (start.due_ms as i64).into(),
                (start.deliveries as i64).into(),
            ];
            self.change(PUT_PENDING, params).await?;
            Ok(start)
        }))
    }

    /// [`Slots::due_starts`](crate::store::Slots::due_starts).
    pub fn due_starts(&self, now_ms: u64, limit: u32) -> StoreResult<Vec<PendingStart>> {
        let params: Vec<Value> = vec![(now_ms as i64).into(), i64::from(limit).into()];
        self.block(self.query_all(DUE, params, pending_start))
    }

    /// [`Slots::forget_start`](crate::store::Slots::forget_start).
    pub fn forget_start(&self, start: &PendingStart) -> StoreResult<()> {
        let params: Vec<Value> = vec![
            start.template.as_str().into(),
            start.key.as_str().into(),
            (start.first_ms as i64).into(),
        ];
        self.block(self.change(FORGET, params)).map(drop)
    }

    /// Runs one statement in the open transaction; the rows it changed.
    async fn change(&self, sql: &str, params: Vec<Value>) -> StoreResult<u64> {
        self.conn.execute(sql, params).await.map_err(super::backend)
    }
}

/// A `pending_starts` row.
fn pending_start(row: &libsql::Row) -> StoreResult<PendingStart> {
    Ok(PendingStart {
        template: get(row, 0)?,
        key: get(row, 1)?,
        inputs: get(row, 2)?,
        first_ms: get::<i64>(row, 3)? as u64,
        due_ms: get::<i64>(row, 4)? as u64,
        deliveries: get::<i64>(row, 5)? as u64,
    })
}
