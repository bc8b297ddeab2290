//! Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, pinned by its hash in `scripts/install-qwen.sh`,
//! installed into `target/qwen`) on the test suite's `llama-server`, with the model's own
//! chat template: the instruction-tuned model an admin would try first on a small CPU.
//! Its lane (`ai_qwen`) and the answers benchmark (`tests/bench_answers`) start it.

use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::support::llama::{LlamaServer, root};
use crate::support::synapse::free_port;

/// The name the server answers to (`--alias`).
pub const QWEN: &str = "qwen2.5-coder-1.5b-instruct";

/// How the model samples: Qwen's recommended settings (what an admin would run), or
/// nearly greedy with a fixed seed (to repeat a run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    #[allow(dead_code, reason = "the benchmark's (`tests/bench_answers`); the lane repeats its runs")]
    Recommended,
    Steady,
}

/// Installs the server and Qwen once (the script is idempotent and locked).
fn install() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let status =
            Command::new("bash").arg(root().join("scripts/install-qwen.sh")).status().expect("install-qwen.sh");
        assert!(status.success(), "installing llama-server and Qwen failed");
    });
}

/// llama-server with Qwen and its own chat template (`--jinja`), a context of 16k, one
/// slot, on `threads` threads: two for the benchmark (the machine to itself), one for the
/// test lane (beside the rest of the suite, where two threads that wait on each other
/// slowed a cold prompt past five minutes).
pub async fn start(sampling: Sampling, seed: u64, threads: u32) -> LlamaServer {
    tokio::task::spawn_blocking(install).await.expect("install");
    let dir = root().join("target/llama");
    let port = free_port();
    let log = dir.join(format!("server-{}-{port}.log", std::process::id()));
    let out = std::fs::File::create(&log).expect("log file");
    let sampling: &[&str] = match sampling {
        Sampling::Recommended => &["--temp", "0.7", "--top-p", "0.8", "--top-k", "20", "--repeat-penalty", "1.05"],
        Sampling::Steady => &["--temp", "0.1", "--top-k", "1"],
    };
    let child = Command::new(dir.join("venv/bin/llama-server-vulkan"))
        .args(["-m", root().join("target/qwen/qwen.gguf").to_str().expect("utf8")])
        .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--jinja"])
        .args(["-t", &threads.to_string(), "-c", "16384", "-np", "1", "--seed", &seed.to_string(), "--alias", QWEN])
        .args(sampling)
        .args(std::env::var_os("LLAMA_VERBOSE").map(|_| "-v"))
        .args(std::env::var("LLAMA_ARGS").unwrap_or_default().split_whitespace())
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log"))
        .stderr(out)
        .spawn()
        .expect("start llama-server");
    LlamaServer::answering(child, port, log).await
}
