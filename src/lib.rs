//! richbot: a Matrix application service that lets room members talk to an LLM and
//! answers with rich messages (blocks plus a text fallback), posting as virtual users.
//!
//! # The pipeline
//!
//! ```text
//! homeserver --PUT txn--> appservice --> inbox --> room ------> turn ------> agent
//!              (HTTP edge)  (durable)   (triage,   (one LLM    (the bounded
//!                                       per room)   turn)       tool loop)
//!                                                     |   ^         |
//!                                                     |   +- tools -+  (each call: plan,
//!                                                     |                sandbox, render)
//!                                                     v
//!                                  outbox --> matrix --> homeserver
//!                     (every write as a persona, paced, exactly once)
//!            store (SQLite) under all of them: the only place that runs SQL
//! ```
//!
//! The modules are declared below in that order, and dependencies point down the list: a
//! module uses only modules declared after it (checked by `tests/it/layout.rs`), so there
//! is no circle. The agent does not know the tools: the turn hands it their specs and a
//! runner (`turn::runner`) that plans, authorizes and posts each call.
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
//! 7. The sandbox is the asker's: every write lands only in a room the asker is joined to,
//!    reply and thread targets belong to that room, and triggers (reply, reaction,
//!    button) match the room they happen in. A turn answers one asker.
//! 8. Nothing runs unbounded: turns per room and per asker (buckets, then a cool-down),
//!    tokens per asker, room and deployment (reserved before a call, settled after), tool
//!    calls per reply, writes per turn, a deadline per turn, capped retry waits. A limit
//!    that trips says so once, as an `m.notice`; richbot never answers an `m.notice`.
//! 9. Matrix ids are ruma types from the inbox on; a stored id is parsed once, when read.

// Commands and set-up.
pub mod check;
pub mod init;
pub mod parts;
pub mod config;
pub mod registration;
// The stages, in pipeline order.
pub mod appservice;
pub mod inbox;
pub mod room;
pub mod turn;
// What the stages count (by tool name, hence above `tools`).
pub mod metrics;
// What a turn uses.
pub mod tools;
pub mod agent;
pub mod outbox;
// What everything shares: the leaves.
pub mod personas;
pub mod render;
pub mod blocks;
pub mod matrix;
pub mod store;
pub mod relation;
pub mod strings;
pub mod files;
pub mod clock;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::Notify;

use crate::config::Settings;
use crate::parts::Parts;

pub use parts::Error;

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
    let l = &settings.config.limits;
    let limits = turn::Limits {
        key: bot.writer_key,
        history_chars: bot.history_chars,
        bounds: agent::Bounds {
            max_rounds: settings.config.llm.max_rounds,
            calls_per_round: l.tool_calls_per_round as usize,
        },
        writes_per_turn: l.writes_per_turn,
        deadline: Duration::from_secs(l.turn_deadline_secs),
    };
    let budgets = store::Budgets {
        per_user: l.tokens_per_user_per_day,
        per_room: l.tokens_per_room_per_day,
        total: l.tokens_per_day,
    };
    let budget = turn::Budget::new(budgets, settings.exempt.clone(), settings.config.llm.max_tokens);
    let turns = turn::Turns::new(store.clone(), llm, outbox.clone(), personas.clone(), metrics.clone(), budget, limits);
    let policy = room::Policy {
        staleness_ms: i64::try_from(bot.staleness_secs.saturating_mul(1000)).unwrap_or(i64::MAX),
        group_requires_mention: bot.group_requires_mention,
        allow: settings.allow.clone(),
        rates: room::Rates {
            per_room_per_minute: l.turns_per_room_per_minute,
            per_asker_per_minute: l.turns_per_user_per_minute,
            cooldown_secs: l.loop_cooldown_secs,
            exempt: settings.exempt.clone(),
        },
    };
    let rooms = room::Deps::new(store.clone(), matrix, personas.clone(), outbox, turns, policy, metrics.clone());
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
