//! richbot: a Matrix application service that lets room members talk to an LLM and
//! answers with rich messages (blocks plus a text fallback), posting as virtual users.
//!
//! # The pipeline
//!
//! ```text
//! homeserver --PUT txn--> appservice --> inbox --> room --> turn --> agent <-> turn's tool runner
//!              (HTTP edge)  (durable)  (triage,  (one LLM  (tool    (plan, sandbox,
//!                                       per room) turn)    loop)    render)
//!                                                   \________________________/
//!                                                              |
//!                                               outbox --> matrix --> homeserver
//!                                     (writes as a persona, paced, exactly once)
//!              store (SQLite) under all of them: only it runs SQL
//! ```
//!
//! Modules are declared below in that order; dependencies point down the list (a stage
//! uses the ones after it, never one before it). The leaves: `blocks` (the catalogue),
//! `tools` (specs and `plan`), `render`, `relation` (`m.relates_to`, read in one place),
//! `personas`, `matrix`, `store`.
//!
//! # Invariants
//!
//! 1. HTTP handlers never call the LLM; they validate, write to the inbox, and answer. A
//!    transaction is answered 200 only after its events are committed, deduplicated by
//!    event id (Synapse restarts its txn ids at 1 after its own restart). The one handler
//!    that calls the homeserver is the user query, which the spec requires to register the
//!    user before answering.
//! 2. Only `store` runs SQL; only `agent::llm` talks to the LLM; only `matrix` talks to the
//!    homeserver.
//! 3. Context building (`turn::context`), triggers (`room::triggers`), tool-call planning
//!    (`tools::plan`), the block catalogue (`blocks`) and rendering (`render`) are pure.
//! 4. Every write has a transaction id fixed before the first attempt and persisted, unique
//!    across personas (`rb.<instance>.<turn>.<seq>`, in `outbox`); a retry or a resumed
//!    turn reuses it.
//! 5. One turn per room at a time, rooms in parallel up to a cap; messages that arrive
//!    during a turn are the next turn's.
//! 6. Edits only of messages a persona of ours sent (checked in the store), and writes to
//!    one message at least `bot.edit_interval_ms` (default 2.5 s) apart: a too-early edit
//!    waits for a slot reserved atomically in SQL.
//! 7. Matrix ids are ruma types from the inbox on; a stored id is parsed once, when read.

pub mod agent;
pub mod appservice;
pub mod blocks;
pub mod inbox;
pub mod matrix;
pub mod outbox;
pub mod personas;
pub mod relation;
pub mod render;
pub mod room;
pub mod store;
pub mod tools;
pub mod turn;

pub mod check;
pub mod clock;
pub mod config;
pub mod metrics;
pub mod registration;
pub mod strings;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::Notify;

use crate::config::Settings;

/// The service could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("database: {0}")]
    Store(#[from] store::Error),
    #[error("HTTP server: {0}")]
    Serve(#[from] std::io::Error),
}

/// The parts `run` wires together, built from the settings.
pub struct Parts {
    pub store: store::Store,
    pub matrix: matrix::Client,
    pub personas: personas::Personas,
    pub llm: agent::Llm,
}

impl Parts {
    pub async fn build(settings: &Settings) -> Result<Self, Error> {
        let store = store::Store::open(&settings.config.database.url).await?;
        let matrix = matrix::Client::new(
            &settings.config.homeserver.url,
            &settings.registration.as_token,
            matrix::RetryPolicy::default(),
        );
        let personas = personas::Personas::new(settings, matrix.clone(), store.clone());
        let llm = agent::Llm::new(
            &settings.config.llm.base_url,
            settings.api_key.as_deref(),
            &settings.config.llm.model,
            settings.llm_timeout(),
            settings.config.llm.max_tokens,
        );
        Ok(Self { store, matrix, personas, llm })
    }
}

/// Runs the appservice on `listener` until `shutdown` resolves.
pub async fn run(
    settings: Settings,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let Parts { store, matrix, personas, llm } = Parts::build(&settings).await?;
    let wake = Arc::new(Notify::new());
    let metrics = Arc::new(metrics::Metrics::default());
    let bot = &settings.config.bot;
    let outbox = outbox::Outbox::new(matrix.clone(), store.clone(), store.instance_id().await?, bot.edit_interval_ms);
    let limits = turn::Limits {
        key: bot.writer_key,
        history_chars: bot.history_chars,
        max_rounds: settings.config.llm.max_rounds,
    };
    let turns = turn::Turns::new(store.clone(), llm, outbox.clone(), personas.clone(), metrics.clone(), limits);
    let policy = room::Policy {
        staleness_ms: i64::try_from(bot.staleness_secs.saturating_mul(1000)).unwrap_or(i64::MAX),
        group_requires_mention: bot.group_requires_mention,
        allow: settings.allow.clone(),
    };
    let rooms = room::Deps::new(store.clone(), matrix, personas.clone(), outbox, turns, policy);
    let inbox = inbox::Inbox::new(store.clone(), wake.clone(), metrics.clone());
    let state = appservice::AppState::new(&settings.registration.hs_token, inbox, personas.clone());
    let app = appservice::router(state, settings.config.appservice.max_body_bytes);

    // Personas are registered in the background: a homeserver that is still starting must
    // not keep the appservice from answering its transactions.
    let registrar = tokio::spawn(async move {
        let mut wait = Duration::from_secs(1);
        loop {
            match personas.register_all().await {
                Ok(()) => break,
                Err(e) => tracing::warn!(error = %e, "could not register the personas yet; retrying"),
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(60));
        }
    });
    let metrics_server = match &settings.config.metrics.listen {
        Some(addr) => {
            let listener = TcpListener::bind(addr.as_str()).await?;
            tracing::info!(addr, "metrics listening");
            let app = metrics::router(metrics);
            Some(tokio::spawn(async move { axum::serve(listener, app).await }))
        }
        None => None,
    };
    let scheduler = tokio::spawn(rooms.run(wake, bot.max_parallel_rooms));
    tracing::info!(addr = ?listener.local_addr().ok(), "richbot listening");
    let served = axum::serve(listener, app).with_graceful_shutdown(shutdown).await;
    scheduler.abort();
    registrar.abort();
    if let Some(m) = metrics_server {
        m.abort();
    }
    let _ = scheduler.await;
    store.close().await;
    served.map_err(Error::Serve)
}
