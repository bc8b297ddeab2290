//! The test MCP server (`tests/fixtures/mcp_server.py`, written with the official Python
//! SDK, installed from PyPI into `target/mcp/venv` by `scripts/install-mcp.sh` on first
//! use): its `[[mcp]]` config, its log of what ran, and an HTTP instance stopped by PID on
//! drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use richbot::config::McpServer;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Installs the SDK once per test binary (the script is idempotent and locked).
pub fn install() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let status = Command::new("bash").arg(root().join("scripts/install-mcp.sh")).status().expect("install-mcp.sh");
        assert!(status.success(), "installing the MCP SDK failed");
    });
}

pub fn python() -> PathBuf {
    root().join("target/mcp/venv/bin/python")
}

pub fn script() -> PathBuf {
    root().join("tests/fixtures/mcp_server.py")
}

fn quoted(items: &[String]) -> String {
    items.iter().map(|s| serde_json::to_string(s).expect("json")).collect::<Vec<_>>().join(", ")
}

/// An `[[mcp]]` entry for the stdio server logging to `log`, with `extra` server
/// arguments and `more` TOML lines (approval, concurrent, ...).
pub fn stdio_toml(name: &str, log: &Path, extra: &[&str], more: &str) -> String {
    install();
    let mut args = vec![script().display().to_string(), "--log".to_owned(), log.display().to_string()];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    format!("[[mcp]]\nname = \"{name}\"\ncommand = \"{}\"\nargs = [{}]\n{more}\n", python().display(), quoted(&args))
}

/// The same entries, parsed as richbot reads them.
pub fn configs(toml_text: &str) -> Vec<McpServer> {
    #[derive(serde::Deserialize)]
    struct File {
        mcp: Vec<McpServer>,
    }
    toml::from_str::<File>(toml_text).expect("mcp toml").mcp
}

/// The lines the server logged so far.
pub fn log_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log).unwrap_or_default().lines().map(str::to_owned).collect()
}

/// The server, serving streamable HTTP on a loopback port.
pub struct HttpServer {
    pub url: String,
    child: Child,
}

impl HttpServer {
    pub async fn start(log: &Path) -> Self {
        install();
        let port = super::synapse::free_port();
        let child = Command::new(python())
            .arg(script())
            .args(["--log", &log.display().to_string(), "--http", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the HTTP MCP server");
        let addr = format!("127.0.0.1:{port}");
        super::eventually("the HTTP MCP server listens", Duration::from_secs(20), || async {
            tokio::net::TcpStream::connect(&addr).await.ok().map(drop)
        })
        .await;
        Self { url: format!("http://{addr}/mcp"), child }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
