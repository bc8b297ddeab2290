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
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;
use tokio::sync::{Notify, mpsc, oneshot};

use super::{McpServer, names};

/// A tool as the server listed it.
#[derive(Debug, Clone)]
pub struct Listed {
    /// As the server names it.
    pub tool: String,
    pub description: String,
    pub schema: Value,
}

/// What is known of a server now.
#[derive(Debug, Default)]
struct State {
    peer: Option<Peer<RoleClient>>,
    tools: Vec<Listed>,
    /// Why the server is down, when it is.
    down: Option<String>,
    /// The last listing's refused names (see `names`).
    problems: Vec<String>,
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

    fn update(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.state.write().unwrap_or_else(std::sync::PoisonError::into_inner));
    }

    pub fn tools(&self) -> Vec<Listed> {
        self.state().tools.clone()
    }

    pub fn problems(&self) -> Vec<String> {
        self.state().problems.clone()
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
                list(&all, i, &peer).await;
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
                        Some(()) = relisted.recv() => list(&all, i, &peer).await,
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

/// Lists server `i`'s tools and offers those whose names pass (`names::admit`).
async fn list(all: &Peers, i: usize, peer: &Peer<RoleClient>) {
    let server = &all.servers[i];
    let name = server.config.name.as_str();
    let timeout = Duration::from_secs(server.config.timeout_secs);
    let tools = match tokio::time::timeout(timeout, peer.list_all_tools()).await {
        Ok(Ok(tools)) => tools,
        Ok(Err(e)) => {
            return server.update(|s| s.down = Some(format!("MCP server {name}: listing its tools failed: {e}")));
        }
        Err(_) => {
            return server.update(|s| s.down = Some(format!("MCP server {name}: tools/list took over {timeout:?}")));
        }
    };
    let mut taken: Vec<(String, String)> = all.reserved.iter().map(|n| (n.clone(), "richbot".to_owned())).collect();
    for other in all.servers.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, s)| s) {
        for t in other.tools() {
            taken.push((names::exposed(&other.config.name, &t.tool), format!("MCP server {}", other.config.name)));
        }
    }
    let (ok, problems) = names::admit(name, tools.iter().map(|t| t.name.as_ref()), &mut taken);
    for p in &problems {
        tracing::error!(server = name, "{p}; the tool is not offered");
    }
    let listed: Vec<Listed> = tools
        .iter()
        .filter(|t| ok.contains(&t.name.as_ref()))
        .map(|t| Listed {
            tool: t.name.to_string(),
            description: t.description.as_deref().unwrap_or_default().to_owned(),
            schema: Value::Object((*t.input_schema).clone()),
        })
        .collect();
    tracing::info!(server = name, tools = listed.len(), "MCP tools listed");
    server.update(|s| {
        s.peer = Some(peer.clone());
        s.down = None;
        s.tools = listed;
        s.problems = problems;
    });
}

/// Opens a connection and runs MCP's `initialize`, within the server's timeout.
async fn connect(config: &McpServer, handler: Handler) -> Result<RunningService<RoleClient, Handler>, String> {
    let timeout = Duration::from_secs(config.timeout_secs);
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
                    tokio::spawn(forward(config.name.clone(), stderr));
                }
                handler.serve(transport).await.map_err(|e| format!("initialize failed: {e}"))
            }
            (None, Some(url)) => {
                let transport = StreamableHttpClientTransport::from_uri(url.as_str());
                handler.serve(transport).await.map_err(|e| format!("initialize failed at {url}: {e}"))
            }
            (None, None) => Err("neither command nor url is set".to_owned()),
        }
    };
    tokio::time::timeout(timeout, connecting)
        .await
        .map_err(|_| format!("no answer to initialize within {} s", timeout.as_secs()))?
}

/// The server's stderr, line by line, into richbot's log.
async fn forward(server: String, stderr: tokio::process::ChildStderr) {
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::info!(server = %server, "{line}");
    }
}
