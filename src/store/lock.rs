//! One `serve` per PostgreSQL database, as `files::lock` gives one per SQLite file: a
//! session-level advisory lock held on a connection of its own for the life of the process
//! (PostgreSQL releases it when that connection ends, so a killed process frees it). A
//! second instance on the same database would resume the first's running turns and answer
//! twice; until rooms are leased between instances, it is refused with the holder named.

use sqlx::{AnyConnection, Connection, Row};

use super::{Backend, Error, Result, Store};
use crate::files;

/// Locks the file beside an SQLite database (`None` for PostgreSQL, which
/// [`Store::exclusive`] takes once open); taken before the database is opened.
pub fn lock_file(url: &str) -> Result<Option<files::Lock>, files::LockError> {
    super::file_path(url).map(|db| files::lock(&db.with_extension("lock"))).transpose()
}

/// The advisory lock key: "richbot" in ASCII, so other applications sharing the server
/// are unlikely to pick it.
const KEY: i64 = 0x72_69_63_68_62_6f_74;

/// The held lock; dropping it closes its connection and releases the lock.
#[derive(Debug)]
pub struct Exclusive {
    conn: AnyConnection,
}

impl Exclusive {
    /// Releases the database now (dropping it releases it too, once PostgreSQL sees the
    /// connection end).
    pub async fn release(self) -> Result<()> {
        Ok(self.conn.close().await?)
    }
}

impl Store {
    /// Takes the database for this process (PostgreSQL; `None` for SQLite, whose file lock
    /// the caller takes), or says who holds it.
    pub async fn exclusive(&self) -> Result<Option<Exclusive>> {
        if self.backend != Backend::Postgres {
            return Ok(None);
        }
        let mut conn = self.pool.acquire().await?.detach();
        let taken: bool = sqlx::query("SELECT pg_try_advisory_lock($1) AS taken")
            .bind(KEY)
            .fetch_one(&mut conn)
            .await?
            .try_get("taken")?;
        if taken {
            return Ok(Some(Exclusive { conn }));
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
