//! The agents' channel in `richbot check`: a line per client (whom it posts as, where it
//! may post, its pace), and whether callers can reach it at all.

use super::Line;
use crate::config::Settings;

/// One line per `[[agents.clients]]` entry.
pub fn lines(settings: &Settings) -> Vec<Line> {
    let listen = settings.config.agents.listen.as_deref();
    settings
        .agents
        .iter()
        .map(|c| {
            let patterns = |list: &[(String, regex::Regex)]| match list.len() {
                0 => "nowhere".to_owned(),
                _ => list.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>().join(", "),
            };
            let said = format!(
                "posts as {} in rooms {}; directly to {}; {} writes a minute",
                c.persona,
                patterns(&c.rooms),
                patterns(&c.users),
                c.writes_per_minute
            );
            let name = format!("agents client {}", c.name);
            match listen {
                Some(addr) => Line { name, ok: true, warn: false, detail: format!("{said}; on http://{addr}") },
                None => Line {
                    name,
                    ok: true,
                    warn: true,
                    detail: format!("{said}; but agents.listen is unset, so it cannot reach richbot"),
                },
            }
        })
        .collect()
}
