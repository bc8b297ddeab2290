//! Who may use a database at once. SQLite: one process, through a lock on a file beside
//! it (`private_files::lock`). PostgreSQL: any number of `serve` instances (they share the rooms
//! through leases, `leases.rs`), but none while `richbot migrate` copies it, and no migrate
//! while any instance serves. That is a session-level advisory lock, held on a connection
//! of its own for the life of the process: every `serve` holds it shared, `migrate`
//! exclusive. PostgreSQL releases it when that connection ends, so a killed process frees
//! it; one who cannot have it is told who holds it.

use sqlx::{AnyConnection, Connection, Row};

use crate::private_files;
use crate::store::{Backend, Error, Result, Store};

/// Locks the file beside an SQLite database (`None` for PostgreSQL, which
/// [`Store::exclusive`] takes once open); taken before the database is opened.
pub fn lock_file(url: &str) -> Result<Option<private_files::Lock>, private_files::LockError> {
    crate::store::file_path(url).map(|db| private_files::lock(&db.with_extension("lock"))).transpose()
}

/// The advisory lock key: "richbot" in ASCII, so other applications sharing the server
/// are unlikely to pick it.
const KEY: i64 = 0x72_69_63_68_62_6f_74;

/// The held lock; dropping it closes its connection and releases the lock.
#[derive(Debug)]
pub struct Held {
    conn: AnyConnection,
    session: i64,
}

impl Held {
    /// The PostgreSQL backend holding the lock: while it is there, so is this process
    /// (room leases name it, `leases.rs`).
    pub fn session(&self) -> i64 {
        self.session
    }

    /// Releases the database now (dropping it releases it too, once PostgreSQL sees the
    /// connection end).
    pub async fn release(mut self) -> Result<()> {
        // Unlocked before the connection goes: PostgreSQL ends a closed connection's
        // backend (and its locks) a moment after `close` returns.
        sqlx::query("SELECT pg_advisory_unlock_all()").execute(&mut self.conn).await?;
        Ok(self.conn.close().await?)
    }
}

impl Store {
    /// Takes the database for this process alone (`migrate`; PostgreSQL, `None` for SQLite,
    /// whose file lock the caller takes), or says who holds it.
    pub async fn exclusive(&self) -> Result<Option<Held>> {
        self.advisory("pg_try_advisory_lock").await
    }

    /// Takes the database for serving, beside other instances but not beside a `migrate`
    /// (PostgreSQL; `None` for SQLite).
    pub async fn serving(&self) -> Result<Option<Held>> {
        self.advisory("pg_try_advisory_lock_shared").await
    }

    async fn advisory(&self, function: &str) -> Result<Option<Held>> {
        if self.backend != Backend::Postgres {
            return Ok(None);
        }
        let mut conn = self.pool.acquire().await?.detach();
        let taken: bool = sqlx::query(&format!("SELECT {function}($1) AS taken"))
            .bind(KEY)
            .fetch_one(&mut conn)
            .await?
            .try_get("taken")?;
        if taken {
            let session: i64 = sqlx::query("SELECT CAST(pg_backend_pid() AS BIGINT) AS pid")
                .fetch_one(&mut conn)
                .await?
                .try_get("pid")?;
            return Ok(Some(Held { conn, session }));
        }
        let holder = sqlx::query(
            "SELECT CAST(a.pid AS BIGINT) AS pid, COALESCE(CAST(a.client_addr AS TEXT), 'a local socket') AS addr
             FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
             WHERE l.locktype = 'advisory' AND l.granted AND CAST(l.objid AS BIGINT) = $1 % 4294967296 LIMIT 1",
        )
        .bind(KEY)
        .fetch_optional(&mut conn)
        .await?
        .map(|r| -> Result<String> {
            let pid: i64 = r.try_get("pid")?;
            let addr: String = r.try_get("addr")?;
            Ok(format!("PostgreSQL backend {pid}, connected from {addr}"))
        })
        .transpose()?;
        Err(Error::Taken(holder.unwrap_or_else(|| "unknown".to_owned())))
    }
}
