//! Checkpoints the WAL from a thread of its own. SQLite's automatic
//! checkpoint runs inside the commit that crosses its threshold, and with
//! it a copy of the WAL into the database and an fsync: tens of
//! milliseconds that one unlucky commit would wait for. Here a second
//! connection runs a passive checkpoint now and then instead, which never
//! blocks the writer.

use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use libsql::Connection;

use super::super::{StoreError, StoreResult};

/// The running checkpointer; dropping it runs a last checkpoint and stops it.
pub struct Checkpointer {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts checkpointing the database at `path` every `every`.
    pub fn start(path: &Path, every: Duration) -> StoreResult<Checkpointer> {
        let (stop, stopped) = mpsc::channel::<()>();
        let (ready_tx, ready_rx) = mpsc::channel::<StoreResult<()>>();
        let path = path.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("opcode-checkpoint".into())
            .spawn(move || {
                let opened = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .map_err(backend)
                    .and_then(|rt| {
                        let conn = rt.block_on(connect(&path))?;
                        Ok((rt, conn))
                    });
                let (rt, conn) = match opened {
                    Ok(both) => {
                        let _ = ready_tx.send(Ok(()));
                        both
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                loop {
                    let last =
                        !matches!(stopped.recv_timeout(every), Err(RecvTimeoutError::Timeout));
                    if let Err(e) = rt.block_on(checkpoint(&conn)) {
                        tracing::warn!(error = %e, "WAL checkpoint failed; will retry");
                    }
                    if last {
                        return;
                    }
                }
            })
            .map_err(|e| StoreError::Backend(format!("cannot start the checkpointer: {e}")))?;
        ready_rx.recv().map_err(|_| StoreError::Closed)??;
        Ok(Checkpointer {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

async fn connect(path: &Path) -> StoreResult<Connection> {
    let db = libsql::Builder::new_local(path)
        .build()
        .await
        .map_err(backend)?;
    let conn = db.connect().map_err(backend)?;
    pragma(&conn, "PRAGMA busy_timeout = 5000").await?;
    Ok(conn)
}

/// Copies what the WAL holds into the database, as far as readers allow.
async fn checkpoint(conn: &Connection) -> StoreResult<()> {
    pragma(conn, "PRAGMA wal_checkpoint(PASSIVE)").await
}

/// Runs a pragma and drops the row it may answer with.
async fn pragma(conn: &Connection, sql: &str) -> StoreResult<()> {
    let mut rows = conn.query(sql, ()).await.map_err(backend)?;
    while rows.next().await.map_err(backend)?.is_some() {}
    Ok(())
}
