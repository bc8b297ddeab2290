//! The validated configuration: what the service runs with once every key was checked.

use std::net::SocketAddr;
use std::time::Duration;

use regex::Regex;
use ruma::api::appservice::Registration;

use super::{Config, Persona};

/// The validated configuration the service runs with. `Debug` leaves the secrets out
/// (the registration's tokens and the LLM key).
#[derive(Clone)]
pub struct Settings {
    pub config: Config,
    pub registration: Registration,
    /// The registration lines end-to-end encryption needs that the registration lacks.
    pub crypto_missing: Vec<&'static str>,
    pub listen: SocketAddr,
    pub api_key: Option<String>,
    pub personas: Vec<Persona>,
    /// Each persona's LLM endpoint, in the order of `personas`.
    pub endpoints: Vec<super::Endpoint>,
    /// `[access]`, compiled.
    pub access: crate::room::Admission,
    /// `limits.exempt`, compiled.
    pub exempt: Vec<Regex>,
    /// Who may use each `[[mcp]]` server's tools, in order.
    pub mcp_access: Vec<super::McpAccess>,
    /// `[[agents.clients]]`, checked and compiled (tokens read).
    pub agents: Vec<super::AgentClient>,
    /// `encryption.pickle_key_file`, read: what the crypto secrets are sealed with.
    pub pickle_key: Option<std::sync::Arc<crate::pickle::PickleKey>>,
    /// The keys of `[transcription]` and `[speech]`, read.
    pub audio_keys: super::AudioKeys,
    /// What is allowed but unwise (secrets readable by others), for `check` and `serve`.
    pub warnings: Vec<String>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("config", &self.config)
            .field("appservice_id", &self.registration.id)
            .field("listen", &self.listen)
            .field("personas", &self.personas)
            .finish_non_exhaustive()
    }
}

impl Settings {
    pub fn llm_timeout(&self) -> Duration {
        Duration::from_secs(self.config.llm.timeout_secs)
    }

    pub fn llm_idle_timeout(&self) -> Duration {
        Duration::from_secs(self.config.llm.idle_timeout_secs)
    }

    /// Whether `user_id` may invite and talk to the personas.
    pub fn allowed(&self, user_id: &str) -> bool {
        self.access.admits(user_id)
    }
}
