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
    db: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

impl Server {
    /// Starts richbot with the default settings but for the endpoints (and, with `normal`,
    /// `database.synchronous = "normal"`), and waits for it.
    pub async fn start(hs_url: &str, llm_url: &str, normal: bool) -> Self {
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
        let db = dir.path().join("richbot.db");
        let config = dir.path().join("richbot.toml");
        std::fs::write(
            &config,
            format!(
                "[homeserver]\nurl = \"{hs_url}\"\nserver_name = \"localhost\"\n[appservice]\nregistration = \"{}\"\n\
                 listen = \"127.0.0.1:{port}\"\n[database]\nurl = \"sqlite://{}\"\nsynchronous = \"{}\"\n[llm]\nbase_url = \"{llm_url}\"\n\
                 model = \"bench\"\napi_key = \"bench-key\"\n[[personas]]\nlocalpart = \"richbot\"\n\
                 display_name = \"Richbot\"\nsystem_prompt = \"bench\"\n[limits]\ntokens_per_day = 0\n\
                 tokens_per_room_per_day = 0\ntokens_per_user_per_day = 0\n[logging]\nfilter = \"error\"\n",
                registration.display(),
                db.display(),
                if normal { "normal" } else { "full" },
            ),
        )
        .expect("config");
        let child = Command::new(env!("CARGO_BIN_EXE_richbot"))
            .args(["serve", "--config"])
            .arg(&config)
            .stdout(Stdio::null())
            .spawn()
            .expect("richbot serve");
        let url = format!("http://127.0.0.1:{port}");
        let server = Self { child, url, db, _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(30);
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
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        // Fields after the command name, which is in parentheses: utime is the 12th, stime the 13th.
        let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
        let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        Duration::from_millis((ticks(11) + ticks(12)) * 10)
    }

    /// Peak and current resident memory, MiB.
    pub fn rss_mib(&self) -> (f64, f64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        let kib = |key: &str| {
            status.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        };
        (kib("VmHWM:").unwrap_or(0.0) / 1024.0, kib("VmRSS:").unwrap_or(0.0) / 1024.0)
    }

    /// Events stored and not yet handled, read from the database file.
    pub async fn pending(&self) -> i64 {
        let url = format!("sqlite://{}?mode=ro", self.db.display());
        let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url).await.expect("open db");
        sqlx::query_scalar("SELECT COUNT(*) FROM events WHERE processed = 0").fetch_one(&mut conn).await.expect("count")
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

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
