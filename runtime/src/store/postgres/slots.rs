//! Slots of concurrency keys on PostgreSQL (spec/flow-control.md,
//! "Admission"): each call is one transaction that first takes an advisory
//! transaction lock on the key, so daemons sharing the database admit one
//! run of a key at a time and never more than its limit.

use tokio_postgres::Transaction;

use super::{CHANNEL, PostgresStore, backend};
use crate::store::slots::{
    AHEAD, CALL, CALLS, DUE, FORGET, HOLD, HOLDERS, INSERT, LIMIT, MINE, NEXT, PAST_WINDOWS,
    PENDING, PUT_PENDING, SWEEP, TELL, WAITING, admitted_mail, numbered,
};
use crate::store::{
    Admission, Admitted, BoxFuture, Debounced, Notice, PendingStart, RateCall, Rated, Slots,
    Standing, StoreResult,
};

/// Locks key `$1` until the transaction ends.
const LOCK_KEY: &str = "SELECT pg_advisory_xact_lock(hashtextextended($1, 51))";

/// The database's clock now (not the transaction's start), milliseconds
/// since the epoch.
const CLOCK: &str = "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint";

impl Slots for PostgresStore {
    fn admit(&self, ask: Admission) -> BoxFuture<'_, StoreResult<Admitted>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(backend)?;
            tx.execute(LOCK_KEY, &[&ask.key]).await.map_err(backend)?;
            if standing(&tx, &ask.workflow_id).await?.is_none() {
                let holders = holders(&tx, &ask.key).await?;
                let full = holders.len() >= ask.limit as usize;
                if full && !ask.wait {
                    return Ok(Admitted::Refused { holders });
                }
                let (limit, turn) = (i64::from(ask.limit), ask.turn as i64);
                let held = i64::from(!full);
                tx.execute(
                    numbered(INSERT).as_str(),
                    &[&ask.key, &ask.workflow_id, &limit, &turn, &held, &ask.at],
                )
                .await
                .map_err(backend)?;
            }
            let standing = standing(&tx, &ask.workflow_id).await?;
            tx.commit().await.map_err(backend)?;
            Ok(standing.map_or(Admitted::Holds, |s| s.admitted))
        })
    }

    fn promote<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Vec<String>>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(backend)?;
            tx.execute(LOCK_KEY, &[&key]).await.map_err(backend)?;
            tx.execute(numbered(SWEEP).as_str(), &[&key])
                .await
                .map_err(backend)?;
            let limit: i64 = tx
                .query_opt(numbered(LIMIT).as_str(), &[&key])
                .await
                .map_err(backend)?
                .map_or(0, |row| row.get(0));
            let free = (limit - holders(&tx, key).await?.len() as i64).max(0);
            let mut next = Vec::new();
            if free > 0 {
                for row in tx
                    .query(numbered(NEXT).as_str(), &[&key, &free])
                    .await
                    .map_err(backend)?
                {
                    let id: String = row.get(0);
                    tx.execute(numbered(HOLD).as_str(), &[&id])
                        .await
                        .map_err(backend)?;
                    tell(&tx, &id).await?;
                    next.push(id);
                }
            }
            tx.commit().await.map_err(backend)?;
            Ok(next)
        })
    }

    fn waiting(&self) -> BoxFuture<'_, StoreResult<Vec<(String, u64)>>> {
        Box::pin(self.query(WAITING, &[], |row| {
            Ok((row.get(0), row.get::<_, i64>(1) as u64))
        }))
    }

    fn take_call(&self, call: RateCall) -> BoxFuture<'_, StoreResult<Rated>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(backend)?;
            tx.execute(LOCK_KEY, &[&call.key]).await.map_err(backend)?;
            // The database's clock, read once the key is locked: one clock
            // for every daemon, in the order the calls are counted.
            let now: i64 = tx.query_one(CLOCK, &[]).await.map_err(backend)?.get(0);
            let now = u64::try_from(now).unwrap_or(0);
            let window = call.window_at(now);
            let next = window + call.per_ms;
            let (here, after) = (
                calls(&tx, &call.key, window).await?,
                calls(&tx, &call.key, next).await?,
            );
            let rated = call.rated(now, window, here, after);
            if matches!(rated, Rated::Counted { .. }) {
                let (window, next) = (window as i64, next as i64);
                tx.execute(numbered(PAST_WINDOWS).as_str(), &[&call.key, &window])
                    .await
                    .map_err(backend)?;
                tx.execute(numbered(CALL).as_str(), &[&call.key, &window])
                    .await
                    .map_err(backend)?;
                if call.spills(now, window as u64) {
                    tx.execute(numbered(CALL).as_str(), &[&call.key, &next])
                        .await
                        .map_err(backend)?;
                }
                tx.commit().await.map_err(backend)?;
            }
            Ok(rated)
        })
    }

    fn debounce(&self, delivery: Debounced) -> BoxFuture<'_, StoreResult<PendingStart>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(backend)?;
            let lock = format!("debounce:{}:{}", delivery.template, delivery.key);
            tx.execute(LOCK_KEY, &[&lock]).await.map_err(backend)?;
            let open = tx
                .query_opt(
                    numbered(PENDING).as_str(),
                    &[&delivery.template, &delivery.key],
                )
                .await
                .map_err(backend)?
                .map(|row| pending_start(&row));
            let start = delivery.applied_to(open.as_ref());
            let (first, due, deliveries) = (
                start.first_ms as i64,
                start.due_ms as i64,
                start.deliveries as i64,
            );
            tx.execute(
                numbered(PUT_PENDING).as_str(),
                &[
                    &start.template,
                    &start.key,
                    &start.inputs,
                    &first,
                    &due,
                    &deliveries,
                ],
            )
            .await
            .map_err(backend)?;
            tx.commit().await.map_err(backend)?;
            Ok(start)
        })
    }

    fn due_starts(&self, now_ms: u64, limit: u32) -> BoxFuture<'_, StoreResult<Vec<PendingStart>>> {
        Box::pin(async move {
            let (now, limit) = (now_ms as i64, i64::from(limit));
            self.query(&numbered(DUE), &[&now, &limit], |row| {
                Ok(pending_start(row))
            })
            .await
        })
    }

    fn forget_start<'a>(&'a self, start: &'a PendingStart) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            let first = start.first_ms as i64;
            self.execute(&numbered(FORGET), &[&start.template, &start.key, &first])
                .await
                .map(drop)
        })
    }

    fn standing<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<Standing>>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(backend)?;
            standing(&tx, id).await
        })
    }
}

