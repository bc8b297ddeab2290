//! The supervisor of one MCP server's connection: connect (start the command, or open the
//! URL with its headers), list the tools, re-list them on
//! `notifications/tools/list_changed`, and when the connection ends (the process died, a
//! call found the transport broken), mark the server down and connect again after a
//! backoff (1 s doubling to 60 s).

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, QuitReason, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::sync::{mpsc, oneshot};

use super::McpServer;
use super::server::{MIN_CONNECT, Peers};

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
        let why = crate::url_mask::urls_in(&why);
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
                let shown = crate::url_mask::url(url);
                handler.serve(transport).await.map_err(|e| format!("initialize failed at {shown}: {e}"))
            }
            (None, None) => Err("neither command nor url is set".to_owned()),
        }
    };
    tokio::time::timeout(timeout, connecting)
        .await
        .map_err(|_| format!("no answer to initialize within {} s", timeout.as_secs()))?
}
