//! `[transcription]` and `[speech]` in `richbot check`: a line for each that is set.
//! Without `--model` the endpoint is asked for nothing (an empty request, which it should
//! refuse as such, not for its key or path); with it, the transcription endpoint hears a
//! built-in clip (espeak-ng saying [`CLIP_WORDS`], Ogg Opus as Element records) and the
//! speech endpoint speaks a sentence, so an admin hears of a wrong model or format here.

use std::time::Instant;

use super::Line;
use crate::config::Settings;
use crate::speech::{self, Endpoint};

/// What the built-in clip says.
pub const CLIP_WORDS: &str = "What is the weather in Lisbon right now?";

/// The built-in clip (3 s, 11 KiB: at opusenc's default rate, which Whisper base hears word for word).
const CLIP: &[u8] = include_bytes!("clip.ogg");

/// One line per audio endpoint set; none when neither is.
pub async fn lines(settings: &Settings, models: bool) -> Vec<Line> {
    let voice = crate::assemble::voice(settings);
    let mut lines = Vec::new();
    if let Some(l) = &voice.listening {
        let result = match models {
            false => probe(&l.endpoint, "audio/transcriptions").await,
            true => hear(&l.endpoint).await,
        };
        lines.push(line("transcription", result));
    }
    if let Some(s) = &voice.speaking {
        let result = match models {
            false => probe(&s.endpoint, "audio/speech").await,
            true => say(s).await,
        };
        lines.push(line("speech", result));
    }
    lines
}

fn line(name: &str, result: Result<(String, bool), String>) -> Line {
    match result {
        Ok((detail, warn)) => Line { name: name.to_owned(), ok: true, warn, detail },
        Err(detail) => Line { name: name.to_owned(), ok: false, warn: false, detail },
    }
}

fn explain(endpoint: &Endpoint, e: speech::Error) -> String {
    format!("{}: {e}", crate::url_mask::url(endpoint.base_url()))
}

async fn probe(endpoint: &Endpoint, path: &str) -> Result<(String, bool), String> {
    let status = endpoint.probe(path).await.map_err(|e| explain(endpoint, e))?;
    Ok((
        format!("{}/{path} answers (HTTP {status} to an empty request)", crate::url_mask::url(endpoint.base_url())),
        false,
    ))
}

async fn hear(endpoint: &Endpoint) -> Result<(String, bool), String> {
    let started = Instant::now();
    let text =
        endpoint.transcribe(CLIP.to_vec(), "check.ogg", "audio/ogg").await.map_err(|e| explain(endpoint, e))?.text;
    let ms = started.elapsed().as_millis();
    let heard = |w: &str| w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
    let words: Vec<String> = text.split_whitespace().map(heard).collect();
    let missed = CLIP_WORDS.split_whitespace().map(heard).filter(|w| !words.contains(w)).count();
    let detail = format!("heard the built-in clip as \"{text}\" in {ms} ms");
    match missed {
        0 => Ok((detail, false)),
        n => Ok((format!("{detail}; {n} of its words were missed (it says \"{CLIP_WORDS}\")"), true)),
    }
}

async fn say(s: &speech::Speaking) -> Result<(String, bool), String> {
    let started = Instant::now();
    let bytes = s.endpoint.speak("richbot check.", &s.voice, &s.format).await.map_err(|e| explain(&s.endpoint, e))?;
    let ms = started.elapsed().as_millis();
    let shape = speech::shape(&bytes);
    match shape.duration_ms {
        Some(length) => {
            Ok((format!("spoke a sentence: {} bytes, {length} ms of {}, in {ms} ms", bytes.len(), s.format), false))
        }
        None => Ok((
            format!(
                "spoke a sentence ({} bytes in {ms} ms), but not as speech.format = \"{}\" says",
                bytes.len(),
                s.format
            ),
            true,
        )),
    }
}