/// Leaves run `id` its `run_admitted` input, and announces the mail once
/// the transaction commits (a wake-up for its owner; polling backs it).
async fn tell(tx: &Transaction<'_>, id: &str) -> StoreResult<()> {
    let (mail, at) = (admitted_mail(), crate::time::rfc3339(crate::time::now_ms()));
    tx.execute(numbered(TELL).as_str(), &[&id, &mail, &at])
        .await
        .map_err(backend)?;
    let notice = Notice::Mail(id.to_owned()).encode();
    tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &notice])
        .await
        .map_err(backend)?;
    Ok(())
}

/// The calls counted in window `start` of rate key `key`.
async fn calls(tx: &Transaction<'_>, key: &str, start: u64) -> StoreResult<u64> {
    let row = tx
        .query_opt(numbered(CALLS).as_str(), &[&key, &(start as i64)])
        .await
        .map_err(backend)?;
    Ok(row.map_or(0, |row| row.get::<_, i64>(0) as u64))
}

/// Where run `id` stands with its key.
async fn standing(tx: &Transaction<'_>, id: &str) -> StoreResult<Option<Standing>> {
    let Some(row) = tx
        .query_opt(numbered(MINE).as_str(), &[&id])
        .await
        .map_err(backend)?
    else {
        return Ok(None);
    };
    let (held, turn, key, limit): (i64, i64, String, i64) =
        (row.get(0), row.get(1), row.get(3), row.get(4));
    let admitted = if held == 1 {
        Admitted::Holds
    } else {
        let position: i64 = tx
            .query_one(numbered(AHEAD).as_str(), &[&key, &turn, &id])
            .await
            .map_err(backend)?
            .get(0);
        Admitted::Waits {
            position: position as u64,
            holders: holders(tx, &key).await?,
        }
    };
    Ok(Some(Standing {
        key,
        limit: u32::try_from(limit).unwrap_or(u32::MAX),
        admitted,
    }))
}

/// The runs of `key` holding a slot, oldest first.
async fn holders(tx: &Transaction<'_>, key: &str) -> StoreResult<Vec<String>> {
    let rows = tx
        .query(numbered(HOLDERS).as_str(), &[&key])
        .await
        .map_err(backend)?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// A `pending_starts` row.
fn pending_start(row: &tokio_postgres::Row) -> PendingStart {
    PendingStart {
        template: row.get(0),
        key: row.get(1),
        inputs: row.get(2),
        first_ms: row.get::<_, i64>(3) as u64,
        due_ms: row.get::<_, i64>(4) as u64,
        deliveries: row.get::<_, i64>(5) as u64,
    }
}
