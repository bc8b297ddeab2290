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

mod agents;
mod cross;
mod encryption;
mod media;
mod endpoints;
mod env;
mod limits;
mod mcp;
mod persona;
mod schedules;
mod speech;
mod sections;
mod settings;
mod validate;

pub use crate::channel::Client as AgentClient;
pub use crate::mcp::McpServer;
pub use crate::tools::registry::Access as McpAccess;
pub use agents::MIN_TOKEN_CHARS;
pub use encryption::Encryption;
pub use endpoints::Endpoint;
pub use limits::{BudgetConfig, Limits};
pub use media::MediaConfig;
pub use persona::Persona;
pub use schedules::SchedulesConfig;
pub use sections::{
    Access, Appservice, Bot, Database, EncryptedRooms, Homeserver, Llm, Logging, MetricsConfig, Synchronous,
};
pub use settings::Settings;
pub use speech::{AudioKeys, Speech, Transcription};

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
    pub budget: BudgetConfig,
    #[serde(default)]
    pub logging: Logging,
    #[serde(default)]
    pub metrics: MetricsConfig,
    #[serde(default)]
    pub encryption: Encryption,
    #[serde(default)]
    pub mcp: Vec<McpServer>,
    #[serde(default)]
    pub agents: crate::channel::AgentsConfig,
    #[serde(default)]
    pub media: MediaConfig,
    #[serde(default)]
    pub schedules: SchedulesConfig,
    #[serde(default)]
    pub transcription: Transcription,
    #[serde(default)]
    pub speech: Speech,
}

/// Reads a config file as written, without validating it or applying the environment (for
/// `generate-registration --config`, which needs only its listen address and server name).
pub fn read_unchecked(path: &Path) -> Result<Config, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read { path: path.to_owned(), source })?;
    toml::from_str(&text).map_err(|e| Error::Parse { path: path.to_owned(), message: env::syntax_error(&text, &e) })
}

/// Reads `path`, applies environment overrides from `env`, and validates.
pub fn load(path: &Path, env: impl IntoIterator<Item = (String, String)>) -> Result<Settings, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read { path: path.to_owned(), source })?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut settings = from_str(&text, path, base, env)?;
    let c = &settings.config;
    let secrets = c.llm.api_key.is_some()
        || c.personas.iter().any(|p| p.api_key.is_some())
        || c.mcp.iter().any(|m| !m.env.is_empty())
        || c.agents.clients.iter().any(|a| a.token.is_some());
    if crate::private_files::readable_by_others(path) && secrets {
        settings.warnings.push(format!(
            "{} holds API keys (an api_key, an [[mcp]] env or an agent client's token) and is readable by other users; chmod 600 it",
            path.display()
        ));
    }
    Ok(settings)
}

/// Like [`load`], from text; relative paths in it are taken from `base`.
pub fn from_str(
    text: &str,
    path: &Path,
    base: &Path,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<Settings, Error> {
    let parse_err = |message: String| Error::Parse { path: path.to_owned(), message };
    let mut value: toml::Value = toml::from_str(text).map_err(|e| parse_err(env::syntax_error(text, &e)))?;
    let mut openai_key = None;
    let mut overrides = Vec::new();
    for (key, val) in env {
        if key == "OPENAI_API_KEY" {
            openai_key = Some(val);
        } else if let Some(rest) = key.strip_prefix(ENV_PREFIX) {
            let parts: Vec<String> = rest.split("__").map(str::to_lowercase).collect();
            let typed = env::set_path(&mut value, &parts, &val).map_err(|m| parse_err(format!("{key}: {m}")))?;
            if typed {
                overrides.push((parts, val));
            }
        }
    }
    let mut config: Config = env::typed(value, &overrides).map_err(parse_err)?;
    if config.appservice.registration.is_relative() {
        config.appservice.registration = base.join(&config.appservice.registration);
    }
    validate::validate(config, base, openai_key)
}
