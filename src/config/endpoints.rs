//! Which LLM endpoint each persona talks to: `[[personas]]` may set `model`, `base_url`,
//! `api_key` / `api_key_file` and `max_tokens`, each falling back to `[llm]`.
//!
//! A persona with a `base_url` of its own never falls back to `[llm]`'s key: the main key
//! is not sent to another provider (set the persona's own key, or none for a local
//! server). Keys are read here, once, and never printed.

use std::path::{Path, PathBuf};

use super::{Llm, Persona};

/// One persona's endpoint, resolved. `Debug` leaves the key out.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub max_tokens: u32,
    /// Calls the model writes as text are read as calls (`text_tool_calls`).
    pub text_tool_calls: bool,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("max_tokens", &self.max_tokens)
            .field("text_tool_calls", &self.text_tool_calls)
            .finish()
    }
}

/// Problems and warnings found on the way, one line each naming the key.
pub(super) struct Found<'a> {
    pub problems: &'a mut Vec<String>,
    pub warnings: &'a mut Vec<String>,
    /// Where relative paths start.
    pub base: &'a Path,
}

/// A key given inline or in a file (`<at>.api_key` / `<at>.api_key_file`).
pub(super) fn key(at: &str, inline: Option<&String>, file: Option<&PathBuf>, found: &mut Found<'_>) -> Option<String> {
    if let Some(k) = inline {
        return Some(k.clone());
    }
    secret_file(&format!("{at}.api_key_file"), file?, found)
}

/// The trimmed contents of the secret file `file` (the key `key` names it), warning when
/// other users can read it.
pub(super) fn secret_file(key: &str, file: &Path, found: &mut Found<'_>) -> Option<String> {
    let file = if file.is_relative() { found.base.join(file) } else { file.to_owned() };
    if crate::private_files::readable_by_others(&file) {
        found.warnings.push(format!("{key}: {} is readable by other users; chmod 600 it", file.display()));
    }
    match std::fs::read_to_string(&file) {
        Ok(k) => Some(k.trim().to_owned()),
        Err(e) => {
            found.problems.push(format!("{key}: cannot read {}: {e}", file.display()));
            None
        }
    }
}

/// Each persona's endpoint, in order; `default_key` is `[llm]`'s, resolved.
pub(super) fn resolve(
    llm: &Llm,
    default_key: Option<&String>,
    personas: &[Persona],
    found: &mut Found<'_>,
) -> Vec<Endpoint> {
    let mut out = Vec::with_capacity(personas.len());
    for (i, p) in personas.iter().enumerate() {
        let at = format!("personas[{i}]");
        if let Some(url) = &p.base_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            let url = crate::url_mask::url(url);
            found.problems.push(format!("{at}.base_url: must be an http(s) URL ending in /v1 (got \"{url}\")"));
        }
        if p.model.as_ref().is_some_and(|m| m.trim().is_empty()) {
            found.problems.push(format!("{at}.model: must not be empty"));
        }
        if p.max_tokens == Some(0) {
            found.problems.push(format!("{at}.max_tokens: must be at least 1"));
        }
        let base_url = p.base_url.clone().unwrap_or_else(|| llm.base_url.clone());
        let own = key(&at, p.api_key.as_ref(), p.api_key_file.as_ref(), found);
        let same_endpoint = base_url.trim_end_matches('/') == llm.base_url.trim_end_matches('/');
        let api_key = own.or_else(|| same_endpoint.then(|| default_key.cloned()).flatten());
        out.push(Endpoint {
            base_url,
            model: p.model.clone().unwrap_or_else(|| llm.model.clone()),
            api_key,
            max_tokens: p.max_tokens.unwrap_or(llm.max_tokens),
            text_tool_calls: p.text_tool_calls.unwrap_or(llm.text_tool_calls),
        });
    }
    out
}
