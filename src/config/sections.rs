//! The sections of the config file, as read: one struct per `[section]`, with defaults.
//! Each checks itself (`checks`): one line per problem, naming its key.

mod checks;

use std::path::PathBuf;

use serde::Deserialize;

use crate::blocks::WriterKey;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Where to serve `GET /metrics` (Prometheus text); off when unset.
    #[serde(default)]
    pub listen: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Homeserver {
    /// Client-server API base, e.g. `http://127.0.0.1:8008`.
    pub url: String,
    /// The homeserver's server name (the part after `:` in user ids).
    pub server_name: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Appservice {
    /// Path of the registration file the homeserver was given.
    pub registration: PathBuf,
    /// Where the homeserver reaches us.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// Largest transaction body accepted (Synapse sends up to 100 events of up to 64 KiB).
    #[serde(default = "default_max_body")]
    pub max_body_bytes: usize,
    /// Transactions handled at once; more get 503 with `Retry-After`.
    #[serde(default = "default_concurrent")]
    pub max_concurrent_transactions: usize,
    /// Connections open at once (at most half the open-file limit); more are closed at once.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// The homeserver reaches richbot through a load balancer or proxy at the
    /// registration's `url` (several instances), so `listen` need not be that address.
    #[serde(default)]
    pub behind_proxy: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Database {
    #[serde(default = "default_db")]
    pub url: String,
    /// SQLite's `synchronous`: with `full` (default) a transaction answered 200 survives
    /// power loss; `normal` survives a crash of richbot but may lose the last
    /// transactions to power loss, for less disk work.
    #[serde(default)]
    pub synchronous: Synchronous,
}

/// SQLite's durability setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Synchronous {
    #[default]
    Full,
    Normal,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Llm {
    /// OpenAI-compatible API base including `/v1`.
    pub base_url: String,
    pub model: String,
    #[serde(default)]
    pub api_key: Option<String>,
    #[serde(default)]
    pub api_key_file: Option<PathBuf>,
    /// Bounds an unstreamed call's attempt, and a streamed call up to its first event.
    #[serde(default = "default_llm_timeout")]
    pub timeout_secs: u64,
    /// Most silence between two events of a streamed answer.
    #[serde(default = "default_llm_idle_timeout")]
    pub idle_timeout_secs: u64,
    /// Tool rounds per turn at most.
    #[serde(default = "default_rounds")]
    pub max_rounds: u32,
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    /// Ask for streamed answers and show them live (an endpoint that refuses is asked
    /// without streaming from then on).
    #[serde(default = "default_true")]
    pub stream: bool,
    /// The model sees pictures (members' images reach it); `false` names them instead,
    /// and the member is told once. A persona may say otherwise (`[[personas]] vision`).
    #[serde(default = "default_true")]
    pub vision: bool,
    /// Chat completions in flight at once, across all rooms (LLM calls are I/O: this, not
    /// `bot.max_parallel_rooms`, is what keeps a provider's concurrency limit).
    #[serde(default = "default_llm_concurrency")]
    pub max_concurrent_requests: usize,
    /// Tool calls the model writes as text (a fenced JSON call, `<tool_call>`, a tag named
    /// after a tool) are read as calls; `false` leaves its text as it is. A persona may say
    /// otherwise (`[[personas]] text_tool_calls`).
    #[serde(default = "default_true")]
    pub text_tool_calls: bool,
}

impl std::fmt::Debug for Llm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Llm")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout_secs", &self.timeout_secs)
            .field("max_rounds", &self.max_rounds)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bot {
    /// Content key payloads are written under.
    #[serde(default)]
    pub writer_key: WriterKey,
    /// Rooms whose turns may run at once.
    #[serde(default = "default_parallel")]
    pub max_parallel_rooms: usize,
    /// Events older than this (catching up after downtime) are kept as history only.
    #[serde(default = "default_staleness")]
    pub staleness_secs: u64,
    /// Least time between two writes (send, edits) to one message.
    #[serde(default = "default_edit_interval")]
    pub edit_interval_ms: u64,
    /// A member's picture or file waits this long for their next words (Element sends the
    /// question as a second message), so both are one turn; 0: no wait.
    #[serde(default = "default_coalesce")]
    pub coalesce_ms: u64,
    /// Characters of room history given to the model.
    #[serde(default = "default_history")]
    pub history_chars: usize,
    /// In group rooms, answer only when addressed (mention, reply, thread). When false,
    /// the bot answers every message in group rooms too.
    #[serde(default = "default_true")]
    pub group_requires_mention: bool,
    /// In an encrypted room it cannot read (`[encryption]` off, or the homeserver does not
    /// send what encryption needs) a persona says so once, then `leave`s (default) or
    /// `stay`s silent.
    #[serde(default)]
    pub encrypted_rooms: EncryptedRooms,
    /// An answer the homeserver would not take (down) is retried this long, then given up
    /// and the person told.
    #[serde(default = "default_delivery_deadline")]
    pub delivery_deadline_secs: u64,
    /// Days of room history (and what derives from it: turns, sent messages) kept.
    #[serde(default = "default_history_days")]
    pub history_days: u64,
    /// On SIGTERM, how long running turns may take to finish before richbot exits (the
    /// rest resume at the next start).
    #[serde(default = "default_shutdown_grace")]
    pub shutdown_grace_secs: u64,
    /// Several instances on one PostgreSQL: how long a room stays with the instance
    /// handling it without word from it (renewed while it works), so a dead instance's
    /// rooms go to another after at most this long.
    #[serde(default = "default_lease")]
    pub lease_secs: u64,
    /// The IANA zone members' times are written in unless they set their own
    /// (`!timezone`); unset, times are UTC and the model is told no zone.
    #[serde(default)]
    pub timezone: Option<String>,
}

/// What a persona does in an encrypted room.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EncryptedRooms {
    #[default]
    Leave,
    Stay,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Access {
    /// Who may invite and talk to the bot: full user ids, or patterns with `*`
    /// (`*:example.org`). Empty: users of this homeserver only.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Refused whatever `allow` says: full ids or patterns with `*`.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Other appservices' registration files: their exclusive user namespaces (bridged
    /// puppets, other bots) are refused.
    #[serde(default)]
    pub other_registrations: Vec<PathBuf>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Logging {
    /// `human` (default) or `json`.
    #[serde(default)]
    pub format: Option<String>,
    /// A tracing filter, e.g. `richbot=debug,info`.
    #[serde(default)]
    pub filter: Option<String>,
}

fn default_listen() -> String {
    "127.0.0.1:9009".to_owned()
}
fn default_max_body() -> usize {
    16 * 1024 * 1024
}
fn default_history_days() -> u64 {
    30
}
fn default_coalesce() -> u64 {
    3_000
}

fn default_delivery_deadline() -> u64 {
    3600
}
fn default_shutdown_grace() -> u64 {
    20
}
fn default_lease() -> u64 {
    30
}
fn default_max_connections() -> usize {
    crate::appservice::DEFAULT_MAX_CONNECTIONS
}
fn default_concurrent() -> usize {
    4
}
fn default_db() -> String {
    "sqlite://richbot.db".to_owned()
}
fn default_llm_idle_timeout() -> u64 {
    30
}

fn default_llm_timeout() -> u64 {
    60
}
fn default_rounds() -> u32 {
    8
}
/// Enough for a rich message with a table or a chart and its fallback; a model that
/// loops stops here rather than at thousands of tokens (minutes on a CPU).
fn default_max_tokens() -> u32 {
    1024
}
fn default_parallel() -> usize {
    1024
}
fn default_llm_concurrency() -> usize {
    1024
}
fn default_staleness() -> u64 {
    300
}
fn default_edit_interval() -> u64 {
    2500
}
fn default_history() -> usize {
    12_000
}
pub(super) fn default_true() -> bool {
    true
}

impl Default for Database {
    fn default() -> Self {
        Self { url: default_db(), synchronous: Synchronous::default() }
    }
}

impl Default for Bot {
    fn default() -> Self {
        Self {
            writer_key: WriterKey::default(),
            max_parallel_rooms: default_parallel(),
            staleness_secs: default_staleness(),
            edit_interval_ms: default_edit_interval(),
            coalesce_ms: default_coalesce(),
            history_chars: default_history(),
            group_requires_mention: true,
            encrypted_rooms: EncryptedRooms::default(),
            delivery_deadline_secs: default_delivery_deadline(),
            history_days: default_history_days(),
            shutdown_grace_secs: default_shutdown_grace(),
            lease_secs: default_lease(),
            timezone: None,
        }
    }
}
