//! Does the homeserver send what encryption needs? A persona's device sends itself a
//! to-device message (`org.richbot.probe` with a random nonce); the inbox's door, seeing
//! it come back in a transaction, records it with whether that transaction also carried
//! the device's one-time key counts (the homeserver mentions them for every device a
//! transaction concerns). No answer within the wait means no to-device messages
//! (`msc2409_to_device_messages_enabled`); an answer without counts means no key counts
//! or device lists (`msc3202_transaction_extensions`). `check` and `serve` both ask.
//!
//! `serve` asks until a probe finds encryption working (a probe that timed out under
//! load is not the last word), and remembers the last finding in `meta` for the next
//! start: until a probe has answered, encrypted rooms are read and written as the last
//! run found, and new direct chats are made encrypted only once encryption is known to
//! work.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use rand::distr::{Alphanumeric, SampleString};
use ruma::UserId;
use serde_json::{Value, json};

use super::{DEVICE_ID, Error};
use crate::matrix::{self, enc};
use crate::store::Store;

/// The to-device event type of a probe.
pub const PROBE_TYPE: &str = "org.richbot.probe";
/// The `meta` key a probe's arrival is recorded under (with its nonce).
const SEEN: &str = "crypto_probe:";

/// The `meta` key the last probe's finding is kept under (`works` or `lacking`).
pub const FOUND: &str = "crypto_probe_found";

/// Whether the homeserver sends what encryption needs, as far as is known: 0 until a
/// probe (of this run or the last) answered, then `WORKS` or `LACKING`.
#[derive(Debug, Default)]
pub struct Support(AtomicU8);

const WORKS: u8 = 1;
const LACKING: u8 = 2;

impl Support {
    /// Encrypted rooms are read and written unless a probe found the homeserver lacking.
    pub fn active(&self) -> bool {
        self.0.load(Ordering::Relaxed) != LACKING
    }

    /// A probe found encryption working.
    pub fn works(&self) -> bool {
        self.0.load(Ordering::Relaxed) == WORKS
    }

    pub fn set(&self, works: bool) {
        self.0.store(if works { WORKS } else { LACKING }, Ordering::Relaxed);
    }
}

/// Keeps what a probe found for the next start.
pub async fn remember(store: &Store, works: bool) -> Result<(), crate::store::Error> {
    store.set_meta(FOUND, if works { "works" } else { "lacking" }).await
}

/// What the last probe (of any earlier run) found, if one answered.
pub async fn recall(store: &Store) -> Result<Option<bool>, crate::store::Error> {
    Ok(store.meta(FOUND).await?.and_then(|found| match found.as_str() {
        "works" => Some(true),
        "lacking" => Some(false),
        _ => None,
    }))
}

/// What a probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    pub to_device: bool,
    pub key_counts: bool,
}

impl Probe {
    pub fn ok(self) -> bool {
        self.to_device && self.key_counts
    }

    /// The `homeserver.yaml` lines (Synapse) that would make it `ok`, if any are missing.
    pub fn fix(self) -> Option<String> {
        let mut lines = Vec::new();
        if !self.key_counts {
            lines.push("    msc3202_transaction_extensions: true");
        }
        if !self.to_device {
            lines.push("    msc2409_to_device_messages_enabled: true");
        }
        (!lines.is_empty())
            .then(|| format!("add to homeserver.yaml and restart it:\n  experimental_features:\n{}", lines.join("\n")))
    }
}

/// Records a probe that came back (`nonce` from its content), at the door.
pub async fn seen(store: &Store, nonce: &str, key_counts: bool) -> Result<(), crate::store::Error> {
    store.set_meta(&format!("{SEEN}{nonce}"), &json!({"key_counts": key_counts}).to_string()).await
}

/// Sends a probe from `persona`'s device to itself and waits up to `wait` for it.
pub async fn probe(store: &Store, matrix: &matrix::Client, persona: &UserId, wait: Duration) -> Result<Probe, Error> {
    let device =
        store.crypto_kv(persona.as_str(), DEVICE_ID).await?.ok_or_else(|| Error::NotReady(persona.to_string()))?;
    let nonce = Alphanumeric.sample_string(&mut rand::rng(), 16);
    let path = format!("/_matrix/client/v3/sendToDevice/{}/probe-{nonce}", enc(PROBE_TYPE));
    let body = json!({"messages": {persona.as_str(): {device.as_str(): {"nonce": nonce}}}});
    matrix.call_device("PUT", &path, Some(&body), persona, &device).await?;
    let deadline = Instant::now() + wait;
    loop {
        if let Some(found) = store.take_meta(&format!("{SEEN}{nonce}")).await? {
            let v: Value = serde_json::from_str(&found).unwrap_or(Value::Null);
            return Ok(Probe { to_device: true, key_counts: v["key_counts"].as_bool().unwrap_or(false) });
        }
        if Instant::now() >= deadline {
            return Ok(Probe { to_device: false, key_counts: false });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fix_names_exactly_the_missing_lines() {
        assert_eq!(Probe { to_device: true, key_counts: true }.fix(), None);
        let none = Probe { to_device: false, key_counts: false }.fix().expect("a fix");
        assert!(
            none.contains("msc3202_transaction_extensions: true")
                && none.contains("msc2409_to_device_messages_enabled: true")
        );
        let counts = Probe { to_device: true, key_counts: false }.fix().expect("a fix");
        assert!(counts.contains("msc3202") && !counts.contains("msc2409"));
    }
}
