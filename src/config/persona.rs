//! `[[personas]]`: the virtual users richbot posts as, as read. The key names are a
//! contract (admins' files and docs use them); `Debug` leaves the key out.

use std::path::PathBuf;

use regex::Regex;
use ruma::api::appservice::Registration;
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

impl Persona {
    /// The one persona of a config that lists none: the registration's own sender.
    pub(super) fn sender(localpart: &str) -> Self {
        Self {
            localpart: localpart.to_owned(),
            display_name: Some("richbot".to_owned()),
            system_prompt: None,
            greeting: None,
            tools: None,
            model: None,
            base_url: None,
            api_key: None,
            api_key_file: None,
            max_tokens: None,
            vision: None,
            text_tool_calls: None,
            transcription: None,
            voice_replies: false,
        }
    }
}

/// Each persona's localpart: a valid one, inside the registration's user namespace (or
/// its sender), and listed once.
pub(super) fn problems(personas: &[Persona], reg: &Registration, server_name: &str, problems: &mut Vec<String>) {
    let namespace: Vec<Regex> = reg.namespaces.users.iter().filter_map(|ns| Regex::new(&ns.regex).ok()).collect();
    for (i, p) in personas.iter().enumerate() {
        let user = format!("@{}:{server_name}", p.localpart);
        let ours = p.localpart == reg.sender_localpart || namespace.iter().any(|re| re.is_match(&user));
        if ruma::UserId::parse(&user).is_err() {
            problems.push(format!("personas[{i}].localpart: \"{}\" is not a valid Matrix localpart", p.localpart));
        } else if !ours {
            problems.push(format!(
                "personas[{i}].localpart: {user} is outside the registration's user namespace ({})",
                reg.namespaces.users.iter().map(|n| n.regex.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    let mut seen = std::collections::HashSet::new();
    for (i, p) in personas.iter().enumerate() {
        if !seen.insert(&p.localpart) {
            problems.push(format!("personas[{i}].localpart: \"{}\" is listed twice", p.localpart));
        }
    }
}
