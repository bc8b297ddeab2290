//! `[[mcp]]`: the MCP servers whose tools the model is offered. The key names are a
//! contract (admins' files and docs use them). Checked here: what can be known without
//! starting a server (names, one of `command` / `url`, timeouts, patterns, the personas'
//! `tools` lists); what a server offers is checked when it is reached (`crate::mcp`).

use regex::Regex;

use super::Persona;
use crate::mcp::McpServer;
use crate::tools::registry::Access as McpAccess;

/// Checks the `[[mcp]]` entries and the personas' `tools`, and merges each server's
/// `headers_file` into its `headers`; returns each server's access, in order.
pub(super) fn validate(
    servers: &mut [McpServer],
    personas: &[Persona],
    found: &mut super::endpoints::Found<'_>,
) -> Vec<McpAccess> {
    let problems = &mut *found.problems;
    let mut names = std::collections::HashSet::new();
    let mut access = Vec::with_capacity(servers.len());
    for (i, s) in servers.iter_mut().enumerate() {
        let at = |key: &str| format!("mcp[{i}].{key}");
        let valid = !s.name.is_empty() && s.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid || s.name.contains("__") || s.name.len() > 32 {
            problems.push(format!(
                "{}: \"{}\" must be 1-32 of A-Z a-z 0-9 _ - without \"__\" (tools are offered as <name>__<tool>)",
                at("name"),
                s.name
            ));
        } else if !names.insert(s.name.clone()) {
            problems.push(format!("{}: \"{}\" is used by two servers", at("name"), s.name));
        }
        match (&s.command, &s.url) {
            (Some(c), None) if !c.trim().is_empty() => {}
            (None, Some(u)) if u.starts_with("http://") || u.starts_with("https://") => {}
            (None, Some(u)) => {
                problems.push(format!("{}: must be an http(s) URL (got \"{}\")", at("url"), crate::url_mask::url(u)))
            }
            (Some(_), Some(_)) => problems.push(format!("mcp[{i}]: set command or url, not both")),
            _ => problems.push(format!("mcp[{i}]: set command (a stdio server) or url (a streamable-HTTP server)")),
        }
        if s.url.is_some() && (!s.args.is_empty() || !s.env.is_empty()) {
            problems.push(format!("mcp[{i}]: args and env are for a command, not a url"));
        }
        if s.url.is_none() && (!s.headers.is_empty() || s.headers_file.is_some()) {
            problems.push(format!("mcp[{i}]: headers and headers_file are for a url, not a command"));
        }
        if !s.no_approval.is_empty() && !s.gates_all() {
            problems.push(format!("{}: only with approval = \"*\" (every tool but these)", at("no_approval")));
        }
        if let Some(file) = s.headers_file.take() {
            let file = if file.is_relative() { found.base.join(file) } else { file };
            if crate::private_files::readable_by_others(&file) {
                found.warnings.push(format!(
                    "{}: {} is readable by other users; chmod 600 it",
                    at("headers_file"),
                    file.display()
                ));
            }
            match std::fs::read_to_string(&file) {
                Ok(text) => header_lines(&text, &at("headers_file"), &mut s.headers, problems),
                Err(e) => problems.push(format!("{}: cannot read {}: {e}", at("headers_file"), file.display())),
            }
        }
        for name in s.headers.keys() {
            header_problem(name, &s.headers[name], &at("headers"), problems);
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

/// Reads `Name: value` lines (blank lines and `#` comments skipped) into `headers`.
fn header_lines(
    text: &str,
    at: &str,
    headers: &mut std::collections::BTreeMap<String, String>,
    problems: &mut Vec<String>,
) {
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.split_once(':') {
            Some((name, value)) => {
                headers.insert(name.trim().to_owned(), value.trim().to_owned());
            }
            None => problems.push(format!("{at}: line {} is not \"Name: value\"", n + 1)),
        }
    }
}

/// Headers the MCP transport sets itself, which a config may not.
const RESERVED_HEADERS: [&str; 5] =
    ["accept", "content-type", "mcp-session-id", "mcp-protocol-version", "last-event-id"];

/// Whether a header can be sent: a valid name the transport leaves to us, a valid value
/// (never quoted back: it is a secret).
fn header_problem(name: &str, value: &str, at: &str, problems: &mut Vec<String>) {
    if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
        problems.push(format!("{at}: \"{name}\" is not a valid header name"));
    } else if RESERVED_HEADERS.iter().any(|r| r.eq_ignore_ascii_case(name)) {
        problems.push(format!("{at}: {name} is set by the MCP transport itself"));
    } else if http::HeaderValue::from_str(value).is_err() {
        problems.push(format!("{at}: the value of {name} is not a valid header value"));
    }
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
