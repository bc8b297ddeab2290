//! The parts every command that talks to the outside builds the same way (`serve` through
//! `run`, and `check`): the store, the homeserver client, the personas and the LLM client,
//! from the validated settings.

use std::collections::HashMap;
use std::time::Duration;

use ruma::OwnedUserId;

use crate::config::Settings;
use crate::personas::{DEFAULT_PROMPT, Persona, Personas};
use crate::{agent, budget, matrix, private_files, queue, room, store, turn};

/// The service could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("database: {0}")]
    Store(#[from] store::Error),
    #[error("HTTP server: {0}")]
    Serve(#[from] std::io::Error),
    #[error("{0}")]
    Locked(private_files::LockError),
    #[error("MCP tools:\n{0}")]
    Mcp(#[from] crate::mcp::StartError),
}

/// The parts `run` wires together, built from the settings.
pub struct Parts {
    pub store: store::Store,
    pub matrix: matrix::Client,
    pub personas: Personas,
    pub llm: agent::Llm,
}

impl Parts {
    pub async fn build(settings: &Settings) -> Result<Self, Error> {
        let db = &settings.config.database;
        let store = store::Store::open_with(&db.url, db.synchronous == crate::config::Synchronous::Full).await?;
        let store = store.with_pickle_key(settings.pickle_key.clone());
        let matrix = matrix::Client::new(
            &settings.config.homeserver.url,
            &settings.registration.as_token,
            matrix::RetryPolicy::default(),
        );
        let personas = personas(settings, matrix.clone(), store.clone());
        let llm = agent::Llm::new(
            &settings.config.llm.base_url,
            settings.api_key.as_deref(),
            &settings.config.llm.model,
            settings.llm_timeout(),
            settings.config.llm.max_tokens,
        )
        .with_streaming(settings.config.llm.stream)
        .with_idle_timeout(settings.llm_idle_timeout())
        .with_text_tool_calls(settings.config.llm.text_tool_calls)
        .with_concurrency(settings.config.llm.max_concurrent_requests);
        Ok(Self { store, matrix, personas, llm })
    }

    /// With encryption on: checks the pickle key against the stored crypto state and seals
    /// what is still clear (a store from before the key), before any persona's crypto
    /// is loaded.
    pub async fn seal_crypto_state(&self, settings: &Settings) -> Result<(), Error> {
        if !settings.config.encryption.enabled {
            return Ok(());
        }
        let sealed = self.store.seal_crypto_state().await?;
        if sealed > 0 {
            tracing::info!(values = sealed, "crypto state sealed with the pickle key (encryption.pickle_key_file)");
        }
        Ok(())
    }

    /// The room queue as the store left it: the rooms a persona has a membership in are
    /// watched, and those with events waiting (a stop, a crash) are queued.
    pub async fn room_queue(&self) -> Result<std::sync::Arc<queue::RoomQueue>, Error> {
        let ids: Vec<_> = self.personas.all().iter().map(|p| p.user_id.clone()).collect();
        let watched = self.store.rooms_of(&ids).await?;
        let pending = self.store.rooms_with_pending().await?;
        Ok(std::sync::Arc::new(queue::RoomQueue::new(watched, pending)))
    }
}

/// How much of each MCP server's listing is offered (`limits.mcp_tools_per_server`).
/// The agents' channel, when `agents.listen` is set (served by [`agents_serving`]).
pub fn agents(
    settings: &Settings,
    store: store::Store,
    outbox: crate::outbox::Outbox,
    matrix: matrix::Client,
    metrics: std::sync::Arc<crate::metrics::Metrics>,
    schedules: crate::turn::ScheduleKit,
) -> Option<std::sync::Arc<crate::channel::Channel>> {
    settings.config.agents.listen.as_ref()?;
    let window = Duration::from_secs(settings.config.agents.idempotency_hours.saturating_mul(3600));
    let key = settings.config.bot.writer_key;
    let setup = crate::channel::Setup { clients: settings.agents.clone(), window, key, schedules };
    Some(crate::channel::Channel::new(store, outbox, matrix, metrics, setup))
}

/// `channel` served on `agents.listen`.
pub async fn agents_serving(
    settings: &Settings,
    channel: Option<std::sync::Arc<crate::channel::Channel>>,
) -> Result<Option<crate::channel::Serving>, Error> {
    let (Some(addr), Some(channel)) = (&settings.config.agents.listen, channel) else { return Ok(None) };
    Ok(Some(crate::channel::Serving::start(addr, channel).await?))
}

pub fn mcp_bounds(settings: &Settings) -> crate::mcp::Bounds {
    crate::mcp::Bounds { tools: settings.config.limits.mcp_tools_per_server, ..crate::mcp::Bounds::default() }
}

/// The chat clients of the personas whose endpoint is not `[llm]`'s (a model, URL, key or
/// token limit of their own), one per distinct endpoint, all counted against `default`'s
/// limit of calls in flight.
pub fn persona_models(settings: &Settings, default: &agent::Llm) -> HashMap<OwnedUserId, agent::Llm> {
    let server = &settings.config.homeserver.server_name;
    let l = &settings.config.llm;
    let main = crate::config::Endpoint {
        base_url: l.base_url.clone(),
        model: l.model.clone(),
        api_key: settings.api_key.clone(),
        max_tokens: l.max_tokens,
        text_tool_calls: l.text_tool_calls,
    };
    let mut built: Vec<(&crate::config::Endpoint, agent::Llm)> = Vec::new();
    let mut out = HashMap::new();
    for (p, e) in settings.personas.iter().zip(&settings.endpoints) {
        let Ok(user) = ruma::UserId::parse(format!("@{}:{server}", p.localpart)) else { continue };
        if *e == main {
            continue;
        }
        let llm = match built.iter().find(|(b, _)| *b == e) {
            Some((_, llm)) => llm.clone(),
            None => {
                let llm =
                    agent::Llm::new(&e.base_url, e.api_key.as_deref(), &e.model, settings.llm_timeout(), e.max_tokens)
                        .with_streaming(l.stream)
                        .with_idle_timeout(settings.llm_idle_timeout())
                        .with_text_tool_calls(e.text_tool_calls)
                        .sharing_limit_with(default);
                built.push((e, llm.clone()));
                llm
            }
        };
        out.insert(user, llm);
    }
    out
}

/// The configured personas as user ids of this homeserver (the config's validation has
/// checked each localpart against the registration's namespace).
pub fn personas(settings: &Settings, matrix: matrix::Client, store: store::Store) -> Personas {
    let server = &settings.config.homeserver.server_name;
    let list = settings
        .personas
        .iter()
        .filter_map(|p| {
            let user_id = ruma::UserId::parse(format!("@{}:{server}", p.localpart)).ok()?;
            Some(Persona {
                display_name: p.display_name.clone().unwrap_or_else(|| p.localpart.clone()),
                system_prompt: p.system_prompt.clone().unwrap_or_else(|| DEFAULT_PROMPT.to_owned()),
                greeting: p.greeting.clone(),
                tools: p.tools.clone(),
                vision: p.vision.unwrap_or(settings.config.llm.vision),
                listens: p.transcription.unwrap_or(true),
                voice_replies: p.voice_replies,
                user_id,
            })
        })
        .collect();
    Personas::new(list, matrix, store)
}

/// How turns run: `[bot]`, `[llm]` and `[limits]`.
pub fn turn_limits(settings: &Settings) -> turn::Limits {
    let (bot, l) = (&settings.config.bot, &settings.config.limits);
    turn::Limits {
        key: bot.writer_key,
        history_chars: bot.history_chars,
        bounds: agent::Bounds {
            max_rounds: settings.config.llm.max_rounds,
            calls_per_round: l.tool_calls_per_round as usize,
        },
        writes_per_turn: l.writes_per_turn,
        deadline: Duration::from_secs(l.turn_deadline_secs),
        delivery_deadline: Duration::from_secs(bot.delivery_deadline_secs),
    }
}

/// The token budgets of `[limits]`, counted as `[budget]` says.
pub fn budget(settings: &Settings) -> budget::Budget {
    let l = &settings.config.limits;
    let budgets = store::Budgets {
        per_user: l.tokens_per_user_per_day,
        per_room: l.tokens_per_room_per_day,
        total: l.tokens_per_day,
    };
    // Reserved before each call: the largest answer any persona's endpoint may give.
    let max_tokens = settings.endpoints.iter().map(|e| e.max_tokens).fold(settings.config.llm.max_tokens, u32::max);
    budget::Budget::new(budgets, settings.exempt.clone(), max_tokens)
        .with_cached_weight(settings.config.budget.cached_token_weight)
}

/// When the personas answer, and how often: `[bot]`, `[access]` and `[limits]`.
pub fn room_policy(settings: &Settings) -> room::Policy {
    let (bot, l) = (&settings.config.bot, &settings.config.limits);
    room::Policy {
        staleness_ms: i64::try_from(bot.staleness_secs.saturating_mul(1000)).unwrap_or(i64::MAX),
        group_requires_mention: bot.group_requires_mention,
        access: settings.access.clone(),
        rates: room::Rates {
            per_room_per_minute: l.turns_per_room_per_minute,
            per_asker_per_minute: l.turns_per_user_per_minute,
            cooldown_secs: l.loop_cooldown_secs,
            exempt: settings.exempt.clone(),
        },
        leave_encrypted: bot.encrypted_rooms == crate::config::EncryptedRooms::Leave,
        rooms_per_inviter: l.rooms_per_inviter,
        rooms_total: l.rooms_total,
        coalesce_ms: bot.coalesce_ms,
    }
}

/// The personas' crypto, when `[encryption]` is on and the registration has what it needs
/// (else the fix is logged once, and a persona in an encrypted room says it cannot read it).
pub fn crypto(
    settings: &Settings,
    store: &store::Store,
    matrix: &matrix::Client,
    personas: &Personas,
    sharing: Option<crate::crypto::Sharing>,
    queue: std::sync::Arc<queue::RoomQueue>,
) -> Option<crate::crypto::Crypto> {
    let e = &settings.config.encryption;
    if !e.enabled {
        tracing::info!("end-to-end encryption is off ([encryption] enabled = false): encrypted rooms are not read");
        return None;
    }
    if !settings.crypto_missing.is_empty() {
        tracing::warn!(
            registration = %settings.config.appservice.registration.display(),
            add = %settings.crypto_missing.join(", "),
            "encrypted rooms are not read: the registration lacks what end-to-end encryption needs; add these \
             lines to it (and give the homeserver the new copy), then restart both"
        );
        return None;
    }
    let ids: Vec<OwnedUserId> = personas.all().iter().map(|p| p.user_id.clone()).collect();
    let wait = Duration::from_secs(e.wait_for_key_secs);
    Some(crate::crypto::Crypto::new(store.clone(), matrix.clone(), &ids, wait, sharing, Some(queue)))
}

/// What turns need of schedules: `[schedules]`, `bot.timezone`, and the ticker to wake.
pub fn schedule_kit(settings: &Settings, ticker: crate::schedules::Ticker) -> crate::turn::ScheduleKit {
    let timezone = settings.config.bot.timezone.as_deref().and_then(|z| crate::schedules::when::zone(z).ok());
    crate::turn::ScheduleKit { ticker: Some(ticker), bounds: settings.config.schedules.bounds(), timezone }
}

/// What turns hear and say: `[transcription]` and `[speech]`, each when its `base_url`
/// is set, with the keys `config` read.
pub fn voice(settings: &Settings) -> crate::speech::Voice {
    use crate::speech::{Endpoint, Listening, Speaking};
    let (t, s, keys) = (&settings.config.transcription, &settings.config.speech, &settings.audio_keys);
    let listening = t.base_url.as_deref().map(|url| Listening {
        endpoint: Endpoint::new(url, &t.model, keys.transcription.clone(), Duration::from_secs(t.timeout_secs)),
        max_seconds: t.max_seconds,
        max_bytes: t.max_bytes,
        seconds_per_day: settings.config.budget.audio_seconds_per_day,
    });
    let speaking = s.base_url.as_deref().map(|url| Speaking {
        endpoint: Endpoint::new(url, &s.model, keys.speech.clone(), Duration::from_secs(s.timeout_secs)),
        voice: s.voice.clone(),
        format: s.format.clone(),
    });
    crate::speech::Voice { listening, speaking }
}
