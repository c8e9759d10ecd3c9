//! Leases on the libSQL connection: a run's owner, until when and the
//! grant's epoch, kept in its row (schema v4, v6), claimed, renewed and
//! released. The store's clock is this process's: one machine.

use std::time::Duration;

use libsql::Value;

use super::{Db, backend, get};
use crate::store::{Backlog, Claim, StoreResult};
use crate::time::{from_now, now_ms, rfc3339};

/// The orphans, each agent's oldest first, one agent at a time.
const ORPHANS: &str = "SELECT id FROM (SELECT id, created_at, \
     row_number() OVER (PARTITION BY agent_id ORDER BY created_at, id) AS turn FROM workflows \
     WHERE status IN ('pending', 'active') \
     AND (lease_owner IS NULL OR lease_expires_at < ?1)) AS o ORDER BY turn, created_at, id";

impl Db {
    /// Claims a lease for `ttl`.
    pub fn claim(
        &self,
        id: &str,
        owner: &str,
        take_from: Option<&str>,
        ttl: Duration,
    ) -> StoreResult<Claim> {
        self.block(async {
            let granted = self
                .query_one(
                    "UPDATE workflows SET lease_owner = ?2, lease_expires_at = ?4, \
                     lease_epoch = lease_epoch + (lease_owner IS NOT ?2) \
                     WHERE id = ?1 AND (lease_owner IS NULL OR lease_owner = ?2 \
                     OR lease_expires_at < ?3 OR lease_owner = ?5) RETURNING lease_epoch",
                    vec![
                        Value::from(id),
                        owner.into(),
                        rfc3339(now_ms()).into(),
                        from_now(ttl).into(),
                        take_from.map(str::to_owned).into(),
                    ],
                    |row| get::<i64>(row, 0),
                )
                .await?;
            if let Some(epoch) = granted {
                return Ok(Claim::Granted {
                    epoch: epoch as u64,
                });
            }
            let held = self
                .query_one(
                    "SELECT lease_owner, lease_expires_at FROM workflows \
                     WHERE id = ?1 AND lease_owner IS NOT NULL",
                    vec![id.into()],
                    |row| {
                        Ok(Claim::Held {
                            owner: get(row, 0)?,
                            expires_at: get(row, 1)?,
                        })
                    },
                )
                .await?;
            Ok(held.unwrap_or(Claim::Granted { epoch: 0 }))
        })
    }

    /// Renews an owner's leases for `ttl`.
    pub fn renew(&self, owner: &str, ttl: Duration) -> StoreResult<()> {
        self.block(async {
            self.conn
                .execute(
                    // Only runs not ended can be loaded: the status index
                    // keeps this to them.
                    "UPDATE workflows SET lease_expires_at = ?2 \
                     WHERE status IN ('pending', 'active', 'suspended') AND lease_owner = ?1",
                    vec![Value::from(owner), from_now(ttl).into()],
                )
                .await
                .map_err(backend)
                .map(|_| ())
        })
    }

    /// Runs pending or active whose lease is free or expired, fairly.
    pub fn orphans(&self, limit: u32) -> StoreResult<Vec<String>> {
        let sql = format!("{ORPHANS} LIMIT {limit}");
        let now = rfc3339(now_ms());
        self.block(self.query_all(&sql, vec![now.into()], |row| get(row, 0)))
    }

    /// The work no process is doing.
    pub fn backlog(&self) -> StoreResult<Backlog> {
        let now_ms = now_ms();
        let now = rfc3339(now_ms);
        let runnable = "FROM workflows WHERE status IN ('pending', 'active') \
                        AND (lease_owner IS NULL OR lease_expires_at < ?1)";
        let counts = format!(
            "SELECT (SELECT COUNT(*) {runnable}), \
             (SELECT MIN(COALESCE(lease_expires_at, updated_at)) {runnable}), \
             (SELECT COUNT(*) FROM timers WHERE due_at <= ?1), \
             (SELECT MIN(due_at) FROM timers WHERE due_at <= ?1)"
        );
        self.block(async {
            let row = self
                .query_one(&counts, vec![now.as_str().into()], |row| {
                    Ok((
                        get::<i64>(row, 0)?,
                        get::<Option<String>>(row, 1)?,
                        get::<i64>(row, 2)?,
                        get::<Option<String>>(row, 3)?,
                    ))
                })
                .await?;
            let (runnable, run_since, timers_due, timer_since) = row.unwrap_or_default();
            let oldest = [run_since, timer_since]
                .iter()
                .flatten()
                .filter_map(|at| crate::time::parse_ms(at))
                .min()
                .unwrap_or(now_ms);
            let leases = self
                .query_all(
                    "SELECT lease_owner, COUNT(*) FROM workflows \
                     WHERE lease_owner IS NOT NULL AND lease_expires_at >= ?1 \
                     GROUP BY lease_owner ORDER BY lease_owner",
                    vec![now.as_str().into()],
                    |row| Ok((get(row, 0)?, get::<i64>(row, 1)? as u64)),
                )
                .await?;
            Ok(Backlog {
                runnable: runnable as u64,
                timers_due: timers_due as u64,
                oldest_seconds: now_ms.saturating_sub(oldest) as f64 / 1000.0,
                leases,
            })
        })
    }

    /// Releases a lease.
    pub fn release(&self, id: &str, owner: &str) -> StoreResult<()> {
        self.block(async {
            self.conn
                .execute(
                    "UPDATE workflows SET lease_owner = NULL, lease_expires_at = NULL \
                     WHERE id = ?1 AND lease_owner = ?2",
                    vec![Value::from(id), owner.into()],
                )
                .await
                .map_err(backend)
                .map(|_| ())
        })
    }
}
