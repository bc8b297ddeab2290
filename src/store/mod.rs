//! The store: the only place that runs SQL (SQLite or PostgreSQL through sqlx's `Any`
//! driver, runtime-checked queries tested against both real databases). One file per table
//! group, mirroring `migrations/sqlite` and `migrations/postgres`, which reach the same
//! schema version with the same numbers.
//!
//! One SQL text serves both: `$N` placeholders (made bare `?`s on SQLite where a statement
//! has many: `params.rs`), TEXT and BIGINT
//! columns only, JSON kept as text and read in Rust, no `json_each` or two-argument `MAX`
//! (IN lists are built with [`list`], maxima with `CASE`), sums cast to BIGINT. What is
//! SQLite's alone (WAL, the flush at durability points, checkpoints (`checkpoint.rs`),
//! owner-only files) is done only when [`Backend::Sqlite`].
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

// The tables of the pipeline, in its order: transactions and events in, rooms and who
// may invite, leases between instances, turns and their budgets, writes out and what was
// sent, and what turns keep (voice transcripts, uploads).
mod transactions;
mod events;
mod rooms;
mod invites;
mod leases;
mod turns;
mod usage;
mod outbox;
mod sent;
mod transcripts;
mod uploads;
// What members and other agents asked for that outlives a turn.
mod polls;
mod schedules;
mod settings;
mod approvals;
mod agents;
// The installation's facts, and forgetting what is older than the history kept.
mod meta;
mod retention;
// The personas' end-to-end encryption state (`crypto/`), and the database itself, not a
// table of it: opening, durability, checkpoints, the lock, placeholders, copying
// (`engine/`).
mod crypto;
mod engine;

use std::sync::{Arc, Mutex};

use sqlx::any::AnyRow;
use sqlx::migrate::Migrator;
use sqlx::{AnyPool, Row};

pub use agents::AgentRequest;
pub use approvals::{Approval, NewApproval};
pub use crypto::{
    CryptoWrite, Fence, GroupSessionRow, InboxRow, OlmSessionRow, RoomEncryption, Rotation, WAITING_FOR_KEY,
};
pub use engine::{Held, Table, file_path, lock_file};
pub use events::{NewEvent, StoredEvent};
pub use leases::RoomFacts;
pub use outbox::{NewWrite, OutboxRow, OutboxState};
pub use polls::{NewPoll, PollReply, PollRow};
pub use retention::Pruned;
pub use schedules::{NewScheduleRow, Over, ScheduleRow};
pub use sent::{NewSent, SentMessage};
pub use transactions::TxnSeen;
pub use turns::{Notice, TurnRecord, TurnRow};
pub use uploads::{UploadKey, UploadRow};
pub use usage::{BudgetKind, Budgets, DAY_MS, DayUse, Spent};

static SQLITE: Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES: Migrator = sqlx::migrate!("./migrations/postgres");

/// Which database a store runs on, from its URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn of(url: &str) -> Self {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") { Self::Postgres } else { Self::Sqlite }
    }

    /// The schema version this build migrates to (the last migration's number).
    pub fn schema_version(self) -> i64 {
        let migrator = match self {
            Self::Sqlite => &SQLITE,
            Self::Postgres => &POSTGRES,
        };
        migrator.iter().map(|m| m.version).max().unwrap_or(0)
    }
}

/// Values per IN list (well under both databases' parameter limits).
const LIST_CHUNK: usize = 500;

/// How long an SQLite connection waits for a lock another holds (`open.rs`; set again by
/// `checkpoint.rs` after a try that must not wait).
const BUSY_TIMEOUT: &str = "PRAGMA busy_timeout = 10000";

