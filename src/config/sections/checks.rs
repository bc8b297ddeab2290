//! What each section of `sections` checks of itself: one line per problem, naming its
//! key, so that `validate` lists every problem of a file at once. What needs two sections
//! (the registration against `[appservice]`, the access patterns against the namespace)
//! is `cross.rs`'s.

use super::{Appservice, Bot, Database, Homeserver, Llm, Logging, MetricsConfig};

/// Whether `url` is an http(s) URL.
fn http(url: &str) -> bool {
    url.starts_with("http://") || url.starts_with("https://")
}

impl Homeserver {
    pub(in crate::config) fn problems(&self, problems: &mut Vec<String>) {
        if !http(&self.url) {
            let shown = crate::url_mask::url(&self.url);
            problems.push(format!("homeserver.url: must be an http(s) URL (got \"{shown}\")"));
        }
        if self.server_name.is_empty() || self.server_name.contains(['/', ' ', '@']) {
            problems.push("homeserver.server_name: must be the homeserver's server name, e.g. example.org".to_owned());
        }
    }
}

impl Appservice {
    /// The address to listen on, if `listen` is one (else a problem).
    pub(in crate::config) fn checked(&self, problems: &mut Vec<String>) -> Option<std::net::SocketAddr> {
        let listen = self.listen.parse().ok();
        if listen.is_none() {
            problems
                .push(format!("appservice.listen: must be an address like 127.0.0.1:9009 (got \"{}\")", self.listen));
        }
        if self.max_body_bytes < 64 * 1024 {
            problems.push("appservice.max_body_bytes: must be at least 65536 (one Matrix event)".to_owned());
        }
        listen
    }
}

impl Database {
    pub(in crate::config) fn problems(&self, problems: &mut Vec<String>) {
        if !self.url.starts_with("sqlite:") && crate::store::Backend::of(&self.url) != crate::store::Backend::Postgres {
            problems.push(format!(
                "database.url: must be a sqlite: URL like sqlite://richbot.db or a postgres:// URL (got \"{}\")",
                crate::store::shown_url(&self.url)
            ));
        }
    }
}

impl Llm {
    pub(in crate::config) fn problems(&self, problems: &mut Vec<String>) {
        if !http(&self.base_url) {
            let shown = crate::url_mask::url(&self.base_url);
            problems.push(format!("llm.base_url: must be an http(s) URL ending in /v1 (got \"{shown}\")"));
        }
        if self.model.trim().is_empty() {
            problems.push("llm.model: must not be empty".to_owned());
        }
        for (key, value) in [
            ("timeout_secs", self.timeout_secs),
            ("idle_timeout_secs", self.idle_timeout_secs),
            ("max_concurrent_requests", self.max_concurrent_requests as u64),
        ] {
            if value == 0 {
                problems.push(format!("llm.{key}: must be at least 1"));
            }
        }
        if !(1..=32).contains(&self.max_rounds) {
            problems.push("llm.max_rounds: must be 1-32".to_owned());
        }
    }
}

impl Bot {
    pub(in crate::config) fn problems(&self, problems: &mut Vec<String>) {
        if self.history_days == 0 {
            problems.push("bot.history_days: must be at least 1".to_owned());
        }
        if self.coalesce_ms > crate::room::MAX_COALESCE_MS {
            problems.push(format!(
                "bot.coalesce_ms: must be at most {} (a picture's wait for its words holds its asker's turn)",
                crate::room::MAX_COALESCE_MS
            ));
        }
        if self.lease_secs < 3 {
            problems.push("bot.lease_secs: must be at least 3 (a lease is renewed every third of it)".to_owned());
        }
        if self.max_parallel_rooms == 0 {
            problems.push("bot.max_parallel_rooms: must be at least 1".to_owned());
        }
    }
}

impl MetricsConfig {
    pub(in crate::config) fn problems(&self, problems: &mut Vec<String>) {
        if let Some(addr) = &self.listen
            && addr.parse::<std::net::SocketAddr>().is_err()
        {
            problems.push(format!("metrics.listen: must be an address like 127.0.0.1:9100 (got \"{addr}\")"));
        }
    }
}

impl Logging {
    pub(in crate::config) fn problems(&self, problems: &mut Vec<String>) {
        if !matches!(self.format.as_deref(), None | Some("human" | "json")) {
            problems.push("logging.format: must be \"human\" or \"json\"".to_owned());
        }
    }
}
