//! Reaching the database: the URL, TLS as its `sslmode` asks, the pool, and
//! the migrations, applied under an advisory lock so that daemons starting
//! at once apply each one once.

use std::str::FromStr;
use std::sync::Arc;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::backend;
use super::schema::{LATEST, MIGRATION_LOCK, MIGRATIONS};
use crate::store::{StoreError, StoreResult};

/// Connections the pool keeps at most.
const POOL_SIZE: usize = 16;

/// The parsed URL and the TLS connector every connection uses.
#[derive(Clone)]
pub(super) struct Target {
    pub config: tokio_postgres::Config,
    pub tls: MakeRustlsConnect,
}

impl Target {
    /// Parses a `postgres://` or `postgresql://` URL (or a key=value
    /// string). TLS follows its `sslmode` (`disable`, `prefer`, the default,
    /// or `require`); a server's certificate is always verified against
    /// the system's roots.
    pub fn parse(url: &str) -> StoreResult<Target> {
        let config = tokio_postgres::Config::from_str(url)
            .map_err(|e| StoreError::Backend(format!("the database URL is not valid: {e}")))?;
        Ok(Target {
            config,
            tls: MakeRustlsConnect::new(tls_config()?),
        })
    }

    /// The pool of connections for queries and commits.
    pub fn pool(&self) -> StoreResult<Pool> {
        let manager = Manager::from_config(
            self.config.clone(),
            self.tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        Pool::builder(manager)
            .max_size(POOL_SIZE)
            .build()
            .map_err(|e| StoreError::Backend(format!("cannot make the connection pool: {e}")))
    }
}

fn tls_config() -> StoreResult<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(found.certs);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Backend(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config)
}

/// Applies the migrations the database lacks, each in a transaction that
/// holds the migration lock and reads the version again under it.
pub(super) async fn migrate(pool: &Pool) -> StoreResult<()> {
    let mut client = pool.get().await.map_err(super::pool_error)?;
    // Under the migration lock too: two daemons creating the table at once
    // race in PostgreSQL's catalog (`IF NOT EXISTS` does not stop it).
    let tx = client.transaction().await.map_err(backend)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(backend)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_version \
         (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)",
    )
    .await
    .map_err(backend)?;
    tx.commit().await.map_err(backend)?;
    for &(version, name, sql) in MIGRATIONS {
        let tx = client.transaction().await.map_err(backend)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(backend)?;
        let current: i64 = tx
            .query_one("SELECT COALESCE(MAX(version), 0) FROM schema_version", &[])
            .await
            .map_err(backend)?
            .get(0);
        if current > LATEST {
            return Err(StoreError::Schema {
                found: current,
                known: LATEST,
            });
        }
        if current >= version {
            continue;
        }
        tx.batch_execute(sql).await.map_err(|e| {
            StoreError::Backend(format!("migration {version} ({name}) failed: {e}"))
        })?;
        let at = crate::time::rfc3339(crate::time::now_ms());
        tx.execute(
            "INSERT INTO schema_version (version, name, applied_at) VALUES ($1, $2, $3)",
            &[&version, &name, &at],
        )
        .await
        .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
    }
    Ok(())
}
