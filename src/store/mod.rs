//! The store: the only place that runs SQL (SQLite through sqlx, runtime-checked queries
//! tested against a real database). One file per table group, mirroring `migrations/`.
//!
//! Rows carry ruma ids (`OwnedRoomId`, `OwnedEventId`, `OwnedUserId`): an id is parsed
//! once, when it enters (the inbox, a homeserver answer), and a stored id that no longer
//! parses is reported as corruption instead of travelling on as a string.
//!
//! SQLite runs in WAL mode with one writer connection (`writer`) and a pool of readers
//! (`pool`): writes queue in order for the one connection instead of polling SQLite's busy
//! lock, and readers never wait for a writer. A commit survives a crash of richbot; with
//! `database.synchronous = "full"` (the default) [`Store::sync`] flushes the WAL at the
//! points where richbot promises more (the 200 for a transaction, a message sent), shared
//! by everyone waiting (`durable.rs`); with `"normal"` those flushes are skipped and the
//! last transactions may be lost to power loss. `secure_delete` overwrites deleted content
//! (redactions) instead of leaving it in free pages. The database and its WAL files are
//! owner-only (0600): they hold every message richbot has seen.

mod approvals;
mod durable;
mod events;
mod meta;
mod outbox;
mod rooms;
mod sent;
mod settings;
mod turns;
mod usage;

use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::Row;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};

pub use approvals::{Approval, NewApproval};
pub use events::{NewEvent, StoredEvent};
pub use outbox::{NewWrite, OutboxRow, OutboxState};
pub use sent::{NewSent, SentMessage};
pub use turns::{Notice, TurnRecord, TurnRow};
pub use usage::{BudgetKind, Budgets, DAY_MS, DayUse, Spent};

static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// A store failure. Callers treat every variant as "try again later": nothing is marked
/// done unless the store said so.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("database: {0}")]
    Sql(#[from] sqlx::Error),
    #[error("database migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored JSON is corrupt: {0}")]
    Json(#[from] serde_json::Error),
    #[error("cannot open the database file {0}: {1}")]
    File(String, std::io::Error),
    #[error("stored {column} is not a valid Matrix id: {value}")]
    BadId { column: &'static str, value: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A handle on the database; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    /// Readers.
    pool: SqlitePool,
    /// The one writer connection: every statement that writes runs here.
    writer: SqlitePool,
    durable: Arc<durable::Durable>,
    /// Joined members per room, read once from `room_members` and dropped when they change
    /// (triage asks for them on every message); only in the process that owns the database
    /// (`caching_members`), since another process's changes would not drop them.
    members: Option<Arc<Mutex<rooms::Members>>>,
}

impl Store {
    /// Opens (creating if missing) and migrates the database at `url`, durable against
    /// power loss.
    pub async fn open(url: &str) -> Result<Self> {
        Self::open_with(url, true).await
    }

    /// Like [`Store::open`]; `full` false trades power-loss durability for less disk work.
    pub async fn open_with(url: &str, full: bool) -> Result<Self> {
        let file = file_path(url);
        if let Some(path) = &file {
            private_file(path)?;
        }
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .pragma("secure_delete", "ON")
            .busy_timeout(Duration::from_secs(10));
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .test_before_acquire(false)
            // One connection for good: its statement cache stays warm.
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options.clone())
            .await?;
        MIGRATOR.run(&writer).await?;
        // An in-memory database is one per connection: there, the writer reads too.
        let pool = match &file {
            Some(_) => {
                SqlitePoolOptions::new().max_connections(8).test_before_acquire(false).connect_with(options).await?
            }
            None => writer.clone(),
        };
        if let Some(path) = &file {
            for suffix in ["", "-wal", "-shm"] {
                let p = std::path::PathBuf::from(format!("{}{suffix}", path.display()));
                if p.exists() {
                    restrict(&p)?;
                }
            }
        }
        let durable = Arc::new(durable::Durable::new(file.filter(|_| full)));
        Ok(Self { pool, writer, durable, members: None })
    }

    /// This handle's process is the only one writing the database (`serve`, holding its
    /// lock): joined members may be kept in memory.
    #[must_use]
    pub fn caching_members(mut self) -> Self {
        self.members = Some(Arc::default());
        self
    }

    /// Returns once every transaction committed so far is on disk (see `durable.rs`).
    pub async fn sync(&self) -> Result<()> {
        self.durable.sync().await
    }

    /// How many WAL flushes [`Store::sync`] has done (several callers share one).
    pub fn flushes(&self) -> u64 {
        self.durable.flushes()
    }

    /// Whether the database answers (readiness).
    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.writer).await?;
        Ok(())
    }

    /// Closes the pool, waiting for connections to finish.
    pub async fn close(&self) {
        self.pool.close().await;
        self.writer.close().await;
    }
}

/// Creates the database file owner-only if it is missing (SQLite gives its WAL files the
/// same mode), and tightens an existing one.
fn private_file(path: &std::path::Path) -> Result<()> {
    if !path.exists() {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(false);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        options.open(path).map_err(|e| Error::File(path.display().to_string(), e))?;
    }
    restrict(path)
}

fn restrict(path: &std::path::Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| Error::File(path.display().to_string(), e))?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// The file of an SQLite URL (`sqlite://path?mode=...`), if it names one.
pub fn file_path(url: &str) -> Option<std::path::PathBuf> {
    let rest = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:"))?;
    let path = rest.split('?').next().unwrap_or(rest);
    (!path.is_empty() && !path.starts_with(':')).then(|| std::path::PathBuf::from(path))
}

/// Reads a column holding a Matrix id as its ruma type.
fn id<T: TryFrom<String>>(row: &SqliteRow, column: &'static str) -> Result<T> {
    let value: String = row.try_get(column)?;
    T::try_from(value.clone()).map_err(|_| Error::BadId { column, value })
}

/// Reads a nullable column holding a Matrix id.
fn opt_id<T: TryFrom<String>>(row: &SqliteRow, column: &'static str) -> Result<Option<T>> {
    let value: Option<String> = row.try_get(column)?;
    value.map(|v| T::try_from(v.clone()).map_err(|_| Error::BadId { column, value: v })).transpose()
}
