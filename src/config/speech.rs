//! `[transcription]` and `[speech]`: the OpenAI-compatible audio endpoints members' voice
//! messages are transcribed by, and personas with `voice_replies` speak through. Both are
//! off while their `base_url` is unset. The key names are a contract; the bounds are
//! checked at start. A key falls back to `[llm]`'s when the URL is the same.

use std::path::PathBuf;

use serde::Deserialize;

use super::Config;
use super::endpoints::{Found, key};

/// `[transcription]`.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Transcription {
    pub base_url: Option<String>,
    pub model: String,
    pub api_key: Option<String>,
    pub api_key_file: Option<PathBuf>,
    /// Longest voice message transcribed, in seconds (by its stated duration).
    pub max_seconds: u64,
    /// Largest voice message fetched, in bytes.
    pub max_bytes: usize,
    pub timeout_secs: u64,
}

impl Default for Transcription {
    fn default() -> Self {
        Self {
            base_url: None,
            model: "whisper-1".to_owned(),
            api_key: None,
            api_key_file: None,
            max_seconds: 300,
            max_bytes: 25 * 1024 * 1024,
            timeout_secs: 60,
        }
    }
}

/// `[speech]`.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Speech {
    pub base_url: Option<String>,
    pub model: String,
    pub voice: String,
    /// `ogg` (Opus, as Element records) or `wav`.
    pub format: String,
    pub api_key: Option<String>,
    pub api_key_file: Option<PathBuf>,
    pub timeout_secs: u64,
}

impl Default for Speech {
    fn default() -> Self {
        Self {
            base_url: None,
            model: "tts-1".to_owned(),
            voice: "alloy".to_owned(),
            format: "ogg".to_owned(),
            api_key: None,
            api_key_file: None,
            timeout_secs: 60,
        }
    }
}

macro_rules! redacted_debug {
    ($t:ty, $name:literal) => {
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct($name)
                    .field("base_url", &self.base_url)
                    .field("model", &self.model)
                    .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
                    .finish_non_exhaustive()
            }
        }
    };
}
redacted_debug!(Transcription, "Transcription");
redacted_debug!(Speech, "Speech");

fn url_ok(url: &str) -> bool {
    (url.starts_with("http://") || url.starts_with("https://")) && url.trim_end_matches('/').ends_with("/v1")
}

impl Transcription {
    pub(super) fn problems(&self, problems: &mut Vec<String>) {
        if self.base_url.as_deref().is_some_and(|u| !url_ok(u)) {
            problems.push("transcription.base_url: must be an http(s) URL ending in /v1".to_owned());
        }
        if !(1..=3600).contains(&self.max_seconds) {
            problems.push("transcription.max_seconds: must be 1-3600".to_owned());
        }
        if !(1024..=100 * 1024 * 1024).contains(&self.max_bytes) {
            problems.push("transcription.max_bytes: must be 1024-104857600".to_owned());
        }
        if self.timeout_secs == 0 {
            problems.push("transcription.timeout_secs: must be at least 1".to_owned());
        }
    }
}

impl Speech {
    pub(super) fn problems(&self, problems: &mut Vec<String>) {
        if self.base_url.as_deref().is_some_and(|u| !url_ok(u)) {
            problems.push("speech.base_url: must be an http(s) URL ending in /v1".to_owned());
        }
        if !["ogg", "wav"].contains(&self.format.as_str()) {
            problems.push("speech.format: must be \"ogg\" or \"wav\"".to_owned());
        }
        if self.timeout_secs == 0 {
            problems.push("speech.timeout_secs: must be at least 1".to_owned());
        }
    }
}

/// The keys of `[transcription]` and `[speech]`, read. `Debug` leaves them out.
#[derive(Clone, Default)]
pub struct AudioKeys {
    pub transcription: Option<String>,
    pub speech: Option<String>,
}

impl std::fmt::Debug for AudioKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AudioKeys").finish_non_exhaustive()
    }
}

/// Each section's own key, else `[llm]`'s (`llm_key`, resolved) when its URL is `[llm]`'s:
/// the main key is never sent to another provider.
pub(super) fn keys(config: &Config, llm_key: Option<&String>, found: &mut Found<'_>) -> AudioKeys {
    let llm = config.llm.base_url.trim_end_matches('/');
    let mut resolve = |at: &str, url: Option<&String>, inline: Option<&String>, file: Option<&PathBuf>| {
        let own = key(at, inline, file, found);
        let same = url.is_some_and(|u| u.trim_end_matches('/') == llm);
        own.or_else(|| same.then(|| llm_key.cloned()).flatten())
    };
    let t = &config.transcription;
    let s = &config.speech;
    AudioKeys {
        transcription: resolve("transcription", t.base_url.as_ref(), t.api_key.as_ref(), t.api_key_file.as_ref()),
        speech: resolve("speech", s.base_url.as_ref(), s.api_key.as_ref(), s.api_key_file.as_ref()),
    }
}
