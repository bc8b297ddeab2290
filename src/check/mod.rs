//! `richbot check`: one line per part of a deployment (config, database, homeserver, the
//! appservice registration as the homeserver sees it, the ping both ways, the LLM), and
//! for each failure the usual cause and its fix, not just the symptom. With `--model`,
//! also whether each model can use the rich tools (`model.rs`; it costs a call each).
//!
//! The ping needs something answering at the registration's URL: when `richbot serve` is
//! not running, the check serves the appservice routes itself on the configured address
//! for the duration of the ping and the encryption probe (`encryption.rs`).

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::assemble::Parts;
use crate::config::Settings;
use crate::matrix;
use crate::{appservice, inbox, store};

mod agents;
mod encryption;
mod model;
mod speech;

pub use model::QUESTION as MODEL_QUESTION;
pub use speech::CLIP_WORDS;

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub name: String,
    pub ok: bool,
    /// Works, but not as well as it could (shown as WARN; not a failure).
    pub warn: bool,
    pub detail: String,
}

impl std::fmt::Display for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let level = match (self.ok, self.warn) {
            (false, _) => "FAIL",
            (true, true) => "WARN",
            (true, false) => "ok",
        };
        write!(f, "{level:<4} {}: {}", self.name, self.detail)
    }
}

fn line(name: impl Into<String>, result: Result<String, String>) -> Line {
    let name = name.into();
    match result {
        Ok(detail) => Line { name, ok: true, warn: false, detail },
        Err(detail) => Line { name, ok: false, warn: false, detail },
    }
}

/// Runs every check that the settings allow; with `models`, asks each model too.
pub async fn run(settings: &Settings, models: bool) -> Vec<Line> {
    let mut lines = vec![line("config", Ok(format!("{} persona(s)", settings.personas.len())))];
    let parts = match Parts::build(settings).await {
        Ok(p) => p,
        Err(e) => {
            lines.push(line("database", Err(format!("{}: {e}", store::shown_url(&settings.config.database.url)))));
            return lines;
        }
    };
    lines.push(line(
        "database",
        parts.store.ping().await.map(|()| store::shown_url(&settings.config.database.url)).map_err(|e| e.to_string()),
    ));

    let hs = &settings.config.homeserver.url;
    // Any Matrix answer will do here (an unknown token is the registration line's business).
    let reachable = match parts.matrix.versions().await {
        Ok(_) | Err(matrix::Error::Refused { .. }) => Ok(format!("{hs} answers")),
        Err(e) => Err(format!("{hs}: {e}; is homeserver.url right, and the homeserver up?")),
    };
    let answers = reachable.is_ok();
    lines.push(line("homeserver", reachable));
    if answers {
        lines.push(line("registration", registration(settings, &parts).await));
        let checked = encryption::crypto(settings, &parts);
        let local = serve_locally(settings, &parts, checked.crypto.clone()).await;
        let pinged = ping(settings, &parts).await;
        let reached = pinged.is_ok();
        lines.push(line("appservice ping", pinged));
        lines.push(line("encryption", encryption::line(settings, &parts, &checked, reached).await));
        if let Some(task) = local {
            task.abort();
        }
    } else {
        lines.push(line("appservice ping", Err("skipped: the homeserver is unreachable".to_owned())));
    }
    lines.extend(llms(settings, &parts).await);
    let servers = launch_mcp(settings).await;
    if models {
        let toolbox = crate::tools::Toolbox::new(servers.clone(), settings.mcp_access.clone());
        lines.extend(model::lines(settings, parts.personas.all(), &toolbox).await);
    }
    lines.extend(speech::lines(settings, models).await);
    lines.extend(mcp(servers));
    lines.extend(agents::lines(settings));
    parts.store.close().await;
    lines
}

