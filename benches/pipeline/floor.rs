//! The machine's floor for a durable acknowledgement, measured beside the loads: what one
//! `fdatasync` of a small append costs on the disk richbot's database is on, and what one
//! SQLite commit (WAL, `synchronous = FULL`) of one row and of 100 event-sized rows costs
//! there, with ids as random as real event ids (`load::event_id`). No durable appservice answers a transaction faster than one such commit, so the
//! ingest figures are read as a ratio to these (disks differ far more than CPUs do).

use std::io::Write;
use std::time::{Duration, Instant};

use sqlx::{ConnectOptions, Connection};

use crate::load::{ms, pct};

/// How many of each are timed.
const ROUNDS: usize = 300;

/// Medians and p99s of the floor, in ms, and the CPU the commits cost per event.
pub struct Floor {
    pub fsync: (f64, f64),
    pub commit1: (f64, f64),
    pub commit100: (f64, f64),
    /// The process's CPU time per row of the 100-row commits (SQLite's own work), µs.
    pub cpu_per_row_us: f64,
}

/// Measures the floor in a new temporary directory (where richbot's own database goes).
pub async fn measure() -> Floor {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut fsync = fdatasync(&dir.path().join("append"));
    let mut db = open_full(&dir.path().join("floor.db")).await;
    sqlx::query("CREATE TABLE t (id TEXT PRIMARY KEY, room TEXT, body TEXT)").execute(&mut db).await.expect("table");
    let body = "x".repeat(300);
    let mut one = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let start = Instant::now();
        sqlx::query("INSERT INTO t VALUES ($1, $2, $3)")
            .bind(crate::load::event_id())
            .bind("!r:localhost")
            .bind(&body)
            .execute(&mut db)
            .await
            .expect("insert");
        one.push(start.elapsed());
    }
    let values = (0..100).map(|i| format!("(${}, $101, $102)", i + 1)).collect::<Vec<_>>().join(", ");
    let sql = format!("INSERT INTO t VALUES {values}");
    let mut hundred = Vec::with_capacity(ROUNDS);
    let cpu0 = cpu();
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let mut tx = db.begin().await.expect("begin");
        let ids = (0..100).fold(sqlx::query(&sql), |q, _| q.bind(crate::load::event_id()));
        ids.bind("!r:localhost").bind(&body).execute(&mut *tx).await.expect("insert");
        tx.commit().await.expect("commit");
        hundred.push(start.elapsed());
    }
    let cpu_per_row_us = (cpu() - cpu0).as_secs_f64() * 1e6 / (ROUNDS * 100) as f64;
    let both = |v: &mut Vec<Duration>| (ms(pct(v, 50.0)), ms(pct(v, 99.0)));
    Floor { fsync: both(&mut fsync), commit1: both(&mut one), commit100: both(&mut hundred), cpu_per_row_us }
}

/// A new SQLite database at `path`: WAL, `synchronous = FULL`, SQLite's own checkpoints.
pub async fn open_full(path: &std::path::Path) -> sqlx::SqliteConnection {
    let url = format!("sqlite://{}", path.display());
    let options = url
        .parse::<sqlx::sqlite::SqliteConnectOptions>()
        .expect("url")
        .create_if_missing(true)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
        .synchronous(sqlx::sqlite::SqliteSynchronous::Full)
        .disable_statement_logging();
    options.connect().await.expect("open")
}

/// Times an append of 4 KiB and its `fdatasync`, [`ROUNDS`] times.
fn fdatasync(path: &std::path::Path) -> Vec<Duration> {
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path).expect("open");
    let block = vec![7u8; 4096];
    (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            file.write_all(&block).expect("write");
            file.sync_data().expect("fdatasync");
            start.elapsed()
        })
        .collect()
}

/// This process's CPU time so far.
fn cpu() -> Duration {
    crate::server::cpu_of(std::process::id())
}

impl Floor {
    /// The floor as a table.
    pub fn table(&self) -> String {
        let row = |name: &str, (p50, p99): (f64, f64)| format!("| {name} | {p50:.2} | {p99:.2} |\n");
        format!(
            "| machine floor ({ROUNDS} each) | p50 ms | p99 ms |\n|---|---|---|\n{}{}{}\nSQLite's own CPU for the 100-row commits: {:.1} µs per row\n",
            row("append 4 KiB + fdatasync", self.fsync),
            row("SQLite commit of 1 row (WAL, synchronous = FULL)", self.commit1),
            row("SQLite commit of 100 event-sized rows (WAL, synchronous = FULL)", self.commit100),
            self.cpu_per_row_us,
        )
    }
}
