//! `richbot check`: one line per check (config, database, homeserver, appservice ping both
//! ways, LLM endpoint), so an admin sees at once which part of a deployment is wrong.
//!
//! The ping needs something answering at the registration's URL: when `richbot serve` is
//! not running, the check serves the appservice routes itself on the configured address
//! for the duration of the ping.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::Notify;

use crate::config::Settings;
use crate::parts::Parts;
use crate::{appservice, inbox};

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
}

impl std::fmt::Display for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:<4} {}: {}", if self.ok { "ok" } else { "FAIL" }, self.name, self.detail)
    }
}

fn line(name: &'static str, result: Result<String, String>) -> Line {
    match result {
        Ok(detail) => Line { name, ok: true, detail },
        Err(detail) => Line { name, ok: false, detail },
    }
}

/// Runs every check that the settings allow.
pub async fn run(settings: &Settings) -> Vec<Line> {
    let mut lines = vec![Line { name: "config", ok: true, detail: format!("{} persona(s)", settings.personas.len()) }];
    let parts = match Parts::build(settings).await {
        Ok(p) => p,
        Err(e) => {
            lines.push(line("database", Err(e.to_string())));
            return lines;
        }
    };
    lines.push(line(
        "database",
        parts.store.ping().await.map(|()| settings.config.database.url.clone()).map_err(|e| e.to_string()),
    ));

    let hs = &settings.config.homeserver.url;
    let reachable = parts.matrix.versions().await;
    lines.push(line(
        "homeserver",
        reachable.as_ref().map(|_| format!("{hs} answers")).map_err(|e| format!("{hs}: {e}")),
    ));
    if reachable.is_ok() {
        // Serve the appservice routes ourselves if nothing else is listening.
        let local = match TcpListener::bind(settings.listen).await {
            Ok(listener) => {
                let inbox = inbox::Inbox::new(parts.store.clone(), Arc::new(Notify::new()), Arc::default());
                let state = appservice::AppState::new(&settings.registration.hs_token, inbox, parts.personas.clone());
                let app = appservice::router(state, settings.config.appservice.max_body_bytes);
                Some(tokio::spawn(async move { axum::serve(listener, app).await }))
            }
            Err(_) => None,
        };
        let ping = tokio::time::timeout(
            Duration::from_secs(15),
            parts.matrix.ping(&settings.registration.id, "richbot-check"),
        )
        .await;
        let result = match ping {
            Ok(Ok(ms)) => Ok(format!("homeserver -> richbot -> homeserver in {ms} ms")),
            Ok(Err(e)) => Err(format!(
                "{e} (is the registration's url, {}, reachable from the homeserver?)",
                settings.registration.url.as_deref().unwrap_or("unset")
            )),
            Err(_) => Err("no answer within 15 s".to_owned()),
        };
        lines.push(line("appservice ping", result));
        if let Some(task) = local {
            task.abort();
        }
    } else {
        lines.push(line("appservice ping", Err("skipped: the homeserver is unreachable".to_owned())));
    }

    let llm = &settings.config.llm.base_url;
    lines.push(line("llm", parts.llm.reachable().await.map(|()| format!("{llm} answers")).map_err(|e| e.to_string())));
    parts.store.close().await;
    lines
}
