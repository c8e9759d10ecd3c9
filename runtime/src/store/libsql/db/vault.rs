//! The vault's header and sealed secrets on the libSQL connection.

use libsql::{Row, Value};

use super::{Db, get};
use crate::store::{SecretRow, StoreResult, VaultHeader};

impl Db {
    /// The vault's header.
    pub fn vault_header(&self) -> StoreResult<Option<VaultHeader>> {
        let sql = "SELECT salt, iterations, check_value, created_at FROM vault WHERE id = 1";
        let rows = self.block(self.query_all(sql, Vec::new(), header_row))?;
        Ok(rows.into_iter().next())
    }

    /// Stores the header unless there is one; the stored header.
    pub fn create_vault(&self, header: &VaultHeader) -> StoreResult<VaultHeader> {
        let params: Vec<Value> = vec![
            header.salt.clone().into(),
            i64::from(header.iterations).into(),
            header.check.clone().into(),
            header.created_at.as_str().into(),
        ];
        self.execute(
            "INSERT OR IGNORE INTO vault (id, salt, iterations, check_value, created_at) \
             VALUES (1, ?1, ?2, ?3, ?4)",
            params,
        )?;
        Ok(self.vault_header()?.unwrap_or_else(|| header.clone()))
    }

    /// Creates or replaces a secret.
    pub fn put_secret(&self, secret: &SecretRow) -> StoreResult<()> {
        let params: Vec<Value> = vec![
            secret.name.as_str().into(),
            secret.sealed.clone().into(),
            secret.created_at.as_str().into(),
            secret.updated_at.as_str().into(),
        ];
        self.execute(
            "INSERT INTO secrets (key, value, created_at, updated_at) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            params,
        )
        .map(|_| ())
    }

    /// Every secret, by name.
    pub fn secrets(&self) -> StoreResult<Vec<SecretRow>> {
        let sql = "SELECT key, value, created_at, updated_at FROM secrets ORDER BY key";
        self.block(self.query_all(sql, Vec::new(), secret_row))
    }

    /// Deletes a secret.
    pub fn delete_secret(&self, name: &str) -> StoreResult<bool> {
        self.execute("DELETE FROM secrets WHERE key = ?1", vec![name.into()])
            .map(|n| n > 0)
    }
}

fn header_row(row: &Row) -> StoreResult<VaultHeader> {
    Ok(VaultHeader {
        salt: get(row, 0)?,
        iterations: u32::try_from(get::<i64>(row, 1)?).unwrap_or(0),
        check: get(row, 2)?,
        created_at: get(row, 3)?,
    })
}

fn secret_row(row: &Row) -> StoreResult<SecretRow> {
    Ok(SecretRow {
        name: get(row, 0)?,
        sealed: get(row, 1)?,
        created_at: get(row, 2)?,
        updated_at: get(row, 3)?,
    })
}