/// The placeholders `$from, $from+1, …` of an IN list of `n` values.
fn list(from: usize, n: usize) -> String {
    (from..from + n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

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
    #[error(
        "{0} is a symbolic link; richbot opens its database only as a regular file (give database.url the real path)"
    )]
    Symlink(String),
    #[error("cannot copy: {0}")]
    Copy(String),
    #[error("another richbot process holds this database ({0}): richbot migrate runs alone; stop the other first")]
    Taken(String),
    #[error("{0}'s crypto state cannot be read: {1}")]
    Pickle(String, crate::pickle::Error),
    #[error("this instance no longer holds {0}'s crypto lease; the save was not made")]
    LeaseLost(String),
    #[error("stored {column} is not a valid Matrix id: {value}")]
    BadId { column: &'static str, value: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether this failure is the database being away or busy (worth waiting out), as
    /// opposed to one about the data, which the same statement will meet again.
    pub fn is_outage(&self) -> bool {
        match self {
            Error::Sql(sqlx::Error::Database(e)) => {
                let code = e.code().unwrap_or_default();
                // SQLite: busy, locked (and their extended codes). PostgreSQL: connection
                // (08), transaction rollback (40: serialization, deadlock), resources (53),
                // operator intervention (57).
                let sqlite_busy = code.parse::<i64>().is_ok_and(|c| matches!(c & 0xff, 5 | 6));
                sqlite_busy || ["08", "40", "53", "57"].iter().any(|class| code.starts_with(class))
            }
            Error::Sql(
                sqlx::Error::Io(_)
                | sqlx::Error::Tls(_)
                | sqlx::Error::Protocol(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::WorkerCrashed,
            ) => true,
            Error::File(..) => true,
            _ => false,
        }
    }
}

/// A handle on the database; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    backend: Backend,
    /// Readers.
    pool: AnyPool,
    /// Every statement that writes runs here: SQLite's one writer connection, or a pool
    /// of writers on PostgreSQL.
    writer: AnyPool,
    durable: Arc<engine::durable::Durable>,
    /// Joined members per room, read once from `room_members` and dropped when they change
    /// (triage asks for them on every message); only in the process that owns the database
    /// (`caching_members`), since another process's changes would not drop them.
    members: Option<Arc<Mutex<rooms::Members>>>,
    /// SQLite's WAL checkpoints (`checkpoint.rs`), running while a handle lives.
    checkpoints: Option<Arc<engine::checkpoint::Checkpoints>>,
    /// What the crypto secrets are sealed with (`pickles.rs`).
    pickles: Option<Arc<crate::pickle::PickleKey>>,
}

impl Store {
    /// Opens (creating if missing) and migrates the database at `url`, durable against
    /// power loss.
    pub async fn open(url: &str) -> Result<Self> {
        Self::open_with(url, true).await
    }

    /// Like [`Store::open`]; `full` false trades power-loss durability for less disk work
    /// (SQLite only: a PostgreSQL commit is durable when it returns).
    pub async fn open_with(url: &str, full: bool) -> Result<Self> {
        sqlx::any::install_default_drivers();
        match Backend::of(url) {
            Backend::Postgres => Self::open_postgres(url).await,
            Backend::Sqlite => Self::open_sqlite(url, full).await,
        }
    }

    pub fn backend(&self) -> Backend {
        self.backend
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

/// A database URL fit for logs and `check`: a password in it is replaced by `***`.
pub fn shown_url(url: &str) -> String {
    crate::url_mask::url(url)
}

/// Reads a column holding a Matrix id as its ruma type.
fn id<T: TryFrom<String>>(row: &AnyRow, column: &'static str) -> Result<T> {
    let value: String = row.try_get(column)?;
    T::try_from(value.clone()).map_err(|_| Error::BadId { column, value })
}

/// Reads a nullable column holding a Matrix id.
impl Store {
    /// SQL that is true when a stored event's JSON text (`events.event`) holds parameter
    /// `param` (`$1`...) as a substring, in this database's dialect (not `LIKE`: ids hold
    /// its wildcards).
    fn event_holds(&self, param: &str) -> String {
        match self.backend {
            Backend::Sqlite => format!("instr(event, {param}) > 0"),
            Backend::Postgres => format!("strpos(event, {param}) > 0"),
        }
    }
}

fn opt_id<T: TryFrom<String>>(row: &AnyRow, column: &'static str) -> Result<Option<T>> {
    let value: Option<String> = row.try_get(column)?;
    value.map(|v| T::try_from(v.clone()).map_err(|_| Error::BadId { column, value: v })).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_lists_number_their_placeholders_from_where_they_start() {
        assert_eq!(list(2, 3), "$2, $3, $4");
        assert_eq!(Backend::of("postgres://x/y"), Backend::Postgres);
        assert_eq!(Backend::of("sqlite://x.db"), Backend::Sqlite);
    }

    /// The two migration sets are kept in step: same migrations, same names, same last
    /// version, so a deployment can move between databases at any version.
    #[test]
    fn both_databases_migrate_to_the_same_schema_version() {
        let names = |m: &Migrator| m.iter().map(|m| (m.version, m.description.to_string())).collect::<Vec<_>>();
        assert_eq!(names(&SQLITE), names(&POSTGRES));
        assert!(Backend::Sqlite.schema_version() >= 15);
        assert_eq!(Backend::Sqlite.schema_version(), Backend::Postgres.schema_version());
    }
}
