//! Uploading what a turn shows (an MCP tool's image, a payload's `data:` URL, a chart) to
//! the media repository as its persona, exactly once: the homeserver reserves the `mxc://`
//! URL first, the store records it under the call that asked (`UploadKey`), and only then
//! are the bytes sent. A resumed turn finds the record and at most fills the same URL
//! again. Bounded by `[media]`: bytes per upload, uploads per turn.
//!
//! An upload for an encrypted room is encrypted first (`seal`), its key and IV recorded
//! with the URL before a byte goes: the media repository never holds it in the clear, and
//! a fill made again sends the same ciphertext.

use base64::Engine;
use ruma::UserId;

use super::Media;
use super::seal::{Secret, seal};
use crate::store::{Store, UploadKey};

/// One picture or file to upload.
#[derive(Debug, Clone, Copy)]
pub struct Upload<'a> {
    pub key: UploadKey,
    pub bytes: &'a [u8],
    pub mimetype: &'a str,
    pub name: &'a str,
    /// For an encrypted room: stored encrypted, its key returned.
    pub encrypt: bool,
}

/// A made upload: its `mxc://` URL and, when encrypted, the `file` object (with the URL)
/// that an encrypted message carries to open it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uploaded {
    pub mxc: String,
    pub file: Option<serde_json::Value>,
}

/// Why an upload did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UploadError {
    #[error("{0} bytes; at most {1} bytes are uploaded")]
    TooLarge(usize, usize),
    #[error("at most {0} uploads per turn")]
    TooMany(usize),
    #[error("the homeserver refused the upload: {0}")]
    Refused(String),
    #[error("the homeserver is unavailable: {0}")]
    Unavailable(String),
    #[error("store: {0}")]
    Store(String),
}

impl Media {
    /// The upload `upload` stands for, made by `persona`: the one recorded for its key if
    /// there is one (filled again if it never was), else a new one.
    pub async fn upload(&self, store: &Store, persona: &UserId, upload: Upload<'_>) -> Result<Uploaded, UploadError> {
        let stored = |e: crate::store::Error| UploadError::Store(e.to_string());
        // A record: its URL, whether it is still to fill, and the key it is sealed with.
        let recorded = |row: crate::store::UploadRow| {
            let file = row.encryption.as_deref().and_then(|e| serde_json::from_str::<serde_json::Value>(e).ok());
            (row.mxc, !row.uploaded, file)
        };
        let (mxc, fill, file) = match store.upload(upload.key).await.map_err(stored)? {
            Some(row) => recorded(row),
            None => {
                let max = self.limits.max_upload_bytes;
                if upload.bytes.len() > max {
                    return Err(UploadError::TooLarge(upload.bytes.len(), max));
                }
                let per_turn = self.limits.uploads_per_turn;
                if store.uploads_in_turn(upload.key.turn).await.map_err(stored)? >= per_turn as u64 {
                    return Err(UploadError::TooMany(per_turn));
                }
                let file = upload.encrypt.then(|| seal(upload.bytes, &Secret::random()).1);
                let mxc = self.matrix.create_mxc(persona).await.map_err(matrix_error)?;
                let now = crate::clock::now_ms();
                let encryption = file.as_ref().map(serde_json::Value::to_string);
                let (key, bytes) = (upload.key, upload.bytes.len());
                store
                    .reserve_upload(key, persona, mxc.as_str(), bytes, encryption.as_deref(), now)
                    .await
                    .map_err(stored)?;
                // Another run may have recorded it first: what is recorded stands.
                let row = store.upload(upload.key).await.map_err(stored)?;
                recorded(row.ok_or_else(|| UploadError::Store("the upload's record vanished".into()))?)
            }
        };
        // The key and IV are the recorded ones; the hash is of these bytes.
        let sealed = file.as_ref().and_then(Secret::of).map(|secret| seal(upload.bytes, &secret));
        if fill {
            let clear = crate::mime::or_octet_stream(upload.mimetype);
            let (bytes, mimetype) = match &sealed {
                Some((ciphertext, _)) => (ciphertext.as_slice(), "application/octet-stream"),
                None => (upload.bytes, clear),
            };
            self.matrix.upload_to(&mxc, persona, bytes, mimetype, upload.name).await.map_err(matrix_error)?;
            store.upload_done(upload.key).await.map_err(stored)?;
            tracing::info!(%persona, mxc, bytes = upload.bytes.len(), encrypted = sealed.is_some(), "uploaded");
        }
        let file = sealed.map(|(_, mut file)| {
            file["url"] = serde_json::Value::String(mxc.clone());
            file
        });
        Ok(Uploaded { mxc, file })
    }
}

fn matrix_error(e: crate::matrix::Error) -> UploadError {
    match e {
        crate::matrix::Error::Unavailable(why) => UploadError::Unavailable(why),
        other => UploadError::Refused(other.to_string()),
    }
}

/// The media type and bytes of a `data:` URL (`data:[type][;base64],data`; without
/// `;base64` the data is percent-encoded text). `None` for anything else.
pub fn decode_data_url(url: &str) -> Option<Result<(String, Vec<u8>), String>> {
    let rest = url.strip_prefix("data:")?;
    let Some((head, data)) = rest.split_once(',') else {
        return Some(Err("a data: URL needs a comma before its data".into()));
    };
    let mut params = head.split(';');
    let mimetype = params.next().filter(|m| !m.is_empty()).unwrap_or("text/plain").to_ascii_lowercase();
    if !crate::mime::valid(&mimetype) {
        return Some(Err(format!("\"{}\" is not a media type", crate::blocks::cut(&mimetype, 40))));
    }
    let bytes = if params.any(|p| p.eq_ignore_ascii_case("base64")) {
        let data: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        match base64::engine::general_purpose::STANDARD.decode(data.as_bytes()) {
            Ok(b) => b,
            Err(e) => return Some(Err(format!("its base64 does not decode ({e})"))),
        }
    } else {
        percent_encoding::percent_decode_str(data).collect()
    };
    Some(Ok((mimetype, bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_urls_decode_base64_and_percent_encoded_text() {
        let (m, b) = decode_data_url("data:image/png;base64,aGk=").unwrap().unwrap();
        assert_eq!((m.as_str(), b.as_slice()), ("image/png", b"hi".as_slice()));
        let (m, b) = decode_data_url("data:text/csv,a%2Cb%0A1%2C2").unwrap().unwrap();
        assert_eq!((m.as_str(), b.as_slice()), ("text/csv", b"a,b\n1,2".as_slice()));
        let (m, _) = decode_data_url("data:,x").unwrap().unwrap();
        assert_eq!(m, "text/plain");
        assert!(decode_data_url("mxc://a/b").is_none());
        assert!(decode_data_url("data:image/png;base64").unwrap().is_err());
        assert!(decode_data_url("data:image/png;base64,%%%").unwrap().is_err());
        assert!(decode_data_url("data:ima ge/png,x").unwrap().is_err());
    }
}
