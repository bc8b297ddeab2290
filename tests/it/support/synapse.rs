//! A real Synapse for end-to-end tests: installed from PyPI by `scripts/install-synapse.sh`
//! into `target/synapse/venv` (cached), configured in a fresh work folder (on tmpfs when
//! there is one), on a free loopback port, with our appservice registered and what
//! end-to-end encryption needs on (to-device messages, device lists and one-time key
//! counts in transactions; devices made by the appservice). Forked from a process that
//! has imported Synapse already (`synapse_forks`); stopped by PID on drop.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub const SERVER_NAME: &str = "localhost";
pub const AS_ID: &str = "richbot";
pub const SENDER: &str = "richbot";
pub const PREFIX: &str = "rb_";

pub struct Synapse {
    pub url: String,
    pub port: u16,
    pub dir: PathBuf,
    pub as_token: String,
    pub registration: PathBuf,
    /// The running homeserver's PID.
    pid: Option<u32>,
}

#[path = "synapse_forks.rs"]
mod forks;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn venv() -> PathBuf {
    root().join("target/synapse/venv")
}

/// Installs Synapse once per test binary (the script itself is idempotent and locked).
fn install() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let status = Command::new("bash")
            .arg(root().join("scripts/install-synapse.sh"))
            .arg(venv())
            .status()
            .expect("running install-synapse.sh");
        assert!(status.success(), "installing Synapse failed");
    });
}

/// The server's signing key, made once per test process (a Python process each time cost
/// about 0.4 s of CPU per Synapse): the test servers never federate, so they may share it.
fn signing_key() -> &'static [u8] {
    static KEY: OnceLock<Vec<u8>> = OnceLock::new();
    KEY.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("signing.key");
        let status = Command::new(venv().join("bin/generate_signing_key"))
            .arg("-o")
            .arg(&path)
            .status()
            .expect("generate_signing_key");
        assert!(status.success(), "generate_signing_key failed");
        std::fs::read(&path).expect("signing.key")
    })
}

