//! richbot: a Matrix application service that lets room members talk to an LLM and
//! answers with rich messages (blocks plus a text fallback), posting as virtual users.
//!
//! # The pipeline
//!
//! ```text
//! homeserver --PUT txn--> appservice --> inbox --> turn --> agent --> tools --> matrix --> homeserver
//!              (HTTP edge)  (durable)  (per room) (LLM loop) (plan)  (persona)
//!                                   \_______________ store (SQLite) _______________/
//! ```
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
//! 3. Context building (`turn::context`), triggers (`turn::triggers`), tool-call planning
//!    (`tools::plan`), the block catalogue (`blocks`) and rendering (`render`) are pure.
//! 4. Every write has a transaction id fixed before the first attempt and persisted, unique
//!    across personas (`rb.<instance>.<turn>.<seq>`); a retry or a resumed turn reuses it.
//! 5. One turn per room at a time, rooms in parallel up to a cap; messages that arrive
//!    during a turn are the next turn's.
//! 6. Edits only of messages a persona of ours sent (checked in the store), and writes to
//!    one message at least `edit_interval_ms` (2.5 s) apart: a too-early edit waits for a
//!    slot reserved atomically in SQL.

pub mod agent;
pub mod appservice;
pub mod blocks;
pub mod check;
pub mod clock;
pub mod config;
pub mod inbox;
pub mod matrix;
pub mod metrics;
pub mod personas;
pub mod registration;
pub mod render;
pub mod store;
pub mod strings;
pub mod tools;
pub mod turn;

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
    let settings = Arc::new(settings);
    let Parts { store, matrix, personas, llm } = Parts::build(&settings).await?;
    let instance = store.instance_id().await?;
    let wake = Arc::new(Notify::new());
    let metrics = Arc::new(metrics::Metrics::default());
    let bot = &settings.config.bot;
    let engine = Arc::new(turn::Engine {
        poster: turn::Poster {
            matrix: matrix.clone(),
            store: store.clone(),
            instance,
            interval_ms: bot.edit_interval_ms as i64,
        },
        store: store.clone(),
        matrix: matrix.clone(),
        personas: personas.clone(),
        llm,
        key: bot.writer_key,
        staleness_ms: (bot.staleness_secs * 1000) as i64,
        history_chars: bot.history_chars,
        max_rounds: settings.config.llm.max_rounds,
        group_requires_mention: bot.group_requires_mention,
        settings: settings.clone(),
        metrics: metrics.clone(),
    });
    let state = appservice::AppState {
        hs_token: Arc::from(settings.registration.hs_token.as_str()),
        inbox: inbox::Inbox::new(store.clone(), wake.clone(), metrics.clone()),
        personas: personas.clone(),
    };
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
    let scheduler = tokio::spawn(turn::scheduler::run(engine, wake, bot.max_parallel_rooms));
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
