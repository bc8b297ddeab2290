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
//!                                                     |      |         sandbox, render;
//!                                                     |      +-> mcp   or an MCP server,
//!                                                     |                 approved first)
//!                                                     v
//!                                  outbox --> matrix --> homeserver
//!                     (every write as a persona, paced, exactly once)
//!   crypto beside the inbox and the outbox: decrypts what comes in, encrypts what goes out
//!   store (SQLite or PostgreSQL) under all of them: the only place that runs SQL
//! ```
//!
//! The agents' channel (`channel`) is a second edge beside the appservice: other agents'
//! sends and edits, checked by the same `plan()`, go out through the same outbox.
//!
//! Encryption is at the two ends (`crypto`): the inbox hands what transactions bring for
//! the personas' devices to their crypto, an encrypted event reaches the room stage as
//! its clear event (`room::decrypt`), and the outbox encrypts a write for an encrypted
//! room just before it goes out. Triggers, context, tools and rendering never know
//! whether a room is encrypted.
//!
//! The modules are declared below in that order, and dependencies point down the list: a
//! module uses only modules declared after it (checked by `tests/it/layout.rs`), so there
//! is no circle. The agent does not know the tools: the turn hands it their specs (the
//! registry's, `tools::registry`) and a runner (`turn::runner`) that plans, authorizes,
//! posts or calls each one.
//!
//! # Invariants
//!
//! 1. HTTP handlers never call the LLM; they validate, write to the inbox, and answer. A
//!    transaction is answered 200 only after its events are committed, deduplicated by
//!    event id (Synapse restarts its txn ids at 1 after its own restart). The one handler
//!    that calls the homeserver is the user query, which the spec requires to register the
//!    user before answering.
//! 2. Only `store` runs SQL; only `agent::llm` talks to the LLM; only `matrix` talks to the
//!    homeserver; only `mcp` talks to MCP servers.
//! 3. Context building (`turn::context`), triggers (`room::triggers`), tool-call planning
//!    (`tools::plan`), the block catalogue (`blocks`) and rendering (`render`) are pure.
//! 4. Every write has a transaction id fixed before the first attempt and persisted, unique
//!    across personas (`rb.<instance>.<turn>.<seq>`, in `outbox`); a retry or a resumed
//!    turn reuses it.
//! 5. One turn per room at a time, rooms in parallel up to a cap; messages that arrive
//!    during a turn are the next turn's. Among several instances on one PostgreSQL, a room
//!    is worked on only under its lease (`room::leases`), which runs out if its holder dies.
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
//! 10. A tool in its server's `approval` list runs only after the asker (no one else)
//!     allows it; an MCP tool's result is recorded before the model sees it, so a resumed
//!     turn never calls it twice. A reply's calls run together only when every one of them
//!     is `concurrent`.
//! 11. A write to an encrypted room is encrypted once, before its first attempt, and its
//!     ciphertext kept: every retry sends the same bytes. A persona's Olm state is
//!     advanced by one holder at a time (a lease among instances) and stored before
//!     anything made with it goes out; what the homeserver pushes for the devices is
//!     stored before the transaction is answered. A room is judged encrypted by its state.

// Commands and set-up.
pub mod runtime;
mod register_personas;
pub mod check;
pub mod init;
pub mod migrate;
pub mod reset;
pub mod assemble;
pub mod config;
pub mod registration_file;
// The stages, in pipeline order.
pub mod appservice;
pub mod channel;
pub mod inbox;
pub mod room;
pub mod turn;
pub mod approval;
pub mod schedules;
// What the stages count (by tool name, hence above `tools`).
pub mod metrics;
// What a turn uses.
pub mod tools;
pub mod budget;
pub mod mcp;
pub mod agent;
pub mod polls;
pub mod outbox;
pub mod crypto;
pub mod queue;
// What everything shares: the leaves.
pub mod personas;
pub mod media;
pub mod speech;
pub mod render;
pub mod chart;
pub mod blocks;
pub mod matrix;
pub mod store;
pub mod relation;
pub mod strings;
pub mod mime;
pub mod invisible;
pub mod url_mask;
pub mod pickle;
pub mod private_files;
pub mod clock;
pub mod key_locks;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::assemble::Parts;
use crate::config::Settings;

