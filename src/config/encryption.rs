//! `[encryption]`: end-to-end encrypted rooms.

use serde::Deserialize;

use super::sections::default_true;

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
}

impl Default for Encryption {
    fn default() -> Self {
        Self { enabled: true, wait_for_key_secs: default_wait_for_key() }
    }
}

fn default_wait_for_key() -> u64 {
    30
}
