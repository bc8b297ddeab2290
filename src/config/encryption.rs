//! `[encryption]`: end-to-end encrypted rooms.

use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;

use super::endpoints::{Found, secret_file};
use super::sections::default_true;
use crate::pickle::PickleKey;

/// `[encryption]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Encryption {
    /// Each persona gets a cross-signed device and answers in encrypted rooms (the
    /// homeserver must send to-device messages and key counts; `check` says what to add).
    /// Off: a persona in an encrypted room says once that it cannot read it.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// How long an encrypted message waits for its room key before the room is told
    /// (once an hour at most) that it could not be read.
    #[serde(default = "default_wait_for_key")]
    pub wait_for_key_secs: u64,
    /// The file holding the key the personas' crypto secrets (Olm accounts, sessions, room
    /// keys, cross-signing keys) are sealed with in the database (`richbot init` writes
    /// one; `richbot generate-pickle-key` for an existing deployment). Back it up apart
    /// from the database: without it, that state is lost (`richbot reset-crypto`).
    #[serde(default)]
    pub pickle_key_file: Option<PathBuf>,
}

impl Default for Encryption {
    fn default() -> Self {
        Self { enabled: true, wait_for_key_secs: default_wait_for_key(), pickle_key_file: None }
    }
}

fn default_wait_for_key() -> u64 {
    30
}

/// The pickle key from `encryption.pickle_key_file`; warns when encryption is on without
/// one (the secrets are then stored clear).
pub(super) fn pickle_key(encryption: &Encryption, found: &mut Found<'_>) -> Option<Arc<PickleKey>> {
    const KEY: &str = "encryption.pickle_key_file";
    let Some(file) = &encryption.pickle_key_file else {
        if encryption.enabled {
            found.warnings.push(format!(
                "{KEY} is not set: the personas' Olm accounts and room keys are stored unencrypted in the database; \
                 `richbot generate-pickle-key --out pickle.key` writes a key to set it to (see docs/admin/encryption.md)"
            ));
        }
        return None;
    };
    let path = if file.is_relative() { found.base.join(file) } else { file.clone() };
    if !crate::private_files::exists(&path) {
        found.problems.push(format!(
            "{KEY}: {} does not exist. `richbot generate-pickle-key --out {0}` writes a new key, for a database \
             whose crypto state was never sealed with another; otherwise restore that key's file",
            path.display()
        ));
        return None;
    }
    let text = secret_file(KEY, file, found)?;
    match PickleKey::from_text(&text) {
        Ok(key) => Some(Arc::new(key)),
        Err(e) => {
            found.problems.push(format!("{KEY}: {} {e}", path.display()));
            None
        }
    }
}

impl Encryption {
    pub(super) fn problems(&self, problems: &mut Vec<String>) {
        if self.wait_for_key_secs == 0 {
            problems.push("encryption.wait_for_key_secs: must be at least 1".to_owned());
        }
    }
}