/// Whether the homeserver knows the registration, and as the user this config expects.
async fn registration(settings: &Settings, parts: &Parts) -> Result<String, String> {
    let reg = &settings.registration;
    let expected = format!("@{}:{}", reg.sender_localpart, settings.config.homeserver.server_name);
    match parts.matrix.whoami().await {
        Ok(user) if user.as_str() == expected => Ok(format!("the homeserver knows it, as {user}")),
        Ok(user) => Err(format!(
            "the homeserver takes the as_token for {user}, not {expected}: homeserver.server_name must be \"{}\"",
            user.server_name()
        )),
        Err(e) if e.errcode() == Some("M_UNKNOWN_TOKEN") => Err(format!(
            "the homeserver does not know this registration ({e}): add {} to app_service_config_files and \
             restart the homeserver",
            settings.config.appservice.registration.display()
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// Serves the appservice routes here while the check runs, if nothing else listens on
/// the configured address (no `serve` running): the ping and the encryption probe need
/// something to answer the homeserver, and to record what it sends.
async fn serve_locally(
    settings: &Settings,
    parts: &Parts,
    crypto: Option<crate::crypto::Crypto>,
) -> Option<tokio::task::JoinHandle<std::io::Result<()>>> {
    let listener = TcpListener::bind(settings.listen).await.ok()?;
    let queue = parts.room_queue().await.ok()?;
    let inbox = inbox::Inbox::new(
        parts.store.clone(),
        queue,
        parts.personas.clone(),
        crate::assemble::room_policy(settings),
        Arc::default(),
    )
    .with_crypto(crypto);
    let state = appservice::AppState::new(&settings.registration.hs_token, inbox, parts.personas.clone());
    let app = appservice::router(state, settings.config.appservice.max_body_bytes);
    Some(tokio::spawn(async move { axum::serve(listener, app).await }))
}

/// The homeserver calls richbot (here, or a running `serve`) and reports back.
async fn ping(settings: &Settings, parts: &Parts) -> Result<String, String> {
    let answer =
        tokio::time::timeout(Duration::from_secs(15), parts.matrix.ping(&settings.registration.id, "richbot-check"))
            .await;
    match answer {
        Ok(Ok(ms)) => Ok(format!("homeserver -> richbot -> homeserver in {ms} ms")),
        Ok(Err(e)) => Err(ping_failure(settings, &e)),
        Err(_) => {
            let url = settings.registration.url.as_deref().unwrap_or("unset");
            Err(format!("no answer within 15 s; is {url} reachable from the homeserver?"))
        }
    }
}

/// What a failed appservice ping means, and what to do: for `check`, and for `serve`'s
/// one warning at start.
pub fn ping_failure(settings: &Settings, e: &matrix::Error) -> String {
    let url = settings.registration.url.as_deref().unwrap_or("unset");
    let path = settings.config.appservice.registration.display();
    match e.errcode().unwrap_or_default() {
        "M_BAD_STATUS" if e.to_string().contains("(status 403)") => format!(
            "richbot refused the homeserver's token ({e}): the homeserver has a different hs_token than the \
             registration richbot reads ({path}); give the homeserver this same file and restart it"
        ),
        // richbot listens where its registration says: the homeserver must be looking
        // elsewhere, with a registration of its own (an older file, or another url).
        "M_CONNECTION_FAILED" | "M_CONNECTION_TIMEOUT" if url.ends_with(&format!(":{}", settings.listen.port())) => {
            format!(
                "the homeserver could not reach richbot ({e}), though richbot listens on {} as its registration \
                 ({path}) says ({url}): if this goes on (the homeserver was not just restarting), it is using \
                 another url, from an older or different registration; give it {path} and restart it",
                settings.listen
            )
        }
        "M_CONNECTION_FAILED" | "M_CONNECTION_TIMEOUT" => format!(
            "the homeserver could not reach richbot at the registration's url, {url} ({e}); richbot listens on \
             appservice.listen = {}: make that url reach it from the homeserver",
            settings.listen
        ),
        "M_URL_NOT_SET" => {
            format!("the homeserver's registration has no url ({e}): give it {path} (url {url}) and restart it")
        }
        "M_UNKNOWN_TOKEN" | "M_FORBIDDEN" => format!(
            "the homeserver does not know this registration ({e}): add {path} to app_service_config_files and \
             restart the homeserver"
        ),
        _ => format!("{e} (is the registration's url, {url}, reachable from the homeserver?)"),
    }
}

/// The MCP servers, started as `serve` starts them (for `--model`, and their lines).
async fn launch_mcp(settings: &Settings) -> crate::mcp::Mcp {
    let bounds = crate::assemble::mcp_bounds(settings);
    crate::mcp::Mcp::launch(&settings.config.mcp, &crate::tools::registry::RESERVED, bounds).await
}

/// Each MCP server: reached, and how many tools it offers (or which names it cannot);
/// then they are stopped.
fn mcp(servers: crate::mcp::Mcp) -> Vec<Line> {
    let dropped = servers.dropped();
    let lines = servers
        .report()
        .into_iter()
        .map(|(name, state)| {
            let not_offered = dropped.iter().find(|(n, _)| *n == name).map(|(_, d)| d.len()).unwrap_or(0);
            let detail = match state {
                Ok(n) if not_offered > 0 => Ok(format!("{n} tools ({not_offered} not offered: see the log)")),
                Ok(n) => Ok(format!("{n} tools")),
                Err(crate::mcp::Report::Down(why)) => Err(why),
                Err(crate::mcp::Report::Refused(problems)) => Err(problems.join("; ")),
            };
            line(format!("mcp {name}"), detail)
        })
        .collect();
    servers.stop();
    lines
}

/// Each distinct LLM endpoint once (a URL and a key): `[llm]`'s as `llm`, a persona's own
/// as `llm for <localparts>`. There, takes the key, and offers every model asked of it.
async fn llms(settings: &Settings, parts: &Parts) -> Vec<Line> {
    struct Group<'a> {
        base: &'a str,
        key: Option<&'a String>,
        /// Each model asked of it, with the key that asks for it.
        models: Vec<(&'a str, String)>,
        personas: Vec<&'a str>,
    }
    let l = &settings.config.llm;
    let main = vec![(l.model.as_str(), "llm.model".to_owned())];
    let mut groups =
        vec![Group { base: &l.base_url, key: settings.api_key.as_ref(), models: main, personas: Vec::new() }];
    for (n, (p, e)) in settings.personas.iter().zip(&settings.endpoints).enumerate() {
        let same = |g: &Group<'_>| {
            g.base.trim_end_matches('/') == e.base_url.trim_end_matches('/') && g.key == e.api_key.as_ref()
        };
        let i = match groups.iter().position(same) {
            Some(i) => i,
            None => {
                groups.push(Group {
                    base: &e.base_url,
                    key: e.api_key.as_ref(),
                    models: Vec::new(),
                    personas: Vec::new(),
                });
                groups.len() - 1
            }
        };
        let g = &mut groups[i];
        if !g.models.iter().any(|(m, _)| *m == e.model) {
            g.models.push((&e.model, format!("personas[{n}].model")));
        }
        if i > 0 {
            g.personas.push(&p.localpart);
        }
    }
    let mut lines = Vec::new();
    for (i, g) in groups.iter().enumerate() {
        let own;
        let client = if i == 0 {
            &parts.llm
        } else {
            own = crate::agent::Llm::new(g.base, g.key.map(String::as_str), g.models[0].0, settings.llm_timeout(), 1);
            &own
        };
        let name = if i == 0 { "llm".to_owned() } else { format!("llm for {}", g.personas.join(", ")) };
        lines.push(line(name, llm(client, &g.models).await));
    }
    lines
}

/// One LLM endpoint: there, takes the key, and offers `models` (each with its config key).
async fn llm(client: &crate::agent::Llm, models: &[(&str, String)]) -> Result<String, String> {
    let base = client.base_url();
    let offered = client.probe().await.map_err(|p| p.explain(base, client.has_key()))?;
    if let Some((missing, key)) = models.iter().find(|(m, _)| !offered.is_empty() && !offered.iter().any(|o| o == m)) {
        let some: Vec<&str> = offered.iter().take(8).map(String::as_str).collect();
        return Err(format!(
            "{base} does not offer {key} = \"{missing}\" (it offers: {}{})",
            some.join(", "),
            if offered.len() > some.len() { ", ..." } else { "" }
        ));
    }
    let names: Vec<&str> = models.iter().map(|(m, _)| *m).collect();
    Ok(format!("{base} answers and offers {}", names.join(", ")))
}