pub use assemble::Error;

/// Runs the appservice on `listener` until `shutdown` resolves.
pub async fn run(
    settings: Settings,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    // SQLite: one process per database (a file lock), which may keep members in memory.
    // PostgreSQL: any number of instances, sharing the rooms through leases (and none
    // while `richbot migrate` copies the database).
    let _lock = store::lock_file(&settings.config.database.url).map_err(Error::Locked)?;
    let parts = Parts::build(&settings).await?;
    parts.seal_crypto_state(&settings).await?;
    let serving = parts.store.serving().await?;
    let shared = parts.store.backend() == store::Backend::Postgres;
    let queue = parts.room_queue().await?;
    let models = assemble::persona_models(&settings, &parts.llm);
    let Parts { store, matrix, personas, llm } = parts;
    let store = if shared { store } else { store.caching_members() };
    store.warm_members(&queue.watched_rooms()).await?;
    let lease = Duration::from_secs(settings.config.bot.lease_secs);
    // The serve lock goes to the leases, which name its session and keep it.
    let leases = shared.then(|| room::Leases::new(store.clone(), lease, serving));
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        commit = env!("RICHBOT_GIT_COMMIT"),
        listen = %settings.listen,
        homeserver = %settings.config.homeserver.url,
        server_name = %settings.config.homeserver.server_name,
        personas = %personas.all().iter().map(|p| p.user_id.as_str()).collect::<Vec<_>>().join(", "),
        database = %store::shown_url(&settings.config.database.url),
        lease_holder = leases.as_ref().map(|l| l.holder()),
        model = %settings.config.llm.model,
        "richbot starting"
    );
    // MCP servers first: a tool name that cannot be offered stops the start, naming it.
    let mcp =
        mcp::Mcp::start_with(&settings.config.mcp, &tools::registry::RESERVED, assemble::mcp_bounds(&settings)).await?;
    let toolbox = tools::Toolbox::new(mcp.clone(), settings.mcp_access.clone());
    let approvals = approval::Approvals::new(store.clone());
    let approvals = if shared { approvals.sharing() } else { approvals };
    let metrics = Arc::new(metrics::Metrics::default());
    let sharing = leases.as_ref().map(room::Leases::crypto_sharing);
    let crypto = assemble::crypto(&settings, (&store, &matrix), &personas, (sharing, queue.clone()));
    if let Some(c) = &crypto {
        metrics.count_crypto(c.counters());
    }
    let bot = &settings.config.bot;
    let bot_parallel = bot.max_parallel_rooms;
    let outbox = outbox::Outbox::new(matrix.clone(), store.clone(), store.instance_id().await?, bot.edit_interval_ms);
    let outbox = match &leases {
        Some(l) => outbox.fenced(l.holder()),
        None => outbox,
    };
    let outbox = outbox.with_crypto(crypto.clone());
    let (agent_outbox, agent_matrix) = (outbox.clone(), matrix.clone());
    let closer = polls::Closer::default();
    let poll_closer = tokio::spawn(closer.clone().run(store.clone(), outbox.clone()));
    let ticker = schedules::Ticker::default();
    let bounds = settings.config.schedules.bounds();
    let fire = ticker.clone().run(store.clone(), queue.clone(), bounds, metrics.clone());
    let schedule_ticker = tokio::spawn(fire);
    let budget = assemble::budget(&settings);
    let turns = turn::Turns::new(
        store.clone(),
        llm,
        outbox.clone(),
        personas.clone(),
        metrics.clone(),
        budget,
        assemble::turn_limits(&settings),
    )
    .with_tools(toolbox, approvals.clone())
    .with_models(models)
    .with_media(media::Media::new(matrix.clone(), settings.config.media.limits()))
    .with_voice(assemble::voice(&settings))
    .with_polls(closer)
    .with_schedules(assemble::schedule_kit(&settings, ticker.clone()));
    let policy = assemble::room_policy(&settings);
    let matrix_for_ping = matrix.clone();
    let agent_parts = (store.clone(), agent_outbox, agent_matrix);
    let channel = assemble::agents(&settings, agent_parts, metrics.clone(), assemble::schedule_kit(&settings, ticker));
    let clients = channel.clone().map(|c| c as Arc<dyn schedules::ClientRooms>);
    let mut rooms =
        room::Deps::new(store.clone(), matrix, personas.clone(), outbox, turns, policy.clone(), metrics.clone())
            .with_crypto(crypto.clone(), personas.clone(), policy.clone())
            .with_clients(clients);
    let mut inbox = inbox::Inbox::new(store.clone(), queue.clone(), (personas.clone(), policy), metrics.clone())
        .with_approvals(approvals)
        .with_crypto(crypto.clone());
    if let Some(leases) = leases {
        rooms = rooms.sharing(leases);
        inbox = inbox.sharing();
    }
    let concurrent = settings.config.appservice.max_concurrent_transactions;
    let mut state =
        appservice::AppState::with_limit(&settings.registration.hs_token, inbox, personas.clone(), concurrent);
    if !settings.config.appservice.behind_proxy {
        state = state.asking_for_skipped(store.clone());
    }
    let app = appservice::router(state, settings.config.appservice.max_body_bytes);

    let registrar =
        tokio::spawn(register_personas::register(personas.clone(), matrix_for_ping, settings.clone(), crypto.clone()));
    let pump = crypto.map(|c| tokio::spawn(c.run()));
    let keep = Duration::from_secs(bot.history_days.saturating_mul(86_400));
    let pruner = tokio::spawn(store.clone().keep_pruning(keep));
    let agents_server = assemble::agents_serving(&settings, channel).await?;
    let metrics_server = match &settings.config.metrics.listen {
        Some(addr) => {
            let listener = TcpListener::bind(addr.as_str()).await?;
            tracing::info!(addr, "metrics listening");
            let app = metrics::router(metrics);
            Some(tokio::spawn(async move { axum::serve(listener, app).await }))
        }
        None => None,
    };
    // On shutdown: no new turns; the running ones get `bot.shutdown_grace_secs` while the
    // HTTP edge still takes transactions; then the edge closes.
    let (stop_tx, signal) = tokio::sync::watch::channel(false);
    let (done_tx, done) = tokio::sync::oneshot::channel::<()>();
    let stop = room::Stop { signal, grace: Duration::from_secs(bot.shutdown_grace_secs) };
    let scheduler = tokio::spawn(async move {
        rooms.run(queue, bot_parallel, stop).await;
        let _ = done_tx.send(());
    });
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "richbot listening");
    }
    let graceful = async move {
        shutdown.await;
        let _ = stop_tx.send(true);
        let _ = done.await;
    };
    let cap = appservice::connection_cap(settings.config.appservice.max_connections);
    let served = appservice::serve(listener, app, cap, graceful).await;
    let tasks = [scheduler.abort_handle(), registrar.abort_handle(), pruner.abort_handle(), poll_closer.abort_handle()];
    for task in tasks.into_iter().chain([schedule_ticker.abort_handle()]) {
        task.abort();
    }
    if let Some(p) = pump {
        p.abort();
    }
    if let Some(m) = metrics_server {
        m.abort();
    }
    if let Some(agents) = agents_server {
        agents.stop().await;
    }
    let _ = scheduler.await;
    mcp.stop();
    store.close().await;
    tracing::info!("richbot stopped");
    served.map_err(Error::Serve)
}
