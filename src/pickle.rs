//! The pickle key: what the personas' crypto secrets are encrypted with in the database.
//!
//! An Olm account, its Olm sessions, the room keys it holds and its cross-signing private
//! keys are all a persona needs to read every encrypted room it is in and to speak as its
//! device. Kept as plain JSON, anyone who gets a copy of the database (a backup, a
//! replica, a dump) gets them. So the store seals each such value with a key kept outside
//! the database (`encryption.pickle_key_file`, written by `richbot init` or
//! `richbot generate-pickle-key`): a copy of the database alone reads nothing of them.
//!
//! A sealed value is text: [`PREFIX`] then the base64 of a random 24-byte nonce and the
//! XChaCha20-Poly1305 ciphertext (with its tag) of the clear value. The persona's id is the
//! associated data, so a value moved to another persona's rows does not open. A clear
//! value (JSON, never starting with the prefix) is still read, which is how a store from
//! before the key is read while it is sealed (`store::crypto`, `pickles.rs`).

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

/// What every sealed value starts with (and no JSON text does).
pub const PREFIX: &str = "rbk1:";
const NONCE_LEN: usize = 24;
const KEY_LEN: usize = 32;

/// A pickle key, ready to seal and open. `Debug` shows nothing of it.
#[derive(Clone)]
pub struct PickleKey {
    cipher: XChaCha20Poly1305,
}

impl std::fmt::Debug for PickleKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PickleKey(..)")
    }
}

/// A sealed value that does not open.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("it is sealed with a pickle key and none is configured: set encryption.pickle_key_file to that key's file")]
    NoKey,
    #[error(
        "it does not open with the configured pickle key (another key, or the value was altered): restore the key \
         file this database was used with, or start the persona's encryption over with `richbot reset-crypto`"
    )]
    WrongKey,
    #[error("it is not a well-formed sealed value")]
    Malformed,
}

impl PickleKey {
    /// A key from its file's text: the base64 of 32 bytes (surrounding whitespace ignored).
    pub fn from_text(text: &str) -> Result<Self, String> {
        let bytes = STANDARD.decode(text.trim()).map_err(|_| {
            format!("must hold the base64 of {KEY_LEN} random bytes (as `richbot generate-pickle-key` writes)")
        })?;
        if bytes.len() != KEY_LEN {
            return Err(format!("must hold {KEY_LEN} bytes, base64-encoded; it holds {}", bytes.len()));
        }
        let cipher = XChaCha20Poly1305::new_from_slice(&bytes).map_err(|e| e.to_string())?;
        Ok(Self { cipher })
    }

    /// The text of a new key's file: 32 random bytes, base64, and a line end.
    pub fn generate_text() -> String {
        let bytes: [u8; KEY_LEN] = rand::random();
        format!("{}\n", STANDARD.encode(bytes))
    }

    /// `clear`, sealed for `persona`.
    pub fn seal(&self, persona: &str, clear: &str) -> String {
        let nonce: [u8; NONCE_LEN] = rand::random();
        let payload = Payload { msg: clear.as_bytes(), aad: persona.as_bytes() };
        let sealed =
            self.cipher.encrypt(XNonce::from_slice(&nonce), payload).expect("XChaCha20-Poly1305 seals any length");
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&sealed);
        format!("{PREFIX}{}", STANDARD.encode(bytes))
    }

    /// The clear text of `stored`, sealed for `persona`, or `stored` itself when it is clear.
    pub fn open(&self, persona: &str, stored: String) -> Result<String, Error> {
        let Some(body) = stored.strip_prefix(PREFIX) else { return Ok(stored) };
        let bytes = STANDARD.decode(body).map_err(|_| Error::Malformed)?;
        if bytes.len() < NONCE_LEN {
            return Err(Error::Malformed);
        }
        let (nonce, sealed) = bytes.split_at(NONCE_LEN);
        let clear = self
            .cipher
            .decrypt(XNonce::from_slice(nonce), Payload { msg: sealed, aad: persona.as_bytes() })
            .map_err(|_| Error::WrongKey)?;
        String::from_utf8(clear).map_err(|_| Error::Malformed)
    }
}

/// Whether `stored` is a sealed value.
pub fn is_sealed(stored: &str) -> bool {
    stored.starts_with(PREFIX)
}

/// `stored` opened with `key`, if any: a clear value passes as it is, a sealed one needs
/// the key it was sealed with.
pub fn open(key: Option<&PickleKey>, persona: &str, stored: String) -> Result<String, Error> {
    match key {
        Some(key) => key.open(persona, stored),
        None if is_sealed(&stored) => Err(Error::NoKey),
        None => Ok(stored),
    }
}

/// Writes a new key to `path` (0600, never over an existing file).
pub fn write_new(path: &Path) -> Result<(), crate::private_files::Error> {
    crate::private_files::write_private(path, &PickleKey::generate_text(), false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> PickleKey {
        PickleKey::from_text(&PickleKey::generate_text()).expect("a new key reads back")
    }

    #[test]
    fn a_sealed_value_opens_only_with_its_key_and_its_persona() {
        let (k, other) = (key(), key());
        let sealed = k.seal("@a:x", r#"{"pickle":"secret"}"#);
        assert!(is_sealed(&sealed) && !sealed.contains("secret"), "{sealed}");
        assert_ne!(sealed, k.seal("@a:x", r#"{"pickle":"secret"}"#), "a fresh nonce each time");
        assert_eq!(k.open("@a:x", sealed.clone()).expect("opens"), r#"{"pickle":"secret"}"#);
        assert!(matches!(other.open("@a:x", sealed.clone()), Err(Error::WrongKey)));
        assert!(matches!(k.open("@b:x", sealed.clone()), Err(Error::WrongKey)), "moved to another persona");
        assert!(matches!(open(None, "@a:x", sealed.clone()), Err(Error::NoKey)));
        let mut tampered = sealed.into_bytes();
        let last = tampered.len() - 3;
        tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).expect("ascii");
        assert!(matches!(k.open("@a:x", tampered), Err(Error::WrongKey | Error::Malformed)));
        assert!(matches!(k.open("@a:x", format!("{PREFIX}AAAA")), Err(Error::Malformed)));
    }

    #[test]
    fn clear_values_from_before_the_key_are_read_as_they_are() {
        assert_eq!(key().open("@a:x", "{\"a\":1}".into()).expect("clear"), "{\"a\":1}");
        assert_eq!(open(None, "@a:x", "\"x\"".into()).expect("clear"), "\"x\"");
    }

    #[test]
    fn a_key_file_holds_exactly_32_bytes_in_base64() {
        let text = PickleKey::generate_text();
        assert_eq!(STANDARD.decode(text.trim()).expect("base64").len(), 32);
        assert!(PickleKey::from_text(&format!("  {text}\n")).is_ok());
        assert!(PickleKey::from_text("not base64!").is_err());
        assert!(PickleKey::from_text(&STANDARD.encode([0u8; 16])).unwrap_err().contains("holds 16"));
        assert_eq!(format!("{:?}", key()), "PickleKey(..)");
    }
}
