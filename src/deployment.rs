//! A deployment, wired and then served: [`Deployment::build`] makes every part `serve`
//! runs from the validated settings and starts what runs in the background; then
//! [`Deployment::serve`] answers the homeserver until shutdown and stops it all. `run`
//! (in `lib.rs`) is the two in a row.
//!
//! The order of building is written here once, where it matters: the store's member cache
//! is warmed before anything reads it; MCP servers start before the toolbox offers their
//! tools (a name that cannot be offered stops the start); the leases exist before the
//! outbox they fence and the crypto they share.
//!
//! Lifecycle: built (background tasks running: the registrar, the crypto pump, the
//! pruner, the poll closer, the schedule ticker, the agents' channel and the metrics
//! server when configured) -> serving (the room scheduler and the HTTP edge) -> on
//! shutdown, no new turns; the running ones get `bot.shutdown_grace_secs` while the edge
//! still takes transactions; then the edge closes and everything in the background stops.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::AbortHandle;

use crate::assemble::{self, Error, Parts};
use crate::config::Settings;
use crate::{approval, appservice, channel, inbox, mcp, media, metrics, outbox, polls, queue, room, schedules};
use crate::{store, tools, turn};

/// Every part of a running richbot, built and not yet serving.
pub struct Deployment {
    settings: Settings,
    store: store::Store,
    mcp: mcp::Mcp,
    queue: Arc<queue::RoomQueue>,
    rooms: room::Deps,
    app: axum::Router,
    background: Background,
}

/// The tasks a deployment runs beside its HTTP edge, stopped together.
#[derive(Default)]
struct Background {
    tasks: Vec<AbortHandle>,
    channel: Option<channel::Serving>,
}

impl Background {
    fn spawn<F>(&mut self, task: F)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tasks.push(tokio::spawn(task).abort_handle());
    }

    async fn stop(self) {
        for task in self.tasks {
            task.abort();
        }
        if let Some(channel) = self.channel {
            channel.stop().await;
        }
    }
}

/// What the stages share, opened first: the store (its member cache warmed), the
/// homeserver client, the personas, the LLM clients, the room queue and, on PostgreSQL,
/// the leases.
struct Core {
    store: store::Store,
    matrix: crate::matrix::Client,
    personas: crate::personas::Personas,
    llm: crate::agent::Llm,
    models: std::collections::HashMap<ruma::OwnedUserId, crate::agent::Llm>,
    queue: Arc<queue::RoomQueue>,
    leases: Option<room::Leases>,
}

impl Core {
    async fn open(settings: &Settings) -> Result<Self, Error> {
        let parts = Parts::build(settings).await?;
        parts.seal_crypto_state(settings).await?;
        let serving = parts.store.serving().await?;
        // SQLite: one process per database, which may keep members in memory. PostgreSQL:
        // any number of instances, sharing the rooms through leases.
        let shared = parts.store.backend() == store::Backend::Postgres;
        let queue = parts.room_queue().await?;
        let models = assemble::persona_models(settings, &parts.llm);
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
        Ok(Self { store, matrix, personas, llm, models, queue, leases })
    }
}

