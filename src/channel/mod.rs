//! The agents' channel: richbot as the Matrix host for other agents. Agent runtimes, CI
//! jobs and scripts ask it to deliver `{channel, kind, to, body}` (or a rich message) and
//! get a receipt (`{"message_id": ...}`), over MCP (`POST /mcp`, `rmcp`'s server side:
//! `rich_send`, `rich_edit`, `send`, `replies`, and `schedule`, `schedules`, `unschedule`
//! for messages at a later time) or plain HTTP (`/v1/...`), on its own address
//! (`[agents] listen`), apart from the appservice port.
//!
//! It is a second edge beside the appservice one, and it never runs the model: a call is
//! authenticated (a client's bearer token), checked with the same `plan()` the model's
//! calls go through, allowed by the client's `rooms` / `users`, and handed to the same
//! outbox (transaction ids fixed and persisted, markers, the edit pace, encryption). Its
//! idempotency ledger is in the store (`agent_requests`): the first call with a key
//! makes its row before anything is sent, and its write is that row's outbox write, so
//! a repeat (on any instance, after a restart) finds the receipt, or resumes the write
//! a crash cut off, and never posts twice.

mod config;
mod deliver;
mod http;
mod parse;
mod rate;
mod answers;
mod receipt;
mod schedules;
mod target;
mod tools;

use std::sync::Arc;
use std::time::Duration;

use ruma::OwnedEventId;

use crate::blocks::{Rich, WriterKey};
use crate::metrics::Metrics;
use crate::outbox::Outbox;
use crate::store::Store;

pub use config::{AgentsConfig, Client, ClientConfig};
pub use http::router;
pub use receipt::{Failure, Receipt};

/// What a send or an edit says.
#[derive(Debug, Clone)]
pub enum Content {
    /// Plain CommonMark text.
    Text(String),
    /// A rich message: checked blocks and their fallback.
    Rich { payload: Rich, fallback: String },
}

/// A new message: where (`kind` and `to`, as the caller wrote them) and what.
#[derive(Debug, Clone)]
pub struct SendRequest {
    /// `direct` (`to` is a user) or `channel` (`to` is a room id or alias).
    pub direct: bool,
    pub to: String,
    pub content: Content,
    pub reply_to: Option<OwnedEventId>,
    pub thread: Option<OwnedEventId>,
}

/// A new content for a message the client sent.
#[derive(Debug, Clone)]
pub struct EditRequest {
    pub message_id: OwnedEventId,
    pub content: Content,
}

/// How the channel runs, from `[agents]` and `[bot]`.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The agent clients and their tokens.
    pub clients: Vec<Client>,
    /// How long an idempotency key is remembered.
    pub window: Duration,
    /// The content key rich payloads are written under.
    pub key: WriterKey,
    /// Schedules' bounds, the default zone, and the ticker told of a new one.
    pub schedules: crate::turn::ScheduleKit,
}

/// The channel's state, shared by its HTTP and MCP handlers.
#[derive(Debug)]
pub struct Channel {
    store: Store,
    outbox: Outbox,
    matrix: crate::matrix::Client,
    metrics: Arc<Metrics>,
    clients: Vec<Arc<Client>>,
    /// How long an idempotency key is remembered.
    window: Duration,
    rate: rate::Rate,
    /// The calls in flight, by (client, idempotency key).
    calls: crate::key_locks::Locks<(String, String)>,
    key: WriterKey,
    /// Schedules' bounds, the default zone, and the ticker told of a new one.
    schedules: crate::turn::ScheduleKit,
}

impl Channel {
    pub fn new(
        store: Store,
        outbox: Outbox,
        matrix: crate::matrix::Client,
        metrics: Arc<Metrics>,
        setup: Setup,
    ) -> Arc<Self> {
        let Setup { clients, window, key, schedules } = setup;
        let clients = clients.into_iter().map(Arc::new).collect();
        let (rate, calls) = (rate::Rate::default(), Default::default());
        Arc::new(Self { store, outbox, matrix, metrics, clients, window, rate, calls, key, schedules })
    }

    /// The client whose token `token` is (compared in constant time with each).
    pub fn client(&self, token: &str) -> Option<Arc<Client>> {
        use subtle::ConstantTimeEq;
        let mut found = None;
        for c in &self.clients {
            if bool::from(c.token.as_bytes().ct_eq(token.as_bytes())) {
                found = Some(c.clone());
            }
        }
        found
    }

    /// Forgets idempotency keys older than the window, every hour, for ever.
    pub async fn keep_pruning(self: Arc<Self>) {
        loop {
            let before = crate::clock::now_ms() - crate::clock::ms(self.window);
            match self.store.prune_agent_requests(before).await {
                Ok(n) if n > 0 => tracing::debug!(n, "forgot agent calls past agents.idempotency_hours"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "could not forget old agent calls"),
            }
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
    }
}

/// How long the channel may take to close its connections at shutdown.
const GRACE: Duration = Duration::from_secs(5);

/// The channel, served on its own address.
#[derive(Debug)]
pub struct Serving {
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    pruning: tokio::task::JoinHandle<()>,
    stop: tokio::sync::oneshot::Sender<()>,
}

impl Serving {
    /// Serves `channel` on `addr` (and forgets old idempotency keys meanwhile).
    pub async fn start(addr: &str, channel: Arc<Channel>) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        tracing::info!(addr, clients = channel.clients.len(), "agents' channel listening");
        let pruning = tokio::spawn(channel.clone().keep_pruning());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = axum::serve(listener, router(channel)).with_graceful_shutdown(async move {
            let _ = stopped.await;
        });
        Ok(Self { server: tokio::spawn(async move { server.await }), pruning, stop })
    }

    /// Stops taking calls and closes the kept-alive connections, for [`GRACE`] at most;
    /// calls in flight finish their writes regardless (they run in their own tasks).
    pub async fn stop(self) {
        self.pruning.abort();
        let _ = self.stop.send(());
        let abort = self.server.abort_handle();
        if tokio::time::timeout(GRACE, self.server).await.is_err() {
            abort.abort();
        }
    }
}
