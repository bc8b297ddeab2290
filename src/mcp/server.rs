//! One MCP server and what is known of it now: its connection (kept up by the
//! `supervise` task), its listed tools (`listing`), and why it is down when it is.
//!
//! While a server is down its last listed tools stay offered: a call to one fails with a
//! tool error that says the server is down, which the model can tell the person, rather
//! than the tool silently vanishing mid-conversation.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::service::Peer;
use serde_json::Value;
use tokio::sync::Notify;

use super::McpServer;

/// A tool as the server listed it.
#[derive(Debug, Clone)]
pub struct Listed {
    /// As the server names it.
    pub tool: String,
    pub description: String,
    pub schema: Value,
    /// First listed after start: gated whatever the config says.
    pub late: bool,
}

/// Connecting and listing may take this long at least, whatever the calls' timeout: a
/// server's start is not a call, and on a loaded machine it is slow.
pub(super) const MIN_CONNECT: Duration = Duration::from_secs(30);

/// What is known of a server now.
#[derive(Debug, Default)]
pub(super) struct State {
    pub peer: Option<Peer<RoleClient>>,
    pub tools: Vec<Listed>,
    /// Why the server is down, when it is.
    pub down: Option<String>,
    /// The last listing's problems: refused names, config entries that name no tool.
    pub problems: Vec<String>,
    /// The last listing's tools that are not offered for its bounds (one line each).
    pub dropped: Vec<String>,
    /// The tools the listing at start offered; `None` if the server was down then.
    pub vouched: Option<std::collections::HashSet<String>>,
}

/// One configured server and its live state.
#[derive(Debug)]
pub struct Server {
    pub config: McpServer,
    state: RwLock<State>,
    /// Asks the supervisor to drop the connection and make a new one...
    pub(super) reconnect: Notify,
    /// ...if it is still this one: connections are numbered, and a call says which one
    /// it found broken (a late report must not end the next connection).
    pub(super) connection: AtomicU64,
    pub(super) broken: AtomicU64,
}

impl Server {
    pub fn new(config: McpServer) -> Self {
        Self {
            config,
            state: RwLock::new(State::default()),
            reconnect: Notify::new(),
            connection: AtomicU64::new(0),
            broken: AtomicU64::new(0),
        }
    }

    fn state(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn update(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.state.write().unwrap_or_else(std::sync::PoisonError::into_inner));
    }

    pub fn tools(&self) -> Vec<Listed> {
        self.state().tools.clone()
    }

    pub fn problems(&self) -> Vec<String> {
        self.state().problems.clone()
    }

    pub fn dropped(&self) -> Vec<String> {
        self.state().dropped.clone()
    }

    /// The connection to call through (and its number), or why there is none.
    pub fn peer(&self) -> Result<(Peer<RoleClient>, u64), String> {
        let state = self.state();
        match (&state.peer, &state.down) {
            (Some(peer), None) => Ok((peer.clone(), self.connection.load(Ordering::Acquire))),
            (_, Some(why)) => Err(why.clone()),
            (None, None) => Err("not connected yet".to_owned()),
        }
    }

    /// A call found connection number `connection` broken: make a new one.
    pub fn broken(&self, connection: u64, why: &str) {
        tracing::warn!(server = %self.config.name, why, "MCP connection broken; reconnecting");
        self.broken.store(connection, Ordering::Release);
        self.reconnect.notify_one();
    }
}

/// Who else offers tool names: the rich tools, and every server.
pub struct Peers {
    pub reserved: Vec<String>,
    pub servers: Vec<Arc<Server>>,
    pub bounds: super::Bounds,
}
