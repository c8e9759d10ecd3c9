//! Checkpoints the WAL from a thread of its own. SQLite's automatic
//! checkpoint runs inside the commit that crosses its threshold, and with
//! it a copy of the WAL into the database and an fsync: tens of
//! milliseconds that one unlucky commit would wait for. Here a second
//! connection runs a passive checkpoint now and then instead, which never
//! blocks the writer.
//!
//! A passive checkpoint alone cannot keep up with a steady writer: the WAL
//! starts over from its beginning only once every frame in it has been
//! copied into the database, and frames keep arriving while it copies. The
//! WAL would grow without end (hundreds of MB in seconds under load), each
//! commit extending the file. So when the WAL has grown to
//! [`FINISH_FROM`] frames, the checkpointer asks the writer to finish the
//! job ([`FinishRequest`]): between two batches, the store thread copies
//! the few frames written since, and its next commit starts the WAL over.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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

/// A WAL of this many frames (4 KiB pages, so 2 MiB) is finished by the
/// writer after a passive checkpoint: an eighth of the WAL's bound
/// ([`WAL_LIMIT_BYTES`]), the rest for what arrives until it does (a
/// 16-client load wrote up to 13 MiB more while a pass ran).
pub const FINISH_FROM: i64 = 512;

/// The bound on the WAL file: `journal_size_limit`, to which a WAL a
/// burst grew larger is cut back when it starts over.
pub const WAL_LIMIT_BYTES: i64 = 16 * 1024 * 1024;

/// Frames (of 4 KiB) in the WAL from which the store thread finishes a
/// checkpoint without waiting to be asked: a checkpointer starved of CPU
/// asks too late under a heavy load (the soak's WAL reached 20 MB).
pub const WRITER_FINISH_FROM: u32 = 3072;

/// How many frames the WAL holds, read from the wal-index header that
/// SQLite keeps in the `-shm` file (`mxFrame`, a native-endian `u32` at
/// byte 16: sqlite.org/walformat.html). A hint, read without SQLite's
/// locks: a torn read only moves one checkpoint.
#[derive(Debug)]
pub struct WalIndex {
    path: std::path::PathBuf,
    file: Option<std::fs::File>,
}

impl WalIndex {
    /// The wal-index of the database at `db`.
    pub fn of(db: &Path) -> WalIndex {
        let mut path = db.as_os_str().to_owned();
        path.push("-shm");
        WalIndex {
            path: path.into(),
            file: None,
        }
    }

    /// The frames in the WAL, when the index can be read.
    pub fn frames(&mut self) -> Option<u32> {
        use std::os::unix::fs::FileExt;
        if self.file.is_none() {
            self.file = std::fs::File::open(&self.path).ok();
        }
        let mut header = [0u8; 20];
        self.file.as_ref()?.read_exact_at(&mut header, 0).ok()?;
        let mx_frame = header[16..20].try_into().ok()?;
        Some(u32::from_ne_bytes(mx_frame))
    }
}

/// Set by the checkpointer when the writer should finish a checkpoint;
/// taken by the writer between batches.
#[derive(Debug, Clone, Default)]
pub struct FinishRequest(Arc<AtomicBool>);

impl FinishRequest {
    /// Asks the writer to finish (again, when its last try could not).
    pub fn ask(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Was a finish asked for since the last call?
    pub fn take(&self) -> bool {
        self.0.swap(false, Ordering::AcqRel)
    }
}

impl Checkpointer {
    /// Starts checkpointing the database at `path` every `every`, asking
    /// the writer through `finish` when the WAL has grown long.
    pub fn start(path: &Path, every: Duration, finish: FinishRequest) -> StoreResult<Checkpointer> {
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
                    match rt.block_on(checkpoint(&conn)) {
                        Ok(pass) if pass.log >= FINISH_FROM => finish.ask(),
                        Ok(_) => {}
                        Err(e) => tracing::warn!(error = %e, "WAL checkpoint failed; will retry"),
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

/// What a checkpoint pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    /// Another connection was checkpointing: this pass did nothing.
    pub busy: bool,
    /// Frames in the WAL.
    pub log: i64,
    /// Frames of it now in the database.
    pub copied: i64,
}

impl Pass {
    /// Is every frame of the WAL in the database, so that the next commit
    /// starts the WAL over?
    pub fn complete(self) -> bool {
        !self.busy && self.copied >= self.log
    }
}

/// Copies what the WAL holds into the database, as far as readers allow.
pub async fn checkpoint(conn: &Connection) -> StoreResult<Pass> {
    // The pragma answers one row: (busy, frames in the WAL, frames copied).
    let mut rows = conn
        .query("PRAGMA wal_checkpoint(PASSIVE)", ())
        .await
        .map_err(backend)?;
    let pass = match rows.next().await.map_err(backend)? {
        Some(row) => Pass {
            busy: row.get::<i64>(0).map_err(backend)? != 0,
            log: row.get::<i64>(1).map_err(backend)?,
            copied: row.get::<i64>(2).map_err(backend)?,
        },
        None => Pass {
            busy: false,
            log: 0,
            copied: 0,
        },
    };
    while rows.next().await.map_err(backend)?.is_some() {}
    Ok(pass)
}

/// Runs a pragma and drops the row it may answer with.
pub(super) async fn pragma(conn: &Connection, sql: &str) -> StoreResult<()> {
    let mut rows = conn.query(sql, ()).await.map_err(backend)?;
    while rows.next().await.map_err(backend)?.is_some() {}
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_wal_index_counts_the_frames_a_checkpoint_sees() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.db");
        let mut index = WalIndex::of(&path);
        assert_eq!(index.frames(), None, "no database yet");
        let conn = connect(&path).await.unwrap();
        pragma(&conn, "PRAGMA journal_mode = WAL").await.unwrap();
        pragma(&conn, "CREATE TABLE t (v TEXT)").await.unwrap();
        for i in 0..20 {
            let sql = format!("INSERT INTO t VALUES ('{}')", "x".repeat(3000 + i));
            pragma(&conn, &sql).await.unwrap();
        }
        let frames = index.frames().unwrap();
        assert!(frames >= 20, "{frames} frames");
        let pass = checkpoint(&conn).await.unwrap();
        assert_eq!(i64::from(frames), pass.log);
    }
}
