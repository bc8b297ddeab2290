//! Validation of a parsed config: every problem becomes one line naming its key, so a
//! bad deployment fails at start with the whole list, not one error per restart.

use std::net::SocketAddr;
use std::path::Path;

use regex::Regex;
use ruma::api::appservice::Registration;

use super::{Config, Error, Persona, Settings, agents, cross, endpoints, mcp};

pub(super) fn validate(mut config: Config, base: &Path, openai_key: Option<String>) -> Result<Settings, Error> {
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    let http = |s: &str| s.starts_with("http://") || s.starts_with("https://");
    if !http(&config.homeserver.url) {
        let shown = crate::url_mask::url(&config.homeserver.url);
        problems.push(format!("homeserver.url: must be an http(s) URL (got \"{shown}\")"));
    }
    if config.homeserver.server_name.is_empty() || config.homeserver.server_name.contains(['/', ' ', '@']) {
        problems.push("homeserver.server_name: must be the homeserver's server name, e.g. example.org".to_owned());
    }
    let listen = config.appservice.listen.parse::<SocketAddr>();
    if listen.is_err() {
        problems.push(format!(
            "appservice.listen: must be an address like 127.0.0.1:9009 (got \"{}\")",
            config.appservice.listen
        ));
    }
    if config.appservice.max_body_bytes < 64 * 1024 {
        problems.push("appservice.max_body_bytes: must be at least 65536 (one Matrix event)".to_owned());
    }
    if !config.database.url.starts_with("sqlite:")
        && crate::store::Backend::of(&config.database.url) != crate::store::Backend::Postgres
    {
        problems.push(format!(
            "database.url: must be a sqlite: URL like sqlite://richbot.db or a postgres:// URL (got \"{}\")",
            crate::store::shown_url(&config.database.url)
        ));
    }
    if !http(&config.llm.base_url) {
        let shown = crate::url_mask::url(&config.llm.base_url);
        problems.push(format!("llm.base_url: must be an http(s) URL ending in /v1 (got \"{shown}\")"));
    }
    if config.llm.model.trim().is_empty() {
        problems.push("llm.model: must not be empty".to_owned());
    }
    if config.llm.timeout_secs == 0 {
        problems.push("llm.timeout_secs: must be at least 1".to_owned());
    }
    if config.bot.history_days == 0 {
        problems.push("bot.history_days: must be at least 1".to_owned());
    }
    if config.llm.idle_timeout_secs == 0 {
        problems.push("llm.idle_timeout_secs: must be at least 1".to_owned());
    }
    if !(1..=32).contains(&config.llm.max_rounds) {
        problems.push("llm.max_rounds: must be 1-32".to_owned());
    }
    config.media.problems(&mut problems);
    config.schedules.problems(config.bot.timezone.as_deref(), &mut problems);
    config.transcription.problems(&mut problems);
    config.speech.problems(&mut problems);
    if config.encryption.wait_for_key_secs == 0 {
        problems.push("encryption.wait_for_key_secs: must be at least 1".to_owned());
    }
    if config.bot.coalesce_ms > crate::room::MAX_COALESCE_MS {
        problems.push(format!(
            "bot.coalesce_ms: must be at most {} (a picture's wait for its words holds its asker's turn)",
            crate::room::MAX_COALESCE_MS
        ));
    }
    if config.bot.lease_secs < 3 {
        problems.push("bot.lease_secs: must be at least 3 (a lease is renewed every third of it)".to_owned());
    }
    if config.bot.max_parallel_rooms == 0 {
        problems.push("bot.max_parallel_rooms: must be at least 1".to_owned());
    }
    if config.llm.max_concurrent_requests == 0 {
        problems.push("llm.max_concurrent_requests: must be at least 1".to_owned());
    }
    if let Some(addr) = &config.metrics.listen
        && addr.parse::<SocketAddr>().is_err()
    {
        problems.push(format!("metrics.listen: must be an address like 127.0.0.1:9100 (got \"{addr}\")"));
    }
    if !matches!(config.logging.format.as_deref(), None | Some("human" | "json")) {
        problems.push("logging.format: must be \"human\" or \"json\"".to_owned());
    }
    let mut found = endpoints::Found { problems: &mut problems, warnings: &mut warnings, base };
    let api_key =
        endpoints::key("llm", config.llm.api_key.as_ref(), config.llm.api_key_file.as_ref(), &mut found).or(openai_key);

    let registration = match std::fs::read_to_string(&config.appservice.registration) {
        Ok(text) => match serde_norway::from_str::<Registration>(&text) {
            Ok(r) => Some((r, crate::registration_file::missing_crypto_keys(&text))),
            Err(e) => {
                problems.push(format!(
                    "appservice.registration: {} is not a valid registration: {e}",
                    config.appservice.registration.display()
                ));
                None
            }
        },
        Err(e) => {
            problems.push(format!(
                "appservice.registration: cannot read {}: {e}",
                config.appservice.registration.display()
            ));
            None
        }
    };

    if config.database.url.starts_with("sqlite:") {
        config.database.url = cross::database(&config.database.url, base, &mut problems);
    }
    let mut personas = config.personas.clone();
    if let Some((reg, _)) = &registration {
        cross::registration(&config, listen.as_ref().ok().copied(), reg, &mut problems);
        if personas.is_empty() {
            personas.push(Persona {
                localpart: reg.sender_localpart.clone(),
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
            });
        }
        let namespace: Vec<Regex> = reg.namespaces.users.iter().filter_map(|ns| Regex::new(&ns.regex).ok()).collect();
        for (i, p) in personas.iter().enumerate() {
            let user = format!("@{}:{}", p.localpart, config.homeserver.server_name);
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

    let patterns = if config.access.allow.is_empty() {
        vec![format!("*:{}", config.homeserver.server_name)]
    } else {
        config.access.allow.clone()
    };
    cross::access(&config, &config.access.allow, &mut problems);
    let allow = mcp::patterns("access.allow", &patterns, &mut problems);
    let allow = allow.into_iter().zip(&patterns).map(|(re, p)| (re, p.contains('*'))).collect();
    let mut deny = mcp::patterns("access.deny", &config.access.deny, &mut problems);
    deny.extend(cross::other_namespaces(&config.access.other_registrations, base, &mut problems));
    let access = crate::room::Admission::new(allow, deny);
    let exempt = mcp::patterns("limits.exempt", &config.limits.exempt, &mut problems);
    let mut found = endpoints::Found { problems: &mut problems, warnings: &mut warnings, base };
    let mcp_access = mcp::validate(&mut config.mcp, &personas, &mut found);
    let endpoints = endpoints::resolve(&config.llm, api_key.as_ref(), &personas, &mut found);
    let agents = agents::validate(&config.agents, &personas, &config.homeserver.server_name, &mut found);
    let pickle_key = super::encryption::pickle_key(&config.encryption, &mut found);
    let audio_keys = super::speech::keys(&config, api_key.as_ref(), &mut found);
    let l = &config.limits;
    for (key, value) in [
        ("turns_per_room_per_minute", u64::from(l.turns_per_room_per_minute)),
        ("turns_per_user_per_minute", u64::from(l.turns_per_user_per_minute)),
        ("tool_calls_per_round", u64::from(l.tool_calls_per_round)),
        ("writes_per_turn", u64::from(l.writes_per_turn)),
        ("turn_deadline_secs", l.turn_deadline_secs),
        ("mcp_tools_per_server", l.mcp_tools_per_server as u64),
        ("rooms_per_inviter", l.rooms_per_inviter),
        ("rooms_total", l.rooms_total),
    ] {
        if value == 0 {
            problems.push(format!("limits.{key}: must be at least 1"));
        }
    }

    let weight = config.budget.cached_token_weight;
    if !(0.0..=1.0).contains(&weight) {
        problems.push(format!(
            "budget.cached_token_weight: must be from 0 to 1 (a cached token costs at most a fresh one), not {weight}"
        ));
    }

    match (problems.is_empty(), registration, listen) {
        (true, Some((registration, crypto_missing)), Ok(listen)) => Ok(Settings {
            config,
            registration,
            crypto_missing,
            listen,
            api_key,
            personas,
            endpoints,
            access,
            exempt,
            mcp_access,
            agents,
            pickle_key,
            audio_keys,
            warnings,
        }),
        _ => Err(Error::Invalid(problems)),
    }
}
