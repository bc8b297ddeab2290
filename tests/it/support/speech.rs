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

/// The question the tests speak (espeak-ng), and whether a transcript holds it. What a
/// speech model hears of synthetic speech differs from one CPU's kernels to another's
/// (Whisper base heard espeak-ng's answers as other words on an AVX-512 machine), so a
/// transcript is judged by the question's key words, never as an exact sentence.
pub const QUESTION: &str = "What is the weather in Lisbon right now?";

pub fn holds_the_question(transcript: &str) -> bool {
    let t = transcript.to_lowercase();
    t.contains("weather") && t.contains("lisbon")
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
/// which the test may change: 503 for an outage, 401/403/404 for a misconfiguration; or,
/// for a path given an answer of its own ([`Refusing::answer`]), that answer. It keeps the
/// requests it was sent.
pub struct Refusing {
    /// Its OpenAI-style base URL (`http://127.0.0.1:PORT/v1`).
    pub base_url: String,
    state: std::sync::Arc<std::sync::Mutex<Answers>>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct Answers {
    status: u16,
    /// By path: status, content type, body.
    own: Vec<(String, u16, String, Vec<u8>)>,
    requests: Vec<Vec<u8>>,
}

impl Refusing {
    pub async fn start(status: u16) -> Self {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base_url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        let state = std::sync::Arc::new(std::sync::Mutex::new(Answers { status, ..Default::default() }));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let state = shared.clone();
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
                    let path = String::from_utf8_lossy(&request).split(' ').nth(1).unwrap_or_default().to_owned();
                    let (status, kind, body) = {
                        let mut state = state.lock().expect("state");
                        state.requests.push(request);
                        match state.own.iter().find(|(p, ..)| *p == path) {
                            Some((_, status, kind, body)) => (*status, kind.clone(), body.clone()),
                            None => (
                                state.status,
                                "application/json".to_owned(),
                                br#"{"error":{"message":"refused by the test"}}"#.to_vec(),
                            ),
                        }
                    };
                    let head = format!(
                        "HTTP/1.1 {status} Answer\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = socket.write_all(head.as_bytes()).await;
                    let _ = socket.write_all(&body).await;
                });
            }
        });
        Self { base_url, state, task }
    }

    /// Answers `status` from now on (where a path has no answer of its own).
    pub fn set(&self, status: u16) {
        self.state.lock().expect("state").status = status;
    }

    /// Answers requests to `path` (e.g. `/v1/audio/speech`) with `status`, `kind` and `body`.
    pub fn answer(&self, path: &str, status: u16, kind: &str, body: Vec<u8>) {
        self.state.lock().expect("state").own.push((path.to_owned(), status, kind.to_owned(), body));
    }

    /// How many requests it was sent.
    pub fn asked(&self) -> usize {
        self.state.lock().expect("state").requests.len()
    }

    /// The requests it was sent, whole (head and body).
    pub fn requests(&self) -> Vec<Vec<u8>> {
        self.state.lock().expect("state").requests.clone()
    }
}

impl Drop for Refusing {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The texts the speech server was asked to speak, from its log at `log`.
pub fn spoken_inputs(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["path"] == "/v1/audio/speech")
        .filter_map(|e| e["input"].as_str().map(str::to_owned))
        .collect()
}

/// How many requests to `path` (e.g. `/v1/audio/transcriptions`) the speech server's
/// log at `log` holds.
pub fn requests_to(log: &Path, path: &str) -> usize {
    std::fs::read_to_string(log).unwrap_or_default().lines().filter(|l| l.contains(&format!("\"{path}\""))).count()
}

/// An Ogg Opus stream of `seconds` of silence (120 ms packets of six empty 20 ms frames,
/// which any decoder plays as silence), whose pages' granule positions all claim that it
/// ends at `claimed_ms`: a lying clip, as a hostile member's client would make it. Its
/// pages' checksums are right, so a decoder takes it.
pub fn silence_claiming(seconds: u32, claimed_ms: u64) -> Vec<u8> {
    let mut head = b"OpusHead\x01\x01".to_vec();
    head.extend_from_slice(&312u16.to_le_bytes());
    head.extend_from_slice(&48_000u32.to_le_bytes());
    head.extend_from_slice(&[0, 0, 0]);
    let mut tags = b"OpusTags".to_vec();
    tags.extend_from_slice(&4u32.to_le_bytes());
    tags.extend_from_slice(b"test");
    tags.extend_from_slice(&0u32.to_le_bytes());
    let granule = claimed_ms * 48 + 312;
    let packets = vec![[(19 << 3) | 3, 6]; seconds as usize * 1000 / 120];
    let mut pages: Vec<(u8, u64, Vec<Vec<u8>>)> = vec![(2, 0, vec![head]), (0, 0, vec![tags])];
    for chunk in packets.chunks(255) {
        pages.push((0, granule, chunk.iter().map(|p| p.to_vec()).collect()));
    }
    let last = pages.len() - 1;
    pages[last].0 |= 4;
    let mut out = Vec::new();
    for (sequence, (flags, granule, packets)) in pages.into_iter().enumerate() {
        let mut page = b"OggS\0".to_vec();
        page.push(flags);
        page.extend_from_slice(&granule.to_le_bytes());
        page.extend_from_slice(&0x5eed_u32.to_le_bytes());
        page.extend_from_slice(&(sequence as u32).to_le_bytes());
        page.extend_from_slice(&[0; 4]);
        page.push(packets.len() as u8);
        page.extend(packets.iter().map(|p| p.len() as u8));
        for p in &packets {
            page.extend_from_slice(p);
        }
        let crc = ogg_crc(&page);
        page[22..26].copy_from_slice(&crc.to_le_bytes());
        out.extend(page);
    }
    out
}

/// Ogg's page checksum: CRC-32, polynomial 0x04c11db7, not reflected, from 0.
fn ogg_crc(bytes: &[u8]) -> u32 {
    let mut crc = 0u32;
    for &b in bytes {
        crc ^= u32::from(b) << 24;
        for _ in 0..8 {
            crc = if crc & 0x8000_0000 != 0 { (crc << 1) ^ 0x04c1_1db7 } else { crc << 1 };
        }
    }
    crc
}
