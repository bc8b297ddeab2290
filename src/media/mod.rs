//! What members send beyond text, made into something a model can take: a picture
//! fetched from the homeserver's media repository as the persona (authenticated media;
//! decrypted when the room is encrypted), scaled down within `[media]`'s bounds and
//! re-encoded as a JPEG `data:` URL; a text-like file read as text. Nothing is fetched
//! from anywhere but the homeserver, and only what a turn's own room holds is asked for
//! (the turn chooses; see `turn::media`).
//!
//! Scaling and reading (`scale`, `text`) are pure; `fetch` is the one place that
//! downloads, through `matrix`.

mod fetch;
mod scale;
mod seal;
mod text;
mod upload;

use serde_json::Value;

pub use fetch::Media;
pub use scale::scale;
pub use seal::{Secret, seal};
pub use text::{is_text_like, read_text};
pub use upload::{Upload, UploadError, Uploaded, decode_data_url};

/// `[media]`'s bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest side of a picture the model gets, in pixels.
    pub max_image_px: u32,
    /// Bytes of a picture the model gets, after scaling.
    pub max_image_bytes: usize,
    /// Pictures per turn at most (the newest).
    pub images_per_turn: usize,
    /// Bytes of a text file read at most.
    pub max_file_bytes: usize,
    /// Bytes of one upload at most.
    pub max_upload_bytes: usize,
    /// Uploads per turn at most.
    pub uploads_per_turn: usize,
}

/// Bytes of a picture fetched at most, before scaling (a phone photo is a few MB).
pub const MAX_SOURCE_BYTES: usize = 32 * 1024 * 1024;

/// One message's media, as the model gets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// A picture: a `data:image/jpeg;base64,...` URL and its size once scaled.
    Image { data_url: String, width: u32, height: u32 },
    /// A text file's text.
    Text(String),
    /// A voice or audio message's words, and how long it was (seconds).
    Spoken { text: String, seconds: u64 },
    /// Not read, and why (too large, not text, not fetched).
    Unread(String),
}

/// What kind of media a message carries, from its event type and `msgtype`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Image,
    File,
    /// `m.audio`: a voice message (`org.matrix.msc3245.voice`) or an audio file.
    Audio,
}

impl Kind {
    /// The kind of `event` (a whole event), if it carries media.
    pub fn of(event: &Value) -> Option<Self> {
        if event.get("type").and_then(Value::as_str) == Some("m.sticker") {
            return Some(Kind::Image);
        }
        match event.get("content")?.get("msgtype").and_then(Value::as_str)? {
            "m.image" => Some(Kind::Image),
            "m.file" => Some(Kind::File),
            "m.audio" => Some(Kind::Audio),
            _ => None,
        }
    }
}

/// The name a media message goes by: its `filename`, else its `body`.
pub fn name(content: &Value) -> String {
    let name = content.get("filename").or_else(|| content.get("body")).and_then(Value::as_str).unwrap_or("unnamed");
    crate::blocks::cut(name.trim(), 120)
}

/// A media message's `mxc://` URL (`url`, or `file.url` when encrypted).
pub fn url(content: &Value) -> Option<&str> {
    let url = content.get("url").or_else(|| content.pointer("/file/url")).and_then(Value::as_str)?;
    crate::matrix::parse_mxc(url).is_some().then_some(url)
}

/// A media message's caption: its `body` when a `filename` names the file apart.
pub fn caption(content: &Value) -> Option<&str> {
    let body = content.get("body").and_then(Value::as_str)?;
    let filename = content.get("filename").and_then(Value::as_str)?;
    (body.trim() != filename.trim() && !body.trim().is_empty()).then_some(body)
}
