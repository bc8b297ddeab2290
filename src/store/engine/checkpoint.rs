//! SQLite's WAL checkpoints, off the path of a transaction's 200.
//!
//! By default SQLite checkpoints (copies the WAL back into the database file and flushes
//! it) inside the commit that takes the WAL past 1,000 pages: on an ingest load that was
//! one transaction in about eleven, and its 200 waited for the copy and an `fsync` of the
//! database (the p99 of `cargo bench --bench pipeline -- ingest`). Here no connection
//! checkpoints on commit (`wal_autocheckpoint = 0`, set in `open.rs`); this task does,
//! every [`EVERY`] or after [`BATCHES`] inserts of events, whichever comes first, in two
//! steps:
//! 1. a `PASSIVE` checkpoint on a reader connection: it copies while the writer goes on
//!    appending, blocking no one;
//! 2. when the WAL holds over [`RESET_FRAMES`], a `PASSIVE` checkpoint on the writer
//!    connection, queued like a write: it copies only what came during step 1, and being
//!    on the writer it finishes with nothing appended behind it, so SQLite starts the WAL
//!    over at the next commit. (Step 1 alone never lets it start over under a steady
//!    load, and the WAL grows without end.)
//!
//! A page written many times between two checkpoints is copied once. `journal_size_limit`
//! cuts the WAL file back when it starts over. The task ends when the last handle on the
//! store is dropped (it holds a `Weak`) or the pools are closed.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use sqlx::{AnyPool, Row};
use tokio::sync::Notify;

/// The longest time between two checkpoints (inserts bring one forward).
const EVERY: Duration = Duration::from_millis(250);
/// Inserts of events that bring the next checkpoint forward.
const BATCHES: u32 = 16;
/// A WAL of more frames (pages) is started over (SQLite's own default threshold).
const RESET_FRAMES: i64 = 1000;
/// How long a truncation after a redaction is tried while readers keep the WAL busy.
const TRUNCATE_FOR: Duration = Duration::from_secs(5);

/// Kept by every handle on the store; the checkpointer runs while one lives.
#[derive(Debug, Default)]
pub(in crate::store) struct Checkpoints {
    inserts: AtomicU32,
    due: Notify,
}

impl Checkpoints {
    /// An insert of events was committed.
    pub(in crate::store) fn inserted(&self) {
        if self.inserts.fetch_add(1, Ordering::Relaxed) + 1 >= BATCHES {
            self.due.notify_one();
        }
    }
}

/// Starts checkpointing the database of `readers` and `writer`; returns the token its
/// handles keep.
pub(in crate::store) fn start(readers: AnyPool, writer: AnyPool) -> Arc<Checkpoints> {
    let checkpoints = Arc::new(Checkpoints::default());
    let weak: Weak<Checkpoints> = Arc::downgrade(&checkpoints);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + EVERY, EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let Some(due) = weak.upgrade() else { return };
            tokio::select! {
                _ = tick.tick() => {}
                () = due.due.notified() => tick.reset(),
            }
            due.inserts.store(0, Ordering::Relaxed);
            drop(due);
            if readers.is_closed() || writer.is_closed() {
                return;
            }
            if let Err(e) = checkpoint(&readers, &writer).await {
                if readers.is_closed() || writer.is_closed() {
                    return;
                }
                tracing::warn!(error = %e, "a WAL checkpoint failed; the next one tries again");
            }
        }
    });
    checkpoints
}

/// Steps 1 and 2 of the module docs.
async fn checkpoint(readers: &AnyPool, writer: &AnyPool) -> Result<(), sqlx::Error> {
    const PASSIVE: &str = "PRAGMA wal_checkpoint(PASSIVE)";
    let row = sqlx::query(PASSIVE).fetch_one(readers).await?;
    let frames: i64 = row.try_get(1)?;
    if frames > RESET_FRAMES {
        sqlx::query(PASSIVE).execute(writer).await?;
    }
    Ok(())
}

impl crate::store::Store {
    /// Counts an insert of events towards the next checkpoint.
    pub(in crate::store) fn inserted(&self) {
        if let Some(c) = &self.checkpoints {
            c.inserted();
        }
    }

    /// Folds the whole WAL into the database and truncates it (after a redaction: the WAL
    /// still holds the pages as they were, and `secure_delete` zeroes only what the
    /// database frees). A reader in a transaction, or a checkpoint of the task above, makes
    /// it busy: it is tried again every few milliseconds for at most [`TRUNCATE_FOR`].
    /// Each try fails at once rather than wait in SQLite's busy handler (10 s, holding the
    /// writer), and the writer is free between tries, so other writes go on meanwhile.
    pub(in crate::store) async fn truncate_wal(&self) -> crate::store::Result<()> {
        if self.backend != crate::store::Backend::Sqlite {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + TRUNCATE_FOR;
        loop {
            let mut conn = self.writer.acquire().await?;
            sqlx::query("PRAGMA busy_timeout = 0").execute(&mut *conn).await?;
            let tried = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").fetch_one(&mut *conn).await;
            sqlx::query(crate::store::BUSY_TIMEOUT).execute(&mut *conn).await?;
            drop(conn);
            if tried?.try_get::<i64, _>(0)? == 0 {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!("the WAL could not be truncated after a redaction; the next checkpoints fold it in");
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
