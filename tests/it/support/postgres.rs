//! A real PostgreSQL for the suite's second run: the `it_postgres` test binary is this
//! suite compiled again, and in it every test that keeps state gets a fresh database on
//! one server per test process (`scripts/start-postgres.sh`: Debian's package, installed
//! when missing, on a loopback port as an unprivileged user, gone when the process ends).
//! Tests of what only SQLite has (its files, WAL, flushes) keep SQLite in both runs.

use std::path::Path;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use sqlx::Connection;

/// Whether this binary is the PostgreSQL run.
pub fn enabled() -> bool {
    env!("CARGO_CRATE_NAME") == "it_postgres"
}

fn port() -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/start-postgres.sh");
        let out = std::process::Command::new("bash")
            .arg(script)
            .arg(std::process::id().to_string())
            .stderr(std::process::Stdio::inherit())
            .output()
            .expect("run scripts/start-postgres.sh");
        assert!(out.status.success(), "scripts/start-postgres.sh failed: {}", out.status);
        String::from_utf8_lossy(&out.stdout).trim().parse().expect("a port from scripts/start-postgres.sh")
    })
}

/// A new, empty database on the suite's server; its URL.
pub async fn fresh_database() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let port = tokio::task::spawn_blocking(port).await.expect("start PostgreSQL");
    let name = format!("rb_{}_{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
    let mut admin = sqlx::PgConnection::connect(&format!("postgres://postgres@127.0.0.1:{port}/postgres"))
        .await
        .expect("connect to the test PostgreSQL");
    sqlx::query(&format!("CREATE DATABASE {name}")).execute(&mut admin).await.expect("create database");
    admin.close().await.expect("close");
    format!("postgres://postgres@127.0.0.1:{port}/{name}")
}

/// The database a test's bot or store uses: a fresh PostgreSQL database in the
/// PostgreSQL run, else the SQLite file `name` in `dir`.
pub async fn database_url(dir: &Path, name: &str) -> String {
    if enabled() { fresh_database().await } else { format!("sqlite://{}", dir.join(name).display()) }
}
