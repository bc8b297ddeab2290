//! Real speech for the tests (`scripts/install-speech.sh`, once per machine, cached):
//! espeak-ng speaks a text into Ogg Opus as Element records voice messages, and the speech
//! server (`tests/fixtures/speech_server.py`) answers OpenAI's audio API with
//! faster-whisper (Whisper base) and espeak-ng. Stopped by PID on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};

use super::User;

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

/// An Element-style voice message's content: Ogg Opus of `size` bytes that says it lasts
/// `ms`, at `url` in a clear room (without one, what an E2EE client adds to the encrypted
/// message it makes).
pub fn voice_content(url: Option<&str>, size: usize, ms: u64) -> Value {
    let mut content = json!({
        "info": {"mimetype": "audio/ogg", "size": size, "duration": ms},
        "org.matrix.msc3245.voice": {}, "org.matrix.msc1767.audio": {"duration": ms},
    });
    if let Some(url) = url {
        content["msgtype"] = "m.audio".into();
        content["body"] = "Voice message.ogg".into();
        content["url"] = url.into();
    }
    content
}

/// `audio` uploaded by `user` and sent to `room` as a voice message that says it lasts
/// `ms`; its event id.
pub async fn send_voice(user: &User, room: &str, audio: Vec<u8>, ms: u64) -> String {
    let size = audio.len();
    let url = user.upload(audio, "audio/ogg", "Voice message.ogg").await;
    user.send(room, "m.room.message", voice_content(Some(&url), size, ms)).await
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

/// An audio endpoint that answers every request with one status (no body worth reading),
/// which the test may change: 503 for an outage, 401/403/404 for a misconfiguration.
pub struct Refusing {
    /// Its OpenAI-style base URL (`http://127.0.0.1:PORT/v1`).
    pub base_url: String,
    status: std::sync::Arc<std::sync::atomic::AtomicU16>,
    asked: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Refusing {
    pub async fn start(status: u16) -> Self {
        use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base_url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        let status = std::sync::Arc::new(AtomicU16::new(status));
        let asked = std::sync::Arc::new(AtomicUsize::new(0));
        let (answer, count) = (status.clone(), asked.clone());
        let task = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let (answer, count) = (answer.clone(), count.clone());
                tokio::spawn(async move {
                    // The whole request (headers, then Content-Length bytes), then the answer.
                    let mut request = Vec::new();
                    let mut buf = [0u8; 8192];
                    loop {
                        let Ok(n) = socket.read(&mut buf).await else { return };
                        if n == 0 {
                            return;
                        }
                        request.extend_from_slice(&buf[..n]);
                        let text = String::from_utf8_lossy(&request).to_lowercase();
                        let Some(end) = text.find("\r\n\r\n") else { continue };
                        let length = text
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
                            .unwrap_or(0usize);
                        if request.len() >= end + 4 + length {
                            break;
                        }
                    }
                    count.fetch_add(1, Ordering::SeqCst);
                    let status = answer.load(Ordering::SeqCst);
                    let body = r#"{"error":{"message":"refused by the test"}}"#;
                    let head = format!(
                        "HTTP/1.1 {status} Refused\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = socket.write_all(head.as_bytes()).await;
                });
            }
        });
        Self { base_url, status, asked, task }
    }

    /// Answers `status` from now on.
    pub fn set(&self, status: u16) {
        self.status.store(status, std::sync::atomic::Ordering::SeqCst);
    }

    /// How many requests it was sent.
    pub fn asked(&self) -> usize {
        self.asked.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for Refusing {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How many requests to `path` (e.g. `/v1/audio/transcriptions`) the speech server's
/// log at `log` holds.
pub fn requests_to(log: &Path, path: &str) -> usize {
    std::fs::read_to_string(log).unwrap_or_default().lines().filter(|l| l.contains(&format!("\"{path}\""))).count()
}
