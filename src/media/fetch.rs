//! Fetching one message's media for a model: as the persona, from the homeserver's
//! media repository only, decrypted when the message was encrypted (its `file` carries
//! the key; the hash is checked), within the bounds, then scaled or read. Whatever goes
//! wrong, the message is still named to the model, with why it was not read.

use std::io::{Cursor, Read};

use base64::Engine;
use matrix_sdk_crypto::{AttachmentDecryptor, MediaEncryptionInfo};
use ruma::UserId;
use serde_json::Value;

use super::{Kind, Limits, MAX_SOURCE_BYTES, Part, is_text_like, name, read_text, scale};
use crate::matrix;

/// Fetches media for turns.
#[derive(Debug, Clone)]
pub struct Media {
    pub(super) matrix: matrix::Client,
    pub limits: Limits,
}

impl Media {
    pub fn new(matrix: matrix::Client, limits: Limits) -> Self {
        Self { matrix, limits }
    }

    /// What the model gets of `event` (an image or file message), fetched as `persona`.
    pub async fn part(&self, event: &Value, persona: &UserId) -> Part {
        let Some(kind) = Kind::of(event) else { return Part::Unread("not a picture or a file".into()) };
        let content = event.get("content").unwrap_or(&Value::Null);
        let (name, mime) = (name(content), content.pointer("/info/mimetype").and_then(Value::as_str));
        let size = content.pointer("/info/size").and_then(Value::as_u64).unwrap_or(0);
        let limits = self.limits;
        let cap = match kind {
            // Heard, not read: the turn's `voice` transcribes them.
            Kind::Audio => return Part::Unread("voice messages are transcribed, not read".into()),
            Kind::File if !is_text_like(mime, &name) => {
                return Part::Unread(format!("{} files are not read", mime.unwrap_or("binary")));
            }
            Kind::File => limits.max_file_bytes,
            Kind::Image => MAX_SOURCE_BYTES,
        };
        if size > cap as u64 {
            return Part::Unread(format!("larger than the {cap} bytes read"));
        }
        let bytes = match self.bytes(content, persona, cap).await {
            Ok(b) => b,
            Err(why) => {
                tracing::info!(%persona, file = name, why, "a member's file was not read");
                return Part::Unread(why);
            }
        };
        if kind != Kind::Image {
            return read_text(&bytes).map_or_else(|| Part::Unread("not UTF-8 text".into()), Part::Text);
        }
        let scaled = tokio::task::spawn_blocking(move || scale(&bytes, limits.max_image_px, limits.max_image_bytes));
        match scaled.await.map_err(|e| e.to_string()).and_then(|r| r) {
            Ok((jpeg, width, height)) => {
                let data = base64::engine::general_purpose::STANDARD.encode(jpeg);
                Part::Image { data_url: format!("data:image/jpeg;base64,{data}"), width, height }
            }
            Err(why) => Part::Unread(why),
        }
    }

    /// A voice or audio message's bytes (decrypted), at most `cap` of them.
    pub async fn audio(&self, event: &Value, persona: &UserId, cap: usize) -> Result<Vec<u8>, String> {
        self.bytes(event.get("content").unwrap_or(&Value::Null), persona, cap).await
    }

    /// The file's bytes, decrypted if it was encrypted.
    async fn bytes(&self, content: &Value, persona: &UserId, cap: usize) -> Result<Vec<u8>, String> {
        let encrypted = content.get("file");
        let url = encrypted.unwrap_or(content).get("url").and_then(Value::as_str).ok_or("it has no url")?;
        let fetched = self.matrix.download(url, persona, cap).await.map_err(|e| match e {
            matrix::Error::Unavailable(_) => "the homeserver could not be reached for it".to_owned(),
            e => format!("the homeserver would not give it: {e}"),
        })?;
        match encrypted {
            Some(file) => decrypt(file, fetched),
            None => Ok(fetched),
        }
    }
}

/// `ciphertext` decrypted with an encrypted message's `file` (key, iv, and the hash
/// checked at the end).
fn decrypt(file: &Value, ciphertext: Vec<u8>) -> Result<Vec<u8>, String> {
    let info: MediaEncryptionInfo =
        serde_json::from_value(file.clone()).map_err(|e| format!("its encryption info is broken: {e}"))?;
    let mut cursor = Cursor::new(ciphertext);
    let mut clear = Vec::new();
    AttachmentDecryptor::new(&mut cursor, info)
        .map_err(|e| format!("cannot decrypt it: {e}"))?
        .read_to_end(&mut clear)
        .map_err(|e| format!("cannot decrypt it: {e}"))?;
    Ok(clear)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_encrypted_files_key_decrypts_it_and_a_changed_byte_is_refused() {
        let mut clear = Cursor::new(b"a,b\n1,2\n".to_vec());
        let mut encryptor = matrix_sdk_crypto::AttachmentEncryptor::new(&mut clear);
        let mut ciphertext = Vec::new();
        encryptor.read_to_end(&mut ciphertext).expect("encrypt");
        // As a message carries it: the info and its url side by side.
        let mut file = serde_json::to_value(encryptor.finish()).expect("info");
        file["url"] = "mxc://example.org/abc".into();
        assert_eq!(decrypt(&file, ciphertext.clone()).expect("decrypts"), b"a,b\n1,2\n");
        ciphertext[0] ^= 1;
        assert!(decrypt(&file, ciphertext).is_err(), "the hash is checked");
    }
}