impl Deployment {
    /// Builds every part from `settings` and starts the background tasks.
    pub async fn build(settings: Settings) -> Result<Self, Error> {
        let Core { store, matrix, personas, llm, models, queue, leases } = Core::open(&settings).await?;
        let shared = leases.is_some();
        let mcp =
            mcp::Mcp::start_with(&settings.config.mcp, &tools::registry::RESERVED, assemble::mcp_bounds(&settings))
                .await?;
        let toolbox = tools::Toolbox::new(mcp.clone(), settings.mcp_access.clone());
        let approvals = approval::Approvals::new(store.clone());
        let approvals = if shared { approvals.sharing() } else { approvals };
        let metrics = Arc::new(metrics::Metrics::default());
        let sharing = leases.as_ref().map(room::Leases::crypto_sharing);
        let crypto = assemble::crypto(&settings, &store, &matrix, &personas, sharing, queue.clone());
        if let Some(c) = &crypto {
            metrics.count_crypto(c.counters());
        }
        let bot = &settings.config.bot;
        let outbox =
            outbox::Outbox::new(matrix.clone(), store.clone(), store.instance_id().await?, bot.edit_interval_ms);
        let outbox = match &leases {
            Some(l) => outbox.fenced(l.holder()),
            None => outbox,
        };
        let outbox = outbox.with_crypto(crypto.clone());
        let mut background = Background::default();
        let closer = polls::Closer::default();
        background.spawn(closer.clone().run(store.clone(), outbox.clone()));
        let ticker = schedules::Ticker::default();
        let bounds = settings.config.schedules.bounds();
        background.spawn(ticker.clone().run(store.clone(), queue.clone(), bounds, metrics.clone()));
        let turns = turn::Turns::new(
            store.clone(),
            llm,
            outbox.clone(),
            personas.clone(),
            metrics.clone(),
            assemble::budget(&settings),
            assemble::turn_limits(&settings),
        )
        .with_tools(toolbox, approvals.clone())
        .with_models(models)
        .with_media(media::Media::new(matrix.clone(), settings.config.media.limits()))
        .with_voice(assemble::voice(&settings))
        .with_polls(closer)
        .with_schedules(assemble::schedule_kit(&settings, ticker.clone()));
        let policy = assemble::room_policy(&settings);
        let schedule_kit = assemble::schedule_kit(&settings, ticker);
        let (s, o, m) = (store.clone(), outbox.clone(), matrix.clone());
        let channel = assemble::agents(&settings, s, o, m, metrics.clone(), schedule_kit);
        let clients = channel.clone().map(|c| c as Arc<dyn schedules::ClientRooms>);
        let mut rooms = room::Deps::new(
            store.clone(),
            matrix.clone(),
            personas.clone(),
            outbox,
            turns,
            policy.clone(),
            metrics.clone(),
        )
        .with_crypto(crypto.clone(), personas.clone(), policy.clone())
        .with_clients(clients);
        let mut inbox = inbox::Inbox::new(store.clone(), queue.clone(), personas.clone(), policy, metrics.clone())
            .with_approvals(approvals)
            .with_crypto(crypto.clone());
        if let Some(leases) = leases {
            rooms = rooms.sharing(leases);
            inbox = inbox.sharing();
        }
        let app = edge(&settings, inbox, &personas, &store);
        background.spawn(crate::register_personas::register(personas, matrix, settings.clone(), crypto.clone()));
        if let Some(c) = crypto {
            background.spawn(c.run());
        }
        let keep = Duration::from_secs(settings.config.bot.history_days.saturating_mul(86_400));
        background.spawn(store.clone().keep_pruning(keep));
        background.channel = assemble::agents_serving(&settings, channel).await?;
        if let Some(addr) = &settings.config.metrics.listen {
            let listener = TcpListener::bind(addr.as_str()).await?;
            tracing::info!(addr, "metrics listening");
            let app = metrics::router(metrics);
            background.spawn(async move { axum::serve(listener, app).await });
        }
        Ok(Self { settings, store, mcp, queue, rooms, app, background })
    }

    /// Answers the homeserver on `listener` until `shutdown` resolves; then stops the
    /// turns (with their grace), the edge and the background, and closes the store.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), Error> {
        let Self { settings, store, mcp, queue, rooms, app, background } = self;
        let bot = &settings.config.bot;
        let (stop_tx, signal) = tokio::sync::watch::channel(false);
        let (done_tx, done) = tokio::sync::oneshot::channel::<()>();
        let stop = room::Stop { signal, grace: Duration::from_secs(bot.shutdown_grace_secs) };
        let parallel = bot.max_parallel_rooms;
        let scheduler = tokio::spawn(async move {
            rooms.run(queue, parallel, stop).await;
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
        scheduler.abort();
        background.stop().await;
        let _ = scheduler.await;
        mcp.stop();
        store.close().await;
        tracing::info!("richbot stopped");
        served.map_err(Error::Serve)
    }
}

/// The homeserver's HTTP edge over `inbox`.
fn edge(
    settings: &Settings,
    inbox: inbox::Inbox,
    personas: &crate::personas::Personas,
    store: &store::Store,
) -> axum::Router {
    let appservice = &settings.config.appservice;
    let mut state = appservice::AppState::with_limit(
        &settings.registration.hs_token,
        inbox,
        personas.clone(),
        appservice.max_concurrent_transactions,
    );
    if !appservice.behind_proxy {
        state = state.asking_for_skipped(store.clone());
    }
    appservice::router(state, appservice.max_body_bytes)
}
