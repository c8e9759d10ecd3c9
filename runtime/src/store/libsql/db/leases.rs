//! Leases on the libSQL connection: a run's owner and until when, kept in
//! its row (schema v4), claimed, renewed and released.

use libsql::Value;

use super::{Db, backend, get};
use crate::store::{Claim, StoreResult};

impl Db {
    /// Claims a lease.
    pub fn claim(
        &self,
        id: &str,
        owner: &str,
        take_from: Option<&str>,
        now: &str,
        until: &str,
    ) -> StoreResult<Claim> {
        self.block(async {
            let changed = self
                .conn
                .execute(
                    "UPDATE workflows SET lease_owner = ?2, lease_expires_at = ?4 \
                     WHERE id = ?1 AND (lease_owner IS NULL OR lease_owner = ?2 \
                     OR lease_expires_at < ?3 OR lease_owner = ?5)",
                    vec![
                        Value::from(id),
                        owner.into(),
                        now.into(),
                        until.into(),
                        take_from.map(str::to_owned).into(),
                    ],
                )
                .await
                .map_err(backend)?;
            if changed > 0 {
                return Ok(Claim::Granted);
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
            Ok(held.unwrap_or(Claim::Granted))
        })
    }

    /// Renews an owner's leases.
    pub fn renew(&self, owner: &str, until: &str) -> StoreResult<()> {
        self.block(async {
            self.conn
                .execute(
                    // Only runs not ended can be loaded: the status index
                    // keeps this to them.
                    "UPDATE workflows SET lease_expires_at = ?2 \
                     WHERE status IN ('pending', 'active', 'suspended') AND lease_owner = ?1",
                    vec![Value::from(owner), until.into()],
                )
                .await
                .map_err(backend)
                .map(|_| ())
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
