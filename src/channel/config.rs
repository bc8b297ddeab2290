//! `[agents]` and `[[agents.clients]]` as read from the config file (the key names are a
//! contract: admins' files and the docs use them), and a client as richbot runs it,
//! once `config` has checked it (token read, patterns compiled, persona known).

use std::path::PathBuf;

use regex::Regex;
use ruma::OwnedUserId;
use serde::Deserialize;

/// `[agents]`: the channel other agents post through; off while `listen` is unset.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentsConfig {
    /// Its own address (like `[metrics]`), for `POST /mcp` and `/v1/...`.
    #[serde(default)]
    pub listen: Option<String>,
    /// How long a call's idempotency key is remembered.
    #[serde(default = "default_hours")]
    pub idempotency_hours: u64,
    #[serde(default)]
    pub clients: Vec<ClientConfig>,
}

impl Default for AgentsConfig {
    fn default() -> Self {
        Self { listen: None, idempotency_hours: default_hours(), clients: Vec::new() }
    }
}

fn default_hours() -> u64 {
    24
}

/// One `[[agents.clients]]` entry. `Debug` leaves the token out.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    pub name: String,
    #[serde(default)]
    pub token: Option<String>,
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// The persona (its localpart) the client posts as.
    pub persona: String,
    /// Where it may post: room ids, aliases, patterns with `*` (`"!*"`: any room the
    /// persona is joined to).
    #[serde(default)]
    pub rooms: Vec<String>,
    /// Whom it may message directly: user ids or patterns (`"*:example.org"`).
    #[serde(default)]
    pub users: Vec<String>,
    #[serde(default = "default_writes")]
    pub writes_per_minute: u32,
}

fn default_writes() -> u32 {
    30
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConfig")
            .field("name", &self.name)
            .field("token_file", &self.token_file)
            .field("persona", &self.persona)
            .field("rooms", &self.rooms)
            .field("users", &self.users)
            .field("writes_per_minute", &self.writes_per_minute)
            .finish_non_exhaustive()
    }
}

/// A client as richbot runs it. `Debug` leaves the token out.
#[derive(Clone)]
pub struct Client {
    pub name: String,
    pub token: String,
    pub persona: OwnedUserId,
    /// `rooms`, as written and compiled.
    pub rooms: Vec<(String, Regex)>,
    /// `users`, as written and compiled.
    pub users: Vec<(String, Regex)>,
    pub writes_per_minute: u32,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("name", &self.name).field("persona", &self.persona).finish_non_exhaustive()
    }
}

impl Client {
    /// Whether the client may post in the room named `name` (as the caller wrote it)
    /// that is `room` (its id).
    pub fn may_post(&self, name: &str, room: &str) -> bool {
        self.rooms.iter().any(|(_, re)| re.is_match(name) || re.is_match(room))
    }

    /// Whether the client may message `user` directly.
    pub fn may_message(&self, user: &str) -> bool {
        self.users.iter().any(|(_, re)| re.is_match(user))
    }
}
