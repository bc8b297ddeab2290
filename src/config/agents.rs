//! `[agents]`: checked at start like the rest, one line per problem naming its key (a
//! short or placeholder token, an unknown persona, a bad pattern), and compiled into the
//! clients the agents' channel runs with.

use std::net::SocketAddr;

use super::Persona;
use super::endpoints::Found;
use crate::channel::{AgentsConfig, Client};

/// Fewest characters in a client's token.
pub const MIN_TOKEN_CHARS: usize = 32;

/// Words that mark a token copied from an example rather than made.
const PLACEHOLDERS: [&str; 8] =
    ["changeme", "change-me", "change_me", "placeholder", "example", "your-token", "your_token", "xxxxxxxx"];

/// Checks `[agents]`; returns its clients, compiled.
pub(super) fn validate(
    agents: &AgentsConfig,
    personas: &[Persona],
    server_name: &str,
    found: &mut Found<'_>,
) -> Vec<Client> {
    if let Some(addr) = &agents.listen
        && addr.parse::<SocketAddr>().is_err()
    {
        found.problems.push(format!("agents.listen: must be an address like 127.0.0.1:9300 (got \"{addr}\")"));
    }
    if !(1..=8_760).contains(&agents.idempotency_hours) {
        found.problems.push("agents.idempotency_hours: must be 1-8760".to_owned());
    }
    if agents.listen.is_some() && agents.clients.is_empty() {
        found
            .warnings
            .push("agents.listen is set but there is no [[agents.clients]]: every call is refused".to_owned());
    }
    let mut names = std::collections::HashSet::new();
    let mut tokens = std::collections::HashSet::new();
    let mut out = Vec::new();
    for (i, c) in agents.clients.iter().enumerate() {
        let at = |key: &str| format!("agents.clients[{i}].{key}");
        let valid = !c.name.is_empty() && c.name.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_');
        if !valid || c.name.len() > 32 {
            found.problems.push(format!("{}: \"{}\" must be 1-32 of A-Z a-z 0-9 _ -", at("name"), c.name));
        } else if !names.insert(c.name.clone()) {
            found.problems.push(format!("{}: \"{}\" is used by two clients", at("name"), c.name));
        }
        let token = token(c, i, found);
        if let Some(t) = &token
            && !tokens.insert(t.clone())
        {
            found.problems.push(format!("{}: two clients have the same token", at("token")));
        }
        if !personas.iter().any(|p| p.localpart == c.persona) {
            let known: Vec<&str> = personas.iter().map(|p| p.localpart.as_str()).collect();
            found.problems.push(format!(
                "{}: \"{}\" is not a persona's localpart (personas: {})",
                at("persona"),
                c.persona,
                known.join(", ")
            ));
        }
        for (key, list, sigils) in [("rooms", &c.rooms, ['!', '#']), ("users", &c.users, ['@', '*'])] {
            for (n, p) in list.iter().enumerate() {
                if !p.starts_with(sigils) || p.contains(char::is_whitespace) {
                    let what = if key == "rooms" {
                        "a room id (!...), an alias (#...) or \"!*\""
                    } else {
                        "a user id (@...) or a pattern like \"*:example.org\""
                    };
                    found.problems.push(format!("{}[{n}]: \"{p}\" must be {what}", at(key)));
                }
            }
        }
        if c.writes_per_minute == 0 {
            found.problems.push(format!("{}: must be at least 1", at("writes_per_minute")));
        }
        let rooms = super::mcp::patterns(&at("rooms"), &c.rooms, found.problems);
        let users = super::mcp::patterns(&at("users"), &c.users, found.problems);
        let persona = ruma::UserId::parse(format!("@{}:{server_name}", c.persona));
        if let (Some(token), Ok(persona)) = (token, persona) {
            out.push(Client {
                name: c.name.clone(),
                token,
                persona,
                rooms: c.rooms.iter().cloned().zip(rooms).collect(),
                users: c.users.iter().cloned().zip(users).collect(),
                writes_per_minute: c.writes_per_minute,
            });
        }
    }
    out
}

/// The client's token, from `token` or `token_file`, if it is one a client could be given.
fn token(c: &crate::channel::ClientConfig, i: usize, found: &mut Found<'_>) -> Option<String> {
    let at = |key: &str| format!("agents.clients[{i}].{key}");
    let (token, key) = match (&c.token, &c.token_file) {
        (Some(t), None) => (t.trim().to_owned(), at("token")),
        (None, Some(file)) => (super::endpoints::secret_file(&at("token_file"), file, found)?, at("token_file")),
        (Some(_), Some(_)) => {
            found.problems.push(format!("agents.clients[{i}]: set token or token_file, not both"));
            return None;
        }
        (None, None) => {
            found
                .problems
                .push(format!("{}: set token (at least {MIN_TOKEN_CHARS} characters) or token_file", at("token")));
            return None;
        }
    };
    let lower = token.to_lowercase();
    let distinct = token.chars().collect::<std::collections::HashSet<_>>().len();
    if token.chars().count() < MIN_TOKEN_CHARS {
        found.problems.push(format!(
            "{key}: the token must be at least {MIN_TOKEN_CHARS} characters (make one with: openssl rand -hex 32)"
        ));
        None
    } else if PLACEHOLDERS.iter().any(|p| lower.contains(p)) || distinct < 8 || token.contains(['<', '>']) {
        found.problems.push(format!("{key}: the token is a placeholder; make one with: openssl rand -hex 32"));
        None
    } else if token.chars().any(|ch| ch.is_whitespace() || ch.is_control()) {
        found.problems.push(format!("{key}: the token must not contain spaces"));
        None
    } else {
        Some(token)
    }
}
