//! Speech: members' voice messages made words, and (for personas that answer aloud) words
//! made a voice message, through OpenAI-compatible audio endpoints
//! (`POST {base_url}/audio/transcriptions`, multipart `file` + `model`;
//! `POST {base_url}/audio/speech`, JSON), as OpenAI, vLLM, whisper.cpp's server and
//! faster-whisper servers answer. The one place that talks to them (as `agent::llm` is
//! for the chat endpoint).
//!
//! An endpoint that refuses the key or has no such path (401, 403, 404) is the admin's to
//! fix and is told as misconfiguration; anything else (down, timed out, 5xx) is an outage.

use std::time::Duration;

use serde_json::Value;

mod length;
mod mp3;
mod ogg;
mod shape;
mod wav;

pub use length::{UNKNOWN, measure, most_bytes};
pub use shape::{Shape, shape};

/// Where members' voice messages are made words (`[transcription]`), and its bounds.
#[derive(Debug, Clone)]
pub struct Listening {
    pub endpoint: Endpoint,
    /// Longest voice message transcribed (by its stated duration), in seconds.
    pub max_seconds: u64,
    /// Largest voice message fetched, in bytes.
    pub max_bytes: usize,
    /// Seconds transcribed per asker per rolling day (0: no limit).
    pub seconds_per_day: u64,
}

/// Where a persona's answers are spoken (`[speech]`).
#[derive(Debug, Clone)]
pub struct Speaking {
    pub endpoint: Endpoint,
    pub voice: String,
    /// `ogg` (Opus) or `wav`.
    pub format: String,
}

/// What a turn can hear and say; neither when unset.
#[derive(Debug, Clone, Default)]
pub struct Voice {
    pub listening: Option<Listening>,
    pub speaking: Option<Speaking>,
}

/// Why audio was not made text (or speech).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// 401, 403 or 404: the key or the URL is wrong.
    #[error("the endpoint refused the request (HTTP {0}): check its base_url and key")]
    Misconfigured(u16, String),
    /// Down, timed out, or failed otherwise; the same may work later.
    #[error("{0}")]
    Failed(String),
}

/// An OpenAI-compatible audio endpoint.
#[derive(Debug, Clone)]
pub struct Endpoint {
    http: reqwest::Client,
    base_url: String,
    model: String,
    key: Option<String>,
}

