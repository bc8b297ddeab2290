//! `richbot migrate --from URL --to URL`: moves a deployment's whole state (turns, sent
//! messages and their edit slots, budgets, the outbox, rooms, approvals, the instance id)
//! to another database, e.g. from SQLite to PostgreSQL. The admin stops richbot, migrates,
//! and starts it on the new URL; both databases are held for the copy like `serve` holds
//! its one, so a richbot still running on either makes this refuse. The rows of every table
//! are counted on both sides afterwards, and any difference is an error.

use crate::private_files;
use crate::store::{self, Store};

/// Why a migration failed. Only a count mismatch comes after the target was written to.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("--from and --to are the same database")]
    Same,
    #[error("{0} does not exist; --from must be an existing richbot database")]
    NoSource(String),
    #[error("{0}")]
    Locked(#[from] private_files::LockError),
    #[error("{url}: {source}")]
    Store { url: String, source: store::Error },
    #[error(
        "{table}: {from} rows in the source but {to} in the target after the copy; do not start richbot on the target"
    )]
    Count { table: String, from: i64, to: i64 },
}

/// The rows of one table, counted on both sides after the copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copied {
    pub table: String,
    pub rows: i64,
}

/// Copies everything in `from` into the empty database at `to` (created and migrated if
/// need be); the source is first brought to this version's schema.
pub async fn run(from: &str, to: &str) -> Result<Vec<Copied>, Error> {
    if from == to {
        return Err(Error::Same);
    }
    if let Some(path) = store::file_path(from).filter(|p| !p.exists()) {
        return Err(Error::NoSource(path.display().to_string()));
    }
    let _locks = (store::lock_file(from)?, store::lock_file(to)?);
    let at = |url: &str| {
        let url = store::shown_url(url);
        move |source| Error::Store { url, source }
    };
    let source = Store::open(from).await.map_err(at(from))?;
    let target = Store::open(to).await.map_err(at(to))?;
    let _held = (source.exclusive().await.map_err(at(from))?, target.exclusive().await.map_err(at(to))?);
    source.copy_into(&target).await.map_err(at(to))?;
    let before = source.row_counts().await.map_err(at(from))?;
    let after = target.row_counts().await.map_err(at(to))?;
    let mut copied = Vec::with_capacity(before.len());
    for (table, rows) in before {
        let landed = after.iter().find(|(t, _)| *t == table).map_or(0, |(_, n)| *n);
        if landed != rows {
            return Err(Error::Count { table, from: rows, to: landed });
        }
        copied.push(Copied { table, rows });
    }
    source.close().await;
    target.close().await;
    Ok(copied)
}
