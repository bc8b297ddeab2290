//! `[[personas]]`: the virtual users richbot posts as, as read. The key names are a
//! contract (admins' files and docs use them); `Debug` leaves the key out.

use std::path::PathBuf;

use serde::Deserialize;

#[derive(Clone, Deserialize)]
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
    /// The `[[mcp]]` servers (by name) whose tools this persona offers; all when unset.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// Its own LLM endpoint, each key falling back to `[llm]` (see `endpoints.rs`).
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub api_key: Option<String>,
    #[serde(default)]
    pub api_key_file: Option<PathBuf>,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Whether its model sees pictures; `[llm] vision` when unset.
    #[serde(default)]
    pub vision: Option<bool>,
    /// Whether calls its model writes as text are read as calls; `[llm] text_tool_calls`
    /// when unset.
    #[serde(default)]
    pub text_tool_calls: Option<bool>,
    /// Whether its members' voice messages are transcribed (`[transcription]` set); true
    /// when unset.
    #[serde(default)]
    pub transcription: Option<bool>,
    /// Whether it answers a voice message with a voice message too (`[speech]` set).
    #[serde(default)]
    pub voice_replies: bool,
}

impl std::fmt::Debug for Persona {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Persona")
            .field("localpart", &self.localpart)
            .field("display_name", &self.display_name)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}
