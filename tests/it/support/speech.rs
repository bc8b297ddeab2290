//! Real speech for the tests (`scripts/install-speech.sh`, once per machine, cached):
//! espeak-ng speaks a text into Ogg Opus as Element records voice messages, and the speech
//! server (`tests/fixtures/speech_server.py`) answers OpenAI's audio API with
//! faster-whisper (Whisper base) and espeak-ng. Stopped by PID on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Installs the tools once per test binary (the script is idempotent and locked).
pub fn install() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let status =
            Command::new("bash").arg(root().join("scripts/install-speech.sh")).status().expect("install-speech.sh");
        assert!(status.success(), "installing the speech tools failed");
    });
}

/// `text` spoken by espeak-ng, as Ogg Opus bytes (made in `dir`).
pub fn spoken(text: &str, dir: &Path) -> Vec<u8> {
    install();
    let (wav, ogg) = (dir.join("spoken.wav"), dir.join("spoken.ogg"));
    let status = Command::new("espeak-ng").arg("-w").arg(&wav).arg(text).status().expect("espeak-ng");
    assert!(status.success(), "espeak-ng failed");
    let status = Command::new("opusenc").arg("--quiet").arg(&wav).arg(&ogg).status().expect("opusenc");
    assert!(status.success(), "opusenc failed");
    std::fs::read(&ogg).expect("the Ogg file")
}

/// The speech server, on a loopback port.
pub struct SpeechServer {
    /// Its OpenAI-style base URL (`http://127.0.0.1:PORT/v1`).
    pub base_url: String,
    child: Child,
}

impl SpeechServer {
    pub async fn start(log: &Path) -> Self {
        install();
        let port = super::synapse::free_port();
        let dir = root().join("target/speech");
        let child = Command::new(dir.join("venv/bin/python"))
            .arg(root().join("tests/fixtures/speech_server.py"))
            .args(["--model", &dir.join("whisper-base").display().to_string()])
            .args(["--log", &log.display().to_string(), "--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the speech server");
        let addr = format!("127.0.0.1:{port}");
        // Loading the model takes a second or two, more on a loaded machine.
        super::eventually("the speech server listens", Duration::from_secs(120), || async {
            tokio::net::TcpStream::connect(&addr).await.ok().map(drop)
        })
        .await;
        Self { base_url: format!("http://{addr}/v1"), child }
    }
}

impl Drop for SpeechServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
