//! Configuration: one TOML file, every key overridable from the environment, validated at
//! start so that a bad deployment fails with one line per problem, naming the key.
//!
//! Environment overrides use `RICHBOT__SECTION__KEY=value` (double underscores between
//! path parts, array items by index: `RICHBOT__PERSONAS__0__DISPLAY_NAME`). Values that
//! parse as TOML scalars (numbers, booleans) are taken as such, anything else as a string.
//! The LLM key may also come from `OPENAI_API_KEY` or a file (`llm.api_key_file`).
//! Secrets are never printed: `Debug` on the secret fields is redacted.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::blocks::WriterKey;

mod cross;
mod env;
mod limits;
mod settings;
mod validate;

pub use limits::Limits;
pub use settings::Settings;

/// The environment prefix for overrides.
pub const ENV_PREFIX: &str = "RICHBOT__";

/// A configuration that could not be loaded; each line names a key.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{}", .0.join("\n"))]
    Invalid(Vec<String>),
}

/// The whole configuration, as read (before validation).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub homeserver: Homeserver,
    pub appservice: Appservice,
    #[serde(default)]
    pub database: Database,
    pub llm: Llm,
    #[serde(default)]
    pub bot: Bot,
    #[serde(default)]
    pub personas: Vec<Persona>,
    #[serde(default)]
    pub access: Access,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub logging: Logging,
    #[serde(default)]
    pub metrics: MetricsConfig,
}

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
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Database {
    #[serde(default = "default_db")]
    pub url: String,
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
    #[serde(default = "default_llm_timeout")]
    pub timeout_secs: u64,
    /// Tool rounds per turn at most.
    #[serde(default = "default_rounds")]
    pub max_rounds: u32,
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
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
    /// Characters of room history given to the model.
    #[serde(default = "default_history")]
    pub history_chars: usize,
    /// In group rooms, answer only when addressed (mention, reply, thread). When false,
    /// the bot answers every message in group rooms too.
    #[serde(default = "default_true")]
    pub group_requires_mention: bool,
    /// In an encrypted room (which richbot cannot read yet) a persona says so once, then
    /// `leave`s (default) or `stay`s silent.
    #[serde(default)]
    pub encrypted_rooms: EncryptedRooms,
}

/// What a persona does in an encrypted room.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EncryptedRooms {
    #[default]
    Leave,
    Stay,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Persona {
    pub localpart: String,
    #[serde(default)]
    pub display_name: Option<String>,
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// Posted when the persona joins a room, if set.
    #[serde(default)]
    pub greeting: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Access {
    /// Who may invite and talk to the bot: full user ids, or patterns with `*`
    /// (`*:example.org`). Empty: users of this homeserver only.
    #[serde(default)]
    pub allow: Vec<String>,
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
fn default_db() -> String {
    "sqlite://richbot.db".to_owned()
}
fn default_llm_timeout() -> u64 {
    60
}
fn default_rounds() -> u32 {
    8
}
fn default_max_tokens() -> u32 {
    2048
}
fn default_parallel() -> usize {
    8
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
fn default_true() -> bool {
    true
}

impl Default for Database {
    fn default() -> Self {
        Self { url: default_db() }
    }
}

impl Default for Bot {
    fn default() -> Self {
        Self {
            writer_key: WriterKey::default(),
            max_parallel_rooms: default_parallel(),
            staleness_secs: default_staleness(),
            edit_interval_ms: default_edit_interval(),
            history_chars: default_history(),
            group_requires_mention: true,
            encrypted_rooms: EncryptedRooms::default(),
        }
    }
}

/// Reads a config file as written, without validating it or applying the environment (for
/// `generate-registration --config`, which needs only its listen address and server name).
pub fn read_unchecked(path: &Path) -> Result<Config, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read { path: path.to_owned(), source })?;
    toml::from_str(&text).map_err(|e| Error::Parse { path: path.to_owned(), message: e.message().to_owned() })
}

/// Reads `path`, applies environment overrides from `env`, and validates.
pub fn load(path: &Path, env: impl IntoIterator<Item = (String, String)>) -> Result<Settings, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read { path: path.to_owned(), source })?;
    let base = path.parent().unwrap_or(Path::new("."));
    from_str(&text, path, base, env)
}

/// Like [`load`], from text; relative paths in it are taken from `base`.
pub fn from_str(
    text: &str,
    path: &Path,
    base: &Path,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<Settings, Error> {
    let parse_err = |message: String| Error::Parse { path: path.to_owned(), message };
    let mut value: toml::Value = toml::from_str(text).map_err(|e| parse_err(e.to_string()))?;
    let mut openai_key = None;
    for (key, val) in env {
        if key == "OPENAI_API_KEY" {
            openai_key = Some(val);
        } else if let Some(rest) = key.strip_prefix(ENV_PREFIX) {
            let parts: Vec<String> = rest.split("__").map(str::to_lowercase).collect();
            env::set_path(&mut value, &parts, &val).map_err(|m| parse_err(format!("{key}: {m}")))?;
        }
    }
    let mut config: Config = value.try_into().map_err(|e: toml::de::Error| parse_err(e.message().to_owned()))?;
    if config.appservice.registration.is_relative() {
        config.appservice.registration = base.join(&config.appservice.registration);
    }
    validate::validate(config, base, openai_key)
}
