//! Tools from MCP (Model Context Protocol) servers, through the official Rust SDK (`rmcp`).
//!
//! Each `[[mcp]]` server gets a supervisor task (`server`) that keeps it connected:
//! a stdio server is a command richbot starts (and starts again, with backoff, when it
//! dies), a streamable-HTTP server is a URL. Its tools are listed at start and on
//! `notifications/tools/list_changed`, and offered to the model as `<server>__<tool>`
//! (`names`). A call has the server's `timeout_secs`; what comes back is text for the model
//! (`content`), or a [`CallError`] that says whose fault it is: the tool's (`isError`, or
//! a JSON-RPC error) or the connection's (down, broken, too slow).
//!
//! Which tools a turn is offered (the persona's `tools`, the server's `users` and
//! `rooms`), and whether a call needs the asker's approval or may run alongside others,
//! is the business of the tool registry (in the tools module), from the config kept here.

mod config;
mod content;
mod listing;
mod names;
mod server;
mod stderr;
mod supervise;

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use rmcp::service::ServiceError;
use serde_json::Value;

pub use config::McpServer;
pub use content::MAX_RESULT;
pub use listing::Bounds;
pub use names::{MAX_NAME, exposed};
pub use server::Listed;

/// What a tool call gave: its text for the model, and its images (`(mimetype, base64)`),
/// which the turn uploads and names in the text.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Output {
    pub text: String,
    pub images: Vec<(String, String)>,
}

/// Why a call gave no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The tool ran and said it failed (`isError`), or the server refused the call.
    #[error("{0}")]
    Failed(String),
    /// The server could not be reached, broke off, or took too long.
    #[error("{0}")]
    Unavailable(String),
}

/// Why a server offers no tools, or not all it lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// It cannot be reached (the reason).
    Down(String),
    /// Some tool names cannot be offered (one line each).
    Refused(Vec<String>),
}

/// The configured servers could not all be offered.
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.join("\n"))]
pub struct StartError(pub Vec<String>);

/// The MCP servers, connected and kept so. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Mcp {
    servers: Arc<Vec<Arc<server::Server>>>,
    tasks: Arc<Vec<tokio::task::AbortHandle>>,
}

impl Mcp {
    /// Connects every server (each within its `timeout_secs`) and lists its tools. A
    /// server that cannot be reached yet is not fatal (it is retried, and offered once it
    /// answers); a tool name that cannot be offered (too long, not valid, or clashing with
    /// `reserved` or another tool) is, with one line per name.
    pub async fn start(configs: &[McpServer], reserved: &[&str]) -> Result<Self, StartError> {
        Self::start_with(configs, reserved, Bounds::default()).await
    }

    /// [`Mcp::start`] within `bounds` (`[limits]`).
    pub async fn start_with(configs: &[McpServer], reserved: &[&str], bounds: Bounds) -> Result<Self, StartError> {
        let mcp = Self::launch(configs, reserved, bounds).await;
        let mut problems = Vec::new();
        for (name, state) in mcp.report() {
            match state {
                Err(Report::Refused(p)) => problems.extend(p),
                Err(Report::Down(why)) => {
                    tracing::warn!(
                        server = name,
                        why,
                        "MCP server not reachable yet; its tools are offered once it answers"
                    )
                }
                Ok(_) => {}
            }
        }
        if !problems.is_empty() {
            mcp.stop();
            return Err(StartError(problems));
        }
        Ok(mcp)
    }

    /// Starts a supervisor per server and waits for each one's first attempt, in order
    /// (so that a clash is always found by the later server's listing).
    pub async fn launch(configs: &[McpServer], reserved: &[&str], bounds: Bounds) -> Self {
        let servers: Vec<Arc<server::Server>> =
            configs.iter().map(|c| Arc::new(server::Server::new(c.clone()))).collect();
        let peers = Arc::new(server::Peers {
            reserved: reserved.iter().map(|s| (*s).to_owned()).collect(),
            servers: servers.clone(),
            bounds,
        });
        let mut tasks = Vec::new();
        for i in 0..servers.len() {
            let (tx, rx) = tokio::sync::oneshot::channel();
            tasks.push(tokio::spawn(supervise::supervise(peers.clone(), i, Some(tx))).abort_handle());
            let _ = rx.await;
        }
        Self { servers: Arc::new(servers), tasks: Arc::new(tasks) }
    }

    /// Each server's tools that are not offered for the bounds, one line each.
    pub fn dropped(&self) -> Vec<(&str, Vec<String>)> {
        self.servers.iter().map(|s| (s.config.name.as_str(), s.dropped())).filter(|(_, d)| !d.is_empty()).collect()
    }

    /// Each server's name, and how many tools it offers or why it offers none / not all.
    pub fn report(&self) -> Vec<(&str, Result<usize, Report>)> {
        self.servers
            .iter()
            .map(|s| {
                let problems = s.problems();
                let state = match s.peer() {
                    Err(why) => Err(Report::Down(why)),
                    Ok(_) if !problems.is_empty() => Err(Report::Refused(problems)),
                    Ok(_) => Ok(s.tools().len()),
                };
                (s.config.name.as_str(), state)
            })
            .collect()
    }

    /// The servers, in config order.
    pub fn servers(&self) -> impl Iterator<Item = (usize, &McpServer, Vec<Listed>)> {
        self.servers.iter().enumerate().map(|(i, s)| (i, &s.config, s.tools()))
    }

    /// Calls `tool` of server `server` (an index from [`Mcp::servers`]).
    pub async fn call(&self, server: usize, tool: &str, arguments: Value) -> Result<Output, CallError> {
        let Some(s) = self.servers.get(server) else {
            return Err(CallError::Unavailable("no such MCP server".to_owned()));
        };
        let name = &s.config.name;
        // The model is told that the server is unavailable; why (which may quote its
        // URL or its error pages) is for the log.
        let (peer, connection) = s.peer().map_err(|why| {
            tracing::warn!(server = %name, why, "a tool call found its MCP server unavailable");
            CallError::Unavailable(format!("MCP server {name} is unavailable right now"))
        })?;
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = match arguments {
            Value::Object(map) => Some(map),
            Value::Null => None,
            _ => return Err(CallError::Failed("the arguments must be a JSON object".to_owned())),
        };
        let timeout = Duration::from_secs(s.config.timeout_secs);
        match tokio::time::timeout(timeout, peer.call_tool(params)).await {
            Err(_) => {
                Err(CallError::Unavailable(format!("MCP server {name} did not answer within {} s", timeout.as_secs())))
            }
            Ok(Ok(result)) => {
                let (text, failed) = content::text_of(&result);
                if failed {
                    Err(CallError::Failed(text))
                } else {
                    Ok(Output { text, images: content::images_of(&result) })
                }
            }
            Ok(Err(ServiceError::McpError(e))) => Err(CallError::Failed(content::cut(&e.message))),
            Ok(Err(e)) => {
                let why = crate::url_mask::urls_in(&format!("MCP server {name}: {e}"));
                if matches!(e, ServiceError::TransportClosed | ServiceError::TransportSend(_)) {
                    s.broken(connection, &why);
                } else {
                    tracing::warn!(server = %name, why, "an MCP tool call failed in transport");
                }
                Err(CallError::Unavailable(format!("MCP server {name} is unavailable: the call broke off")))
            }
        }
    }

    /// Stops the supervisors; dropping their connections ends the servers richbot started.
    pub fn stop(&self) {
        for t in self.tasks.iter() {
            t.abort();
        }
    }
}
