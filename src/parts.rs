//! The parts every command that talks to the outside builds the same way (`serve` through
//! `run`, and `check`): the store, the homeserver client, the personas and the LLM client,
//! from the validated settings.

use crate::config::Settings;
use crate::personas::{DEFAULT_PROMPT, Persona, Personas};
use crate::{agent, matrix, store};

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
    pub personas: Personas,
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
        let personas = personas(settings, matrix.clone(), store.clone());
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
                user_id,
            })
        })
        .collect();
    Personas::new(list, matrix, store)
}
