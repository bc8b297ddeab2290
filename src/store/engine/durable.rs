//! Durability points with group commit at the fsync.
//!
//! SQLite runs with `synchronous = NORMAL` in WAL mode: a commit is written to the WAL
//! (so it survives a crash of richbot) but not flushed to the disk. Where richbot promises
//! more, it calls [`Durable::sync`], which flushes the WAL (`fdatasync`) so that every
//! transaction committed before the call survives power loss too. Those points are the
//! homeserver's 200 for a transaction and every new message a persona posts (the outbox
//! flushes its claim, and the turn's, before the first attempt, so that a power cut
//! cannot make a new turn post it again; an edit needs no flush: its transaction id is
//! the same when it is made again): writes in between are flushed with the next point.
//!
//! Many callers share one flush: a call takes a ticket after its commit; whoever holds the
//! lock flushes everything ticketed so far, and those who waited behind it find their
//! ticket covered and return at once. So four concurrent transactions (or a thousand
//! turns posting at once) cost one or a few `fdatasync`s, not one each, and a flush never
//! comes before the commit it covers.
//!
//! Why this is sound: in WAL mode a commit is an append of frames to the `-wal` file; a
//! flush of that file makes every appended commit durable, and checkpoints (which copy
//! the WAL into the database and restart it) are flushed by SQLite itself.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Mutex;

use crate::store::{Error, Result};

/// The flush barrier of one database file (none for an in-memory database, or when
/// `database.synchronous = "normal"`).
#[derive(Debug)]
pub(in crate::store) struct Durable {
    db: Option<PathBuf>,
    /// Tickets handed out (each after its caller's commit).
    tickets: AtomicU64,
    /// The highest ticket known flushed; held while flushing.
    flushed: Mutex<u64>,
    /// Flushes done (for tests and metrics).
    flushes: AtomicU64,
}

impl Durable {
    pub(in crate::store) fn new(db: Option<PathBuf>) -> Self {
        Self { db, tickets: AtomicU64::new(0), flushed: Mutex::new(0), flushes: AtomicU64::new(0) }
    }

    /// Returns once every transaction committed before the call is on disk.
    pub(in crate::store) async fn sync(&self) -> Result<()> {
        let Some(db) = &self.db else { return Ok(()) };
        let ticket = self.tickets.fetch_add(1, Ordering::SeqCst) + 1;
        let mut flushed = self.flushed.lock().await;
        if *flushed >= ticket {
            return Ok(());
        }
        // Every ticket up to here was taken after its commit: this flush covers them all.
        let upto = self.tickets.load(Ordering::SeqCst);
        let db = db.clone();
        tokio::task::spawn_blocking(move || flush(&db))
            .await
            .map_err(|e| Error::File("(flush task)".to_owned(), std::io::Error::other(e)))??;
        self.flushes.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(upto, "WAL flushed");
        *flushed = upto;
        Ok(())
    }

    pub(in crate::store) fn flushes(&self) -> u64 {
        self.flushes.load(Ordering::Relaxed)
    }
}

/// Flushes the WAL file (opened anew: a `TRUNCATE` checkpoint may have cut it), or the
/// database itself when there is no WAL file.
fn flush(db: &std::path::Path) -> Result<()> {
    let wal = PathBuf::from(format!("{}-wal", db.display()));
    let path = if wal.exists() { wal } else { db.to_path_buf() };
    let file =
        std::fs::OpenOptions::new().read(true).open(&path).map_err(|e| Error::File(path.display().to_string(), e))?;
    file.sync_data().map_err(|e| Error::File(path.display().to_string(), e))
}
