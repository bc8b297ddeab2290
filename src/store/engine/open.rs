//! Opening a store: PostgreSQL as it comes, SQLite with its settings (WAL, the writer
//! connection kept for good, owner-only files) and the file helpers that go with it.

use std::str::FromStr;
use std::sync::Arc;

use sqlx::Executor;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};

use super::{checkpoint, durable};
use crate::store::{BUSY_TIMEOUT, Backend, Error, POSTGRES, Result, SQLITE, Store};

impl Store {
    pub(in crate::store) async fn open_postgres(url: &str) -> Result<Self> {
        let options = AnyConnectOptions::from_str(url)?;
        // PostgreSQL takes writers side by side (and several instances write anyway), so
        // the inbox's commits need not queue behind the workers' as on SQLite's one writer.
        // No ping before each use (a round trip per query): a connection the server dropped
        // fails its query, and every caller tries a failed store call again.
        let pool = || AnyPoolOptions::new().max_connections(8).test_before_acquire(false);
        let writer = pool().connect_with(options.clone()).await?;
        POSTGRES.run(&writer).await?;
        let pool = pool().connect_with(options).await?;
        let durable = Arc::new(durable::Durable::new(None));
        Ok(Self { backend: Backend::Postgres, pool, writer, durable, members: None, checkpoints: None, pickles: None })
    }

    pub(in crate::store) async fn open_sqlite(url: &str, full: bool) -> Result<Self> {
        let file = file_path(url);
        if let Some(path) = &file {
            private_file(path)?;
        }
        let options = AnyConnectOptions::from_str(&sqlite_url(url))?;
        let writer = sqlite_pool(1)
            // One connection for good: its statement cache stays warm.
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options.clone())
            .await?;
        migrate_sqlite(&writer).await?;
        // An in-memory database is one per connection: there, the writer reads too.
        let pool = match &file {
            Some(_) => sqlite_pool(8).connect_with(options).await?,
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
        let checkpoints = file.as_ref().map(|_| checkpoint::start(pool.clone(), writer.clone()));
        let durable = Arc::new(durable::Durable::new(file.filter(|_| full)));
        Ok(Self { backend: Backend::Sqlite, pool, writer, durable, members: None, checkpoints, pickles: None })
    }
}

/// SQLite's migrations take no lock (PostgreSQL's take an advisory one), so two
/// processes opening a new database at once (`serve` starting while `richbot check`
/// runs) both try the first migration not yet recorded, and the later one fails on
/// "table already exists". Each migration commits in one transaction with its record,
/// so the loser changed nothing: while someone recorded a migration during a failed
/// attempt, the run is tried again and goes on from there. A failure with no progress
/// is a real one. Bounded: every retry follows at least one more recorded migration.
async fn migrate_sqlite(writer: &sqlx::AnyPool) -> Result<()> {
    loop {
        let before = recorded_migrations(writer).await;
        match SQLITE.run(writer).await {
            Ok(()) => return Ok(()),
            Err(e) if recorded_migrations(writer).await <= before => return Err(e.into()),
            Err(e) => tracing::debug!(error = %e, "another opener migrated the database meanwhile; going on"),
        }
    }
}

/// How many migrations the database records as applied (0 before the first).
async fn recorded_migrations(writer: &sqlx::AnyPool) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations").fetch_one(writer).await.unwrap_or(0)
}

/// SQLite connections: WAL, commits written to the WAL but flushed only at durability
/// points (`durable.rs`) and checkpointed apart (`checkpoint.rs`; the WAL file cut back
/// to 16 MiB after), foreign keys, deleted content overwritten, a writer waited for.
fn sqlite_pool(n: u32) -> AnyPoolOptions {
    AnyPoolOptions::new().max_connections(n).test_before_acquire(false).after_connect(|conn, _| {
        Box::pin(async move {
            conn.execute(
                "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;
                 PRAGMA secure_delete = ON; PRAGMA wal_autocheckpoint = 0;
                 PRAGMA journal_size_limit = 16777216;",
            )
            .await?;
            conn.execute(BUSY_TIMEOUT).await?;
            Ok(())
        })
    })
}

/// An SQLite URL that creates its file if missing.
fn sqlite_url(url: &str) -> String {
    if url.contains("mode=") || url.contains(":memory:") {
        url.to_owned()
    } else if url.contains('?') {
        format!("{url}&mode=rwc")
    } else {
        format!("{url}?mode=rwc")
    }
}

/// Creates the database file owner-only if it is missing (SQLite gives its WAL files the
/// same mode), and tightens an existing one.
fn private_file(path: &std::path::Path) -> Result<()> {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let p = std::path::PathBuf::from(format!("{}{suffix}", path.display()));
        if crate::private_files::is_symlink(&p) {
            return Err(Error::Symlink(p.display().to_string()));
        }
    }
    if !path.exists() {
        let mut options = std::fs::OpenOptions::new();
        crate::private_files::no_follow(options.write(true).create(true).truncate(false));
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        options.open(path).map_err(|e| Error::File(path.display().to_string(), e))?;
    }
    restrict(path)
}

fn restrict(path: &std::path::Path) -> Result<()> {
    if crate::private_files::is_symlink(path) {
        return Err(Error::Symlink(path.display().to_string()));
    }
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