/// A loopback port that is free now and that no other caller in this process was given,
/// chosen below the kernel's ephemeral range. A port from `bind(0)` is only free until
/// something else binds port 0 or opens a connection and the kernel hands the same number
/// out again: a CI run once had `richbot check` ping a scripted LLM that had been given the
/// number its deployment was to listen on. Ports below the range are never handed out so,
/// and the counter keeps two tests of one run apart; the start depends on the process id,
/// to keep two runs on one machine apart too.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    let high = ephemeral.clamp(2048, 32768);
    let (low, span) = (high / 3, high - high / 3);
    let start = std::process::id().wrapping_mul(2_654_435_761) % span;
    for _ in 0..span {
        let port = (low + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {low}..{high}");
}

/// A listener on a port from [`free_port`], for a server the test may stop and start
/// again on the same address.
pub async fn listener() -> tokio::net::TcpListener {
    loop {
        if let Ok(l) = tokio::net::TcpListener::bind(("127.0.0.1", free_port())).await {
            return l;
        }
    }
}

/// A token richbot's validation accepts (a random one can hold placeholder text such as
/// "xxx", which it refuses: that failed a CI run once).
fn token() -> String {
    richbot::registration_file::token()
}

impl Synapse {
    /// Starts a fresh Synapse whose appservice lives at `as_url`.
    pub fn start(as_url: &str) -> Self {
        Self::start_with(as_url, true)
    }

    /// A Synapse as it comes: it neither sends to-device messages nor key counts to
    /// appservices (what encryption needs is off).
    pub fn start_without_encryption(as_url: &str) -> Self {
        Self::start_with(as_url, false)
    }

    fn start_with(as_url: &str, encryption: bool) -> Self {
        install();
        let base = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let dir = base.join(format!("richbot-synapse-{}-{}", std::process::id(), token()[..8].to_lowercase()));
        std::fs::create_dir_all(&dir).expect("work dir");
        let port = free_port();
        let (as_token, hs_token) = (token(), token());
        let registration = dir.join("registration.yaml");
        std::fs::write(
            &registration,
            format!(
                "id: {AS_ID}\nurl: \"{as_url}\"\nas_token: \"{as_token}\"\nhs_token: \"{hs_token}\"\nsender_localpart: {SENDER}\n\
                 rate_limited: false\nreceive_ephemeral: true\n\
                 de.sorunome.msc2409.push_ephemeral: true\norg.matrix.msc3202: true\nio.element.msc4190: true\nnamespaces:\n  users:\n    - exclusive: true\n      regex: '@{PREFIX}.*:{SERVER_NAME}'\n  aliases: []\n  rooms: []\n"
            ),
        )
        .expect("registration");
        let d = dir.display();
        let limits = ["rc_message", "rc_registration", "rc_joins_per_room", "rc_room_creation", "rc_profile"]
            .iter()
            .map(|k| format!("{k}: {{per_second: 10000, burst_count: 10000}}\n"))
            .collect::<String>();
        let config = format!(
            "server_name: \"{SERVER_NAME}\"\nreport_stats: false\npid_file: \"{d}/homeserver.pid\"\n\
             listeners:\n  - port: {port}\n    bind_addresses: [\"127.0.0.1\"]\n    type: http\n    tls: false\n    x_forwarded: false\n    resources:\n      - names: [client]\n        compress: false\n\
             database:\n  name: sqlite3\n  args:\n    database: \"{d}/homeserver.db\"\n\
             log_config: \"{d}/log.config\"\nmedia_store_path: \"{d}/media\"\nsigning_key_path: \"{d}/signing.key\"\n\
             registration_shared_secret: \"{}\"\nmacaroon_secret_key: \"{}\"\nform_secret: \"{}\"\n\
             trusted_key_servers: []\nsuppress_key_server_warning: true\nfederation_domain_whitelist: []\n\
             enable_registration: true\nenable_registration_without_verification: true\n\
             presence:\n  enabled: false\nurl_preview_enabled: false\nenable_metrics: false\n\
             bcrypt_rounds: 4\nuser_directory:\n  enabled: false\nstats:\n  enabled: false\n\
             app_service_config_files: [\"{}\"]\n{limits}\
             experimental_features:\n  msc3202_transaction_extensions: {encryption}\n  msc2409_to_device_messages_enabled: {encryption}\n\
             rc_login:\n  address: {{per_second: 10000, burst_count: 10000}}\n  account: {{per_second: 10000, burst_count: 10000}}\n  failed_attempts: {{per_second: 10000, burst_count: 10000}}\n\
             rc_joins:\n  local: {{per_second: 10000, burst_count: 10000}}\n  remote: {{per_second: 10000, burst_count: 10000}}\n\
             rc_invites:\n  per_room: {{per_second: 10000, burst_count: 10000}}\n  per_user: {{per_second: 10000, burst_count: 10000}}\n  per_issuer: {{per_second: 10000, burst_count: 10000}}\n",
            token(),
            token(),
            token(),
            registration.display(),
        );
        // The screenshots tool's client (nheko 0.11) fetches media only without
        // authentication: `scripts/screenshots.sh` asks for it.
        let legacy = std::env::var_os("RICHBOT_SYNAPSE_LEGACY_MEDIA").is_some();
        let config = if legacy { format!("{config}enable_authenticated_media: false\n") } else { config };
        std::fs::write(dir.join("homeserver.yaml"), config).expect("homeserver.yaml");
        std::fs::write(
            dir.join("log.config"),
            format!(
                "version: 1\nformatters:\n  precise:\n    format: '%(asctime)s - %(name)s - %(levelname)s - %(message)s'\n\
                 handlers:\n  file:\n    class: logging.FileHandler\n    formatter: precise\n    filename: \"{d}/homeserver.log\"\n\
                 root:\n  level: INFO\n  handlers: [file]\ndisable_existing_loggers: false\n"
            ),
        )
        .expect("log.config");
        std::fs::write(dir.join("signing.key"), signing_key()).expect("signing.key");
        let mut s = Self { url: format!("http://127.0.0.1:{port}"), port, dir, as_token, registration, pid: None };
        s.launch();
        s
    }

    /// Starts the Synapse process (again, after `stop`) on the same database and port.
    pub fn launch(&mut self) {
        let script = root().join("scripts/synapse-forks.py");
        let out = self.dir.join("synapse.out");
        let config = self.dir.join("homeserver.yaml");
        let pid = forks::start(&venv().join("bin/python"), &script, &config, &self.dir, &out);
        self.pid = Some(pid);
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if versions_ok(self.port) {
                return;
            }
            if !forks::alive(pid) {
                self.pid = None;
                let log = std::fs::read_to_string(&out).unwrap_or_default();
                panic!("Synapse exited during start:\n{log}");
            }
            assert!(Instant::now() < deadline, "Synapse not ready after 90 s; see {}", self.dir.display());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops Synapse (SIGTERM, then SIGKILL) by its PID.
    pub fn stop(&mut self) {
        if let Some(pid) = self.pid.take() {
            forks::stop(pid);
        }
    }

    /// Registers another appservice beside ours, from its registration file, and restarts
    /// Synapse to read it (it reads registrations only at start).
    pub fn add_appservice(&mut self, registration: &Path) {
        let config = self.dir.join("homeserver.yaml");
        let yaml = std::fs::read_to_string(&config).expect("homeserver.yaml");
        let ours = format!("app_service_config_files: [\"{}\"", self.registration.display());
        assert!(yaml.contains(&ours), "our registration in the config");
        let both = format!("{ours}, \"{}\"", registration.display());
        std::fs::write(&config, yaml.replacen(&ours, &both, 1)).expect("homeserver.yaml");
        self.restart();
    }

    /// Stops and starts Synapse on the same database and port.
    pub fn restart(&mut self) {
        self.stop();
        self.launch();
    }
}

/// `GET /_matrix/client/versions` answers 200 (plain HTTP/1.0 over a socket).
fn versions_ok(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream.write_all(b"GET /_matrix/client/versions HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.") && &head[9..12] == b"200"
}

impl Drop for Synapse {
    fn drop(&mut self) {
        self.stop();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
