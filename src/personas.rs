//! The personas: the virtual users the bot speaks as. Registered with the homeserver
//! (`m.login.application_service`, no device; `M_USER_IN_USE` counts as done) at start
//! and on demand when the homeserver asks about one, then given their display name.

use std::sync::Arc;

use ruma::{OwnedUserId, UserId};

use crate::clock::now_ms;
use crate::matrix;
use crate::store::Store;

/// One persona.
#[derive(Debug, Clone)]
pub struct Persona {
    pub user_id: OwnedUserId,
    pub display_name: String,
    pub system_prompt: String,
    pub greeting: Option<String>,
    /// The `[[mcp]]` servers (by name) whose tools it offers; all when `None`.
    pub tools: Option<Vec<String>>,
    /// Its model sees pictures (`vision`).
    pub vision: bool,
    /// Its members' voice messages are transcribed (`transcription`, true unless off).
    pub listens: bool,
    /// It answers a voice message with a voice message too (`voice_replies`).
    pub voice_replies: bool,
}

/// Why a persona could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("homeserver: {0}")]
    Matrix(#[from] matrix::Error),
    #[error("store: {0}")]
    Store(#[from] crate::store::Error),
}

/// The configured personas.
#[derive(Debug, Clone)]
pub struct Personas {
    list: Arc<Vec<Persona>>,
    matrix: matrix::Client,
    store: Store,
}

/// The system prompt of a persona that has none configured.
pub const DEFAULT_PROMPT: &str = "You are a helpful assistant in a Matrix chat. Answer briefly and clearly.";

impl Personas {
    /// The personas, as configured (`assemble::personas` builds the list from the config).
    pub fn new(list: Vec<Persona>, matrix: matrix::Client, store: Store) -> Self {
        Self { list: Arc::new(list), matrix, store }
    }

    pub fn all(&self) -> &[Persona] {
        &self.list
    }

    pub fn get(&self, user: &UserId) -> Option<&Persona> {
        self.list.iter().find(|p| p.user_id == user)
    }

    pub fn is_persona(&self, user: &UserId) -> bool {
        self.get(user).is_some()
    }

    /// Registers the persona and sets its display name, once.
    pub async fn ensure_registered(&self, user: &UserId) -> Result<(), Error> {
        let Some(persona) = self.get(user) else { return Ok(()) };
        if self.store.persona_registered(user).await? {
            return Ok(());
        }
        self.matrix.register(user.localpart()).await?;
        self.matrix.set_display_name(user, &persona.display_name).await?;
        self.store.mark_persona_registered(user, now_ms()).await?;
        tracing::info!(%user, "persona registered");
        Ok(())
    }

    /// Registers every persona (at start).
    pub async fn register_all(&self) -> Result<(), Error> {
        for p in self.list.iter() {
            self.ensure_registered(&p.user_id).await?;
        }
        Ok(())
    }
}
