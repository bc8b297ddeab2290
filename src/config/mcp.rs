//! `[[mcp]]`: the MCP servers whose tools the model is offered. The key names are a
//! contract (admins' files and docs use them). Checked here: what can be known without
//! starting a server (names, one of `command` / `url`, timeouts, patterns, the personas'
//! `tools` lists); what a server offers is checked when it is reached (`crate::mcp`).

use regex::Regex;

use super::Persona;
use crate::mcp::McpServer;
use crate::tools::registry::Access as McpAccess;

/// Checks the `[[mcp]]` entries and the personas' `tools`; returns each server's access,
/// in order.
pub(super) fn validate(servers: &[McpServer], personas: &[Persona], problems: &mut Vec<String>) -> Vec<McpAccess> {
    let mut names = std::collections::HashSet::new();
    let mut access = Vec::with_capacity(servers.len());
    for (i, s) in servers.iter().enumerate() {
        let at = |key: &str| format!("mcp[{i}].{key}");
        let valid = !s.name.is_empty() && s.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid || s.name.contains("__") || s.name.len() > 32 {
            problems.push(format!(
                "{}: \"{}\" must be 1-32 of A-Z a-z 0-9 _ - without \"__\" (tools are offered as <name>__<tool>)",
                at("name"),
                s.name
            ));
        } else if !names.insert(s.name.as_str()) {
            problems.push(format!("{}: \"{}\" is used by two servers", at("name"), s.name));
        }
        match (&s.command, &s.url) {
            (Some(c), None) if !c.trim().is_empty() => {}
            (None, Some(u)) if u.starts_with("http://") || u.starts_with("https://") => {}
            (None, Some(u)) => problems.push(format!("{}: must be an http(s) URL (got \"{u}\")", at("url"))),
            (Some(_), Some(_)) => problems.push(format!("mcp[{i}]: set command or url, not both")),
            _ => problems.push(format!("mcp[{i}]: set command (a stdio server) or url (a streamable-HTTP server)")),
        }
        if s.url.is_some() && (!s.args.is_empty() || !s.env.is_empty()) {
            problems.push(format!("mcp[{i}]: args and env are for a command, not a url"));
        }
        for (key, value) in [("timeout_secs", s.timeout_secs), ("approval_timeout_secs", s.approval_timeout_secs)] {
            if !(1..=86_400).contains(&value) {
                problems.push(format!("{}: must be 1-86400", at(key)));
            }
        }
        access.push(McpAccess {
            users: patterns(&at("users"), &s.users, problems),
            rooms: patterns(&at("rooms"), &s.rooms, problems),
        });
    }
    for (i, p) in personas.iter().enumerate() {
        for name in p.tools.iter().flatten() {
            if !servers.iter().any(|s| &s.name == name) {
                problems.push(format!("personas[{i}].tools: \"{name}\" is not the name of an [[mcp]] server"));
            }
        }
    }
    access
}

/// Ids or patterns with `*` as anchored regexes; a bad one is a problem naming `key[i]`.
pub(super) fn patterns(key: &str, patterns: &[String], problems: &mut Vec<String>) -> Vec<Regex> {
    let mut out = Vec::new();
    for (i, p) in patterns.iter().enumerate() {
        let re = format!("^{}$", regex::escape(p).replace("\\*", ".*"));
        match Regex::new(&re) {
            Ok(re) => out.push(re),
            Err(e) => problems.push(format!("{key}[{i}]: {e}")),
        }
    }
    out
}
