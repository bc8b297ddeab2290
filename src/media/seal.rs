//! Attachments encrypted as Element encrypts them (the Matrix spec's "Sending encrypted
//! attachments"): AES-256-CTR with a random key and a random 64-bit IV prefix (the
//! counter half zero), the ciphertext's SHA-256 beside it, all in the `file` object an
//! encrypted `m.image` / `m.file` carries. The key and IV are chosen once and kept (see
//! `media::upload`), so sealing the same bytes again gives the same ciphertext: a fill
//! retried after a crash matches what the homeserver may already hold.

use aes::cipher::{KeyIvInit, StreamCipher};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use rand::RngCore;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

type Aes256Ctr = ctr::Ctr128BE<aes::Aes256>;

/// A key and IV for one attachment.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    key: [u8; 32],
    iv: [u8; 16],
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// A new random key and IV (the IV's counter half zero, as the spec asks).
    pub fn random() -> Self {
        let mut rng = rand::rng();
        let (mut key, mut iv) = ([0u8; 32], [0u8; 16]);
        rng.fill_bytes(&mut key);
        rng.fill_bytes(&mut iv[..8]);
        Self { key, iv }
    }

    /// The secret a `file` object (as [`seal`] made it) holds.
    pub fn of(file: &Value) -> Option<Self> {
        let key = URL_SAFE_NO_PAD.decode(file.pointer("/key/k")?.as_str()?.trim_end_matches('=')).ok()?;
        let iv = STANDARD_NO_PAD.decode(file.get("iv")?.as_str()?.trim_end_matches('=')).ok()?;
        Some(Self { key: key.try_into().ok()?, iv: iv.try_into().ok()? })
    }
}

/// `clear` encrypted with `secret`, and the `file` object that opens it (without `url`:
/// the caller adds the `mxc://` URL the ciphertext is stored at).
pub fn seal(clear: &[u8], secret: &Secret) -> (Vec<u8>, Value) {
    let mut data = clear.to_vec();
    Aes256Ctr::new(&secret.key.into(), &secret.iv.into()).apply_keystream(&mut data);
    let hash = Sha256::digest(&data);
    let file = json!({
        "v": "v2",
        "key": {
            "kty": "oct",
            "key_ops": ["encrypt", "decrypt"],
            "alg": "A256CTR",
            "k": URL_SAFE_NO_PAD.encode(secret.key),
            "ext": true,
        },
        "iv": STANDARD_NO_PAD.encode(secret.iv),
        "hashes": {"sha256": STANDARD_NO_PAD.encode(hash)},
    });
    (data, file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_sealed_opens_with_matrix_sdk_crypto_and_seals_the_same_again() {
        let secret = Secret::random();
        let (ciphertext, mut file) = seal(b"a picture's bytes", &secret);
        assert_ne!(ciphertext, b"a picture's bytes");
        assert_eq!(Secret::of(&file), Some(secret.clone()), "the file object keeps the secret");
        assert_eq!(seal(b"a picture's bytes", &secret).0, ciphertext, "the same bytes again");
        file["url"] = "mxc://example.org/abc".into();
        // Opened the way clients open it (matrix-sdk-crypto's decryptor, hash checked).
        let info: matrix_sdk_crypto::MediaEncryptionInfo = serde_json::from_value(file).expect("a file object");
        let mut cursor = std::io::Cursor::new(ciphertext);
        let mut clear = Vec::new();
        let mut reader = matrix_sdk_crypto::AttachmentDecryptor::new(&mut cursor, info).expect("decryptor");
        std::io::Read::read_to_end(&mut reader, &mut clear).expect("decrypts");
        assert_eq!(clear, b"a picture's bytes");
        assert_ne!(Secret::random(), secret, "each attachment has its own key");
    }
}