impl Endpoint {
    pub fn new(base_url: &str, model: &str, key: Option<String>, timeout: Duration) -> Self {
        let http = reqwest::Client::builder().timeout(timeout).build().unwrap_or_default();
        Self { http, base_url: base_url.trim_end_matches('/').to_owned(), model: model.to_owned(), key }
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The words spoken in `audio` (a file named `filename`, of type `mime`), and the
    /// seconds the endpoint says it heard, when it says (`duration`, as `verbose_json`
    /// answers, or `usage.seconds`, as OpenAI's `json` does for whisper-1).
    pub async fn transcribe(&self, audio: Vec<u8>, filename: &str, mime: &str) -> Result<Transcript, Error> {
        let boundary = format!("richbot-{:016x}", rand::random::<u64>());
        let body = multipart(
            &boundary,
            &[("model", &self.model), ("response_format", "json")],
            FilePart { name: filename, mime, bytes: &audio },
        );
        let request = self
            .http
            .post(format!("{}/audio/transcriptions", self.base_url))
            .header(reqwest::header::CONTENT_TYPE, format!("multipart/form-data; boundary={boundary}"))
            .body(body);
        let answer = read_limited(self.send(request).await?, MAX_TRANSCRIPTION_ANSWER).await?;
        let answer: Value = serde_json::from_slice(&answer).map_err(|e| Error::Failed(format!("not JSON: {e}")))?;
        let text =
            answer.get("text").and_then(Value::as_str).ok_or_else(|| Error::Failed("no text in its answer".into()))?;
        let seconds = answer
            .get("duration")
            .or_else(|| {
                answer.pointer("/usage/seconds").filter(|_| answer.pointer("/usage/type") == Some(&"duration".into()))
            })
            .and_then(Value::as_f64)
            .filter(|s| s.is_finite() && *s >= 0.0);
        Ok(Transcript { text: text.trim().to_owned(), seconds })
    }

    /// `text` spoken in `voice`, as `format` (`ogg`: Ogg Opus; `wav`).
    pub async fn speak(&self, text: &str, voice: &str, format: &str) -> Result<Vec<u8>, Error> {
        let response_format = if format == "ogg" { "opus" } else { format };
        let ask =
            serde_json::json!({"model": self.model, "input": text, "voice": voice, "response_format": response_format});
        let request = self.http.post(format!("{}/audio/speech", self.base_url)).json(&ask);
        read_limited(self.send(request).await?, MAX_SPEECH_ANSWER).await
    }

    /// Whether the endpoint answers at `path` (`audio/transcriptions` or `audio/speech`):
    /// asked with nothing to work on, it should refuse the request (400 or 422) but not
    /// the key or the path.
    pub async fn probe(&self, path: &str) -> Result<u16, Error> {
        let request = self.http.post(format!("{}/{path}", self.base_url));
        let request = match path {
            "audio/speech" => request.json(&serde_json::json!({"model": self.model, "input": ""})),
            _ => {
                let boundary = format!("richbot-{:016x}", rand::random::<u64>());
                let body = format!(
                    "--{boundary}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n{}\r\n--{boundary}--\r\n",
                    self.model
                );
                request
                    .header(reqwest::header::CONTENT_TYPE, format!("multipart/form-data; boundary={boundary}"))
                    .body(body)
            }
        };
        let response = self.respond(request).await?;
        match response.status().as_u16() {
            refused @ (400 | 422) => Ok(refused),
            _ => Ok(Self::accepted(response).await?.status().as_u16()),
        }
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response, Error> {
        Self::accepted(self.respond(request).await?).await
    }

    /// The endpoint's response, whatever its status: `Failed` only when there is none.
    async fn respond(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response, Error> {
        let request = match &self.key {
            Some(key) => request.bearer_auth(key),
            None => request,
        };
        request.send().await.map_err(|e| {
            Error::Failed(if e.is_timeout() {
                "it did not answer in time".into()
            } else {
                format!("it could not be reached: {e}")
            })
        })
    }

    /// `response` if it succeeded; 401, 403 and 404 are misconfiguration.
    async fn accepted(response: reqwest::Response) -> Result<reqwest::Response, Error> {
        let status = response.status().as_u16();
        match status {
            200..=299 => Ok(response),
            401 | 403 | 404 => Err(Error::Misconfigured(status, response.text().await.unwrap_or_default())),
            _ => Err(Error::Failed(format!("it answered HTTP {status}"))),
        }
    }
}

/// The most bytes read of a transcription endpoint's answer (JSON with the words).
const MAX_TRANSCRIPTION_ANSWER: usize = 1024 * 1024;
/// The most bytes read of a speech endpoint's answer (a clip: an hour of Opus at 64
/// kbit/s is under 30 MB).
pub const MAX_SPEECH_ANSWER: usize = 32 * 1024 * 1024;

/// What a transcription endpoint heard.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    pub text: String,
    /// The seconds it says it heard, when it says.
    pub seconds: Option<f64>,
}

/// `response`'s body, refused past `max` bytes (read as it comes, never more than that
/// held in memory).
async fn read_limited(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>, Error> {
    if response.content_length().is_some_and(|n| n > max as u64) {
        return Err(Error::Failed(format!("its answer is larger than {max} bytes")));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| Error::Failed(format!("its answer broke off: {e}")))? {
        if body.len() + chunk.len() > max {
            return Err(Error::Failed(format!("its answer is larger than {max} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A file sent in a `multipart/form-data` body.
struct FilePart<'a> {
    name: &'a str,
    mime: &'a str,
    bytes: &'a [u8],
}

/// A `multipart/form-data` body: text `fields`, then the `file`.
fn multipart(boundary: &str, fields: &[(&str, &str)], file: FilePart<'_>) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n").as_bytes(),
        );
    }
    let FilePart { name: filename, mime, bytes } = file;
    let filename: String = filename.chars().filter(|c| !matches!(c, '"' | '\\') && !c.is_control()).collect();
    let mime = crate::mime::or_octet_stream(mime);
    body.extend_from_slice(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\nContent-Type: {mime}\r\n\r\n")
            .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_members_media_type_adds_no_header_line_to_the_part() {
        let body = multipart(
            "B",
            &[],
            FilePart { name: "v.ogg\r\nX-Name: 1", mime: "audio/ogg\r\nX-Evil: 1", bytes: b"OggS" },
        );
        let text = String::from_utf8(body).expect("utf8");
        assert_eq!(
            text,
            "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"v.oggX-Name: 1\"\r\n\
             Content-Type: application/octet-stream\r\n\r\nOggS\r\n--B--\r\n"
        );
    }

    #[test]
    fn a_multipart_body_has_the_fields_then_the_file_and_no_quote_breaks_out_of_its_name() {
        let body =
            multipart("B", &[("model", "whisper-1")], FilePart { name: "a\"b.ogg", mime: "audio/ogg", bytes: b"OggS" });
        let text = String::from_utf8(body).expect("utf8");
        assert_eq!(
            text,
            "--B\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n--B\r\nContent-Disposition: \
             form-data; name=\"file\"; filename=\"ab.ogg\"\r\nContent-Type: audio/ogg\r\n\r\nOggS\r\n--B--\r\n"
        );
    }
}
