//! Validation of a parsed config: every problem becomes one line naming its key, so a
//! bad deployment fails at start with the whole list, not one error per restart.

use std::path::Path;

use ruma::api::appservice::Registration;

use super::{Config, Error, Persona, Settings, agents, cross, endpoints, mcp, persona};

pub(super) fn validate(mut config: Config, base: &Path, openai_key: Option<String>) -> Result<Settings, Error> {
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    config.homeserver.problems(&mut problems);
    let listen = config.appservice.checked(&mut problems);
    config.database.problems(&mut problems);
    config.llm.problems(&mut problems);
    config.bot.problems(&mut problems);
    config.media.problems(&mut problems);
    config.schedules.problems(config.bot.timezone.as_deref(), &mut problems);
    config.transcription.problems(&mut problems);
    config.speech.problems(&mut problems);
    config.encryption.problems(&mut problems);
    config.metrics.problems(&mut problems);
    config.logging.problems(&mut problems);
    config.limits.problems(&mut problems);
    config.budget.problems(&mut problems);
    let mut found = endpoints::Found { problems: &mut problems, warnings: &mut warnings, base };
    let api_key =
        endpoints::key("llm", config.llm.api_key.as_ref(), config.llm.api_key_file.as_ref(), &mut found).or(openai_key);

    let registration = read_registration(&config.appservice.registration, &mut problems);

    if config.database.url.starts_with("sqlite:") {
        config.database.url = cross::database(&config.database.url, base, &mut problems);
    }
    let mut personas = config.personas.clone();
    if let Some(Read { registration: reg, .. }) = &registration {
        cross::registration(&config, listen, reg, &mut problems);
        if personas.is_empty() {
            personas.push(Persona::sender(&reg.sender_localpart));
        }
        persona::problems(&personas, reg, &config.homeserver.server_name, &mut problems);
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
    match (problems.is_empty(), registration, listen) {
        (true, Some(Read { registration, crypto_missing }), Some(listen)) => Ok(Settings {
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

/// A registration file, read.
struct Read {
    registration: Registration,
    /// The keys for encryption it lacks (`registration_file`).
    crypto_missing: Vec<&'static str>,
}

/// The registration file `path` names, read; `None`, with a problem, when it cannot be.
fn read_registration(path: &Path, problems: &mut Vec<String>) -> Option<Read> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            problems.push(format!("appservice.registration: cannot read {}: {e}", path.display()));
            return None;
        }
    };
    match serde_norway::from_str::<Registration>(&text) {
        Ok(registration) => {
            Some(Read { registration, crypto_missing: crate::registration_file::missing_crypto_keys(&text) })
        }
        Err(e) => {
            problems.push(format!("appservice.registration: {} is not a valid registration: {e}", path.display()));
            None
        }
    }
}
