//! The real `richbot serve` (the binary cargo built for this benchmark) in a temporary
//! directory, with a registration and a config pointing at the stand-ins, and what
//! `/proc` says of its CPU time and memory.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const HS_TOKEN: &str = "bench_hs_token_0123456789abcdef";

/// A running `richbot serve`.
pub struct Server {
    child: Child,
    pub url: String,
    /// The database's URL (SQLite or PostgreSQL).
    db: String,
    _dir: tempfile::TempDir,
}

/// The `richbot` to run: the one cargo built for this benchmark, or the one `BENCH_RICHBOT`
/// names (another build, to compare two side by side in one run on a noisy machine).
pub fn binary() -> std::path::PathBuf {
    std::env::var_os("BENCH_RICHBOT").map_or_else(|| env!("CARGO_BIN_EXE_richbot").into(), Into::into)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

impl Server {
    /// Starts richbot with the default settings but for the endpoints (and, with `normal`,
    /// `database.synchronous = "normal"`; with `postgres`, a new database on that server,
    /// `postgres://user@host:port`), and waits for it.
    pub async fn start(hs_url: &str, llm_url: &str, normal: bool, postgres: Option<&str>) -> Self {
        Self::launch(hs_url, llm_url, (normal, postgres), None).await
    }

    /// Like [`Server::start`] (SQLite, `synchronous = "full"`), logging what `rust_log`
    /// selects (`RUST_LOG`) to the file `log`.
    pub async fn start_logged(hs_url: &str, llm_url: &str, log: &std::path::Path, rust_log: &str) -> Self {
        Self::launch(hs_url, llm_url, (false, None), Some((log, rust_log))).await
    }

    /// Like [`Server::start`] (SQLite, `synchronous = "full"`), on `port` with the
    /// registration a real homeserver was given (`registration`); `encryption` false:
    /// `[encryption] enabled = false`.
    pub async fn start_registered(
        hs_url: &str,
        llm_url: &str,
        (registration, port): (&std::path::Path, u16),
        encryption: bool,
    ) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let extra = if encryption { "" } else { "[encryption]\nenabled = false\n" };
        Self::launch_in(dir, (hs_url, llm_url), (registration.to_owned(), port), (false, None), None, extra).await
    }

    async fn launch(
        hs_url: &str,
        llm_url: &str,
        (normal, postgres): (bool, Option<&str>),
        log: Option<(&std::path::Path, &str)>,
    ) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let registration = dir.path().join("registration.yaml");
        std::fs::write(
            &registration,
            format!(
                "id: richbot\nurl: http://127.0.0.1:{port}\nas_token: bench_as_token_0123456789abcdef\n\
                 hs_token: {HS_TOKEN}\nsender_localpart: richbot\nrate_limited: false\nnamespaces:\n  users:\n    \
                 - exclusive: true\n      regex: '@richbot_.*:localhost'\n  aliases: []\n  rooms: []\n"
            ),
        )
        .expect("registration");
        Self::launch_in(dir, (hs_url, llm_url), (registration, port), (normal, postgres), log, "").await
    }

    async fn launch_in(
        dir: tempfile::TempDir,
        (hs_url, llm_url): (&str, &str),
        (registration, port): (std::path::PathBuf, u16),
        (normal, postgres): (bool, Option<&str>),
        log: Option<(&std::path::Path, &str)>,
        extra_toml: &str,
    ) -> Self {
        let db = match postgres {
            Some(server) => new_database(server).await,
            None => format!("sqlite://{}", dir.path().join("richbot.db").display()),
        };
        let config = dir.path().join("richbot.toml");
        std::fs::write(
            &config,
            format!(
                "[homeserver]\nurl = \"{hs_url}\"\nserver_name = \"localhost\"\n[appservice]\nregistration = \"{}\"\n\
                 listen = \"127.0.0.1:{port}\"\n[database]\nurl = \"{}\"\nsynchronous = \"{}\"\n[llm]\nbase_url = \"{llm_url}\"\n\
                 model = \"bench\"\napi_key = \"bench-key\"\n[[personas]]\nlocalpart = \"richbot\"\n\
                 display_name = \"Richbot\"\nsystem_prompt = \"bench\"\n[limits]\ntokens_per_day = 0\n\
                 tokens_per_room_per_day = 0\ntokens_per_user_per_day = 0\n[logging]\nfilter = \"error\"\n{extra_toml}",
                registration.display(),
                db,
                if normal { "normal" } else { "full" },
            ),
        )
        .expect("config");
        let mut command = Command::new(binary());
        command.args(["serve", "--config"]).arg(&config).stdout(Stdio::null());
        if let Some((file, filter)) = log {
            command.env("RUST_LOG", filter).stderr(std::fs::File::create(file).expect("log file"));
        }
        let child = command.spawn().expect("richbot serve");
        let url = format!("http://127.0.0.1:{port}");
        let server = Self { child, url, db, _dir: dir };
        // Generous: against a real Synapse, start-up makes the personas' devices and keys.
        let deadline = Instant::now() + Duration::from_secs(120);
        let http = reqwest::Client::new();
        while http.get(format!("{}/health", server.url)).send().await.map(|r| r.status().is_success()).ok()
            != Some(true)
        {
            assert!(Instant::now() < deadline, "richbot did not start");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        server
    }

    /// CPU time (user + system) used so far.
    pub fn cpu(&self) -> Duration {
        cpu_of(self.child.id())
    }

    /// Peak and current resident memory, MiB.
    pub fn rss_mib(&self) -> (f64, f64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        let kib = |key: &str| {
            status.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        };
        (kib("VmHWM:").unwrap_or(0.0) / 1024.0, kib("VmRSS:").unwrap_or(0.0) / 1024.0)
    }

    /// Events stored and not yet handled, read from the database.
    pub async fn pending(&self) -> i64 {
        let count = "SELECT CAST(COUNT(*) AS BIGINT) FROM events WHERE processed = 0";
        if self.db.starts_with("postgres://") {
            let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&self.db).await.expect("open db");
            return sqlx::query_scalar(count).fetch_one(&mut conn).await.expect("count");
        }
        let url = format!("{}?mode=ro", self.db);
        let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url).await.expect("open db");
        sqlx::query_scalar(count).fetch_one(&mut conn).await.expect("count")
    }

    /// Waits until every stored event is handled; returns how long that took.
    pub async fn drained(&self, limit: Duration) -> Option<Duration> {
        let start = Instant::now();
        while self.pending().await > 0 {
            if start.elapsed() > limit {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Some(start.elapsed())
    }
}

/// CPU time (user + system) process `pid` used so far, from `/proc` (10 ms ticks).
pub fn cpu_of(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses: utime is the 12th, stime the 13th.
    let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// A new, empty database on the PostgreSQL `server`; its URL.
async fn new_database(server: &str) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let name = format!("bench_{}_{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
    let mut admin =
        <sqlx::PgConnection as sqlx::Connection>::connect(&format!("{server}/postgres")).await.expect("PostgreSQL");
    sqlx::query(&format!("CREATE DATABASE {name}")).execute(&mut admin).await.expect("create database");
    format!("{server}/{name}")
}

/// Starts the project's throwaway PostgreSQL (`scripts/start-postgres.sh`, fsync on, as a
/// deployment would have it) for the rest of this process; its `postgres://` server URL.
pub fn start_postgres() -> String {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/start-postgres.sh");
    let out = Command::new("bash")
        .arg(script)
        .arg(std::process::id().to_string())
        .env("RICHBOT_PG_FSYNC", "on")
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/start-postgres.sh");
    assert!(out.status.success(), "scripts/start-postgres.sh failed");
    format!("postgres://postgres@127.0.0.1:{}", String::from_utf8_lossy(&out.stdout).trim())
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
