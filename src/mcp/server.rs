//! One MCP server's connection, kept up by a supervisor task: connect (start the command,
//! or open the URL), list the tools, re-list them on `notifications/tools/list_changed`,
//! and when the connection ends (the process died, a call found the transport broken),
//! mark the server down and connect again after a backoff (1 s doubling to 60 s).
//!
//! While a server is down its last listed tools stay offered: a call to one fails with a
//! tool error that says the server is down, which the model can tell the person, rather
//! than the tool silently vanishing mid-conversation.

use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, Peer, QuitReason, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;
use tokio::sync::{Notify, mpsc, oneshot};

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
    reconnect: Notify,
    /// ...if it is still this one: connections are numbered, and a call says which one
    /// it found broken (a late report must not end the next connection).
    connection: AtomicU64,
    broken: AtomicU64,
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

/// Calls back on `notifications/tools/list_changed`.
#[derive(Clone)]
struct Handler {
    relist: mpsc::Sender<()>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) -> impl Future<Output = ()> + Send + '_ {
        let _ = self.relist.try_send(());
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("richbot", env!("CARGO_PKG_VERSION")))
    }
}

/// Who else offers tool names: the rich tools, and every server.
pub struct Peers {
    pub reserved: Vec<String>,
    pub servers: Vec<Arc<Server>>,
    pub bounds: super::Bounds,
}

/// Keeps server `i` connected until the task is aborted; `first` hears when the first
/// attempt is over (connected and listed, or failed).
pub async fn supervise(all: Arc<Peers>, i: usize, mut first: Option<oneshot::Sender<()>>) {
    let server = &all.servers[i];
    let name = server.config.name.as_str();
    let mut backoff = Duration::from_secs(1);
    loop {
        let started = Instant::now();
        let (relist, mut relisted) = mpsc::channel(1);
        let why = match connect(&server.config, Handler { relist }).await {
            Ok(service) => {
                let connection = server.connection.fetch_add(1, Ordering::AcqRel) + 1;
                let peer = service.peer().clone();
                super::listing::list(&all, i, &peer, first.is_some()).await;
                if let Some(tx) = first.take() {
                    let _ = tx.send(());
                }
                let waiting = service.waiting();
                tokio::pin!(waiting);
                loop {
                    tokio::select! {
                        quit = &mut waiting => break match quit {
                            Ok(QuitReason::Closed) => "the server closed the connection".to_owned(),
                            Ok(QuitReason::Cancelled) => "the connection was cancelled".to_owned(),
                            Ok(QuitReason::JoinError(e)) | Err(e) => format!("the connection failed: {e}"),
                            Ok(_) => "the connection ended".to_owned(),
                        },
                        Some(()) = relisted.recv() => super::listing::list(&all, i, &peer, false).await,
                        () = server.reconnect.notified() => {
                            if server.broken.load(Ordering::Acquire) == connection {
                                break "a call found the connection broken".to_owned();
                            }
                        }
                    }
                }
            }
            Err(why) => why,
        };
        let why = crate::mask::urls_in(&why);
        server.update(|s| {
            s.peer = None;
            s.down = Some(format!("MCP server {name} is down: {why}"));
        });
        if let Some(tx) = first.take() {
            let _ = tx.send(());
        }
        if started.elapsed() > Duration::from_secs(60) {
            backoff = Duration::from_secs(1);
        }
        tracing::warn!(server = name, why, retry_in_secs = backoff.as_secs(), "MCP server down");
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(60));
    }
}

/// Opens a connection and runs MCP's `initialize`, within the server's timeout.
async fn connect(config: &McpServer, handler: Handler) -> Result<RunningService<RoleClient, Handler>, String> {
    let timeout = Duration::from_secs(config.timeout_secs).max(MIN_CONNECT);
    let connecting = async {
        match (&config.command, &config.url) {
            (Some(command), _) => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(&config.args).env_clear().kill_on_drop(true);
                for key in ["PATH", "HOME", "LANG"] {
                    if let Some(value) = std::env::var_os(key) {
                        cmd.env(key, value);
                    }
                }
                cmd.envs(&config.env);
                let (transport, stderr) = TokioChildProcess::builder(cmd)
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| format!("cannot start {command}: {e}"))?;
                if let Some(stderr) = stderr {
                    tokio::spawn(super::stderr::forward(config.name.clone(), stderr));
                }
                handler.serve(transport).await.map_err(|e| format!("initialize failed: {e}"))
            }
            (None, Some(url)) => {
                let headers = config
                    .headers
                    .iter()
                    .filter_map(|(k, v)| {
                        Some((http::HeaderName::from_bytes(k.as_bytes()).ok()?, http::HeaderValue::from_str(v).ok()?))
                    })
                    .collect();
                let transport = StreamableHttpClientTransport::from_config(
                    StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(headers),
                );
                let shown = crate::mask::url(url);
                handler.serve(transport).await.map_err(|e| format!("initialize failed at {shown}: {e}"))
            }
            (None, None) => Err("neither command nor url is set".to_owned()),
        }
    };
    tokio::time::timeout(timeout, connecting)
        .await
        .map_err(|_| format!("no answer to initialize within {} s", timeout.as_secs()))?
}
