//! What a transaction carries for the personas' devices (MSC2409 / MSC3202 extensions),
//! split per persona: its to-device messages (each names its `to_user_id` and
//! `to_device_id`), the device list changes (the same for every persona: each follows
//! the users it shares rooms with), its device's one-time key counts and unused fallback
//! key types. Pure: the inbox stores the result before the transaction is answered.
//!
//! Synapse puts every persona's key counts in every transaction about a room the persona
//! is in, changed or not (MSC3202 lets it leave unchanged ones out); [`LastCounts`]
//! remembers what each persona's device was last given, so a share that only repeats it
//! is not stored and the crypto not woken for it: the machine already acted on those
//! counts, and anything it still owes (a key upload that failed) it does on its own.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The transaction's crypto fields, as received (absent ones empty).
#[derive(Debug, Default, Deserialize)]
pub struct Extensions {
    #[serde(default, rename = "de.sorunome.msc2409.to_device")]
    pub to_device: Vec<Value>,
    #[serde(default, rename = "org.matrix.msc3202.device_lists")]
    pub device_lists: DeviceLists,
    /// user -> device -> algorithm -> count
    #[serde(default, rename = "org.matrix.msc3202.device_one_time_keys_count")]
    pub one_time_keys: BTreeMap<String, BTreeMap<String, BTreeMap<String, u64>>>,
    /// user -> device -> algorithms
    #[serde(default, rename = "org.matrix.msc3202.device_unused_fallback_key_types")]
    pub fallback_keys: BTreeMap<String, BTreeMap<String, Vec<String>>>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeviceLists {
    #[serde(default)]
    pub changed: Vec<String>,
    #[serde(default)]
    pub left: Vec<String>,
}

/// One persona's share of a transaction, as stored in its crypto inbox.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Pushed {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to_device: Vec<Value>,
    #[serde(default)]
    pub device_lists: DeviceLists,
    /// Per device of the persona: algorithm -> count.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub one_time_keys: BTreeMap<String, BTreeMap<String, u64>>,
    /// Per device of the persona: unused fallback key algorithms.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fallback_keys: BTreeMap<String, Vec<String>>,
}

impl Pushed {
    pub(super) fn is_empty(&self) -> bool {
        self.to_device.is_empty()
            && self.device_lists.changed.is_empty()
            && self.device_lists.left.is_empty()
            && self.one_time_keys.is_empty()
            && self.fallback_keys.is_empty()
    }
}

/// The key counts each persona's device was last given (what the transactions since
/// start-up stored in its crypto inbox), in memory: after a restart the first counts are
/// given again. Among several instances each remembers what it stored itself, so one
/// may skip counts another's row has since changed in the machine's view; that view is
/// then stale only until the counts change again, and they change with every key
/// claimed, the only event that can call for an upload.
#[derive(Debug, Default)]
pub struct LastCounts(HashMap<String, Counts>);

/// A device's one-time key counts and unused fallback key types, as a share carries them.
type Counts = (BTreeMap<String, BTreeMap<String, u64>>, BTreeMap<String, Vec<String>>);

impl LastCounts {
    /// Whether `share` brings `persona`'s device nothing but the counts it was last given.
    pub fn is_repeat(&self, persona: &str, share: &Pushed) -> bool {
        share.to_device.is_empty()
            && share.device_lists.changed.is_empty()
            && share.device_lists.left.is_empty()
            && self
                .0
                .get(persona)
                .is_some_and(|(keys, fallback)| *keys == share.one_time_keys && *fallback == share.fallback_keys)
    }

    /// Notes that `share` was stored for `persona` (call it once the store succeeded: a
    /// share noted but not stored would be taken for a repeat when the homeserver retries).
    pub fn note(&mut self, persona: &str, share: &Pushed) {
        if share.one_time_keys.is_empty() && share.fallback_keys.is_empty() {
            return; // no counts: the machine keeps what it was given before
        }
        self.0.insert(persona.to_owned(), (share.one_time_keys.clone(), share.fallback_keys.clone()));
    }
}

/// Most to-device messages taken from one transaction (Synapse sends at most 100): a
/// flood of them costs no more than this.
pub const MAX_TO_DEVICE: usize = 1_000;

impl Extensions {
    /// Adds `other`'s fields to these.
    pub fn merge(&mut self, other: Extensions) {
        self.to_device.extend(other.to_device);
        self.device_lists.changed.extend(other.device_lists.changed);
        self.device_lists.left.extend(other.device_lists.left);
        self.one_time_keys.extend(other.one_time_keys);
        self.fallback_keys.extend(other.fallback_keys);
    }

    /// Whether the transaction carried anything for devices.
    pub fn is_empty(&self) -> bool {
        self.to_device.is_empty()
            && self.device_lists.changed.is_empty()
            && self.device_lists.left.is_empty()
            && self.one_time_keys.is_empty()
            && self.fallback_keys.is_empty()
    }

    /// Each persona's share (personas by user id); what is for no persona is dropped.
    pub fn split(self, personas: &[String]) -> Vec<(String, Pushed)> {
        let mut out: Vec<(String, Pushed)> = personas.iter().map(|p| (p.clone(), Pushed::default())).collect();
        let mut dropped = 0usize;
        for (n, message) in self.to_device.into_iter().enumerate() {
            let to = message.get("to_user_id").and_then(Value::as_str).unwrap_or_default();
            match out.iter_mut().find(|(p, _)| p == to) {
                Some((_, share)) if n < MAX_TO_DEVICE => share.to_device.push(message),
                _ => dropped += 1,
            }
        }
        if dropped > 0 {
            tracing::debug!(dropped, "to-device messages for no persona's device (or over the cap) dropped");
        }
        for (persona, share) in &mut out {
            share.device_lists = self.device_lists.clone();
            if let Some(counts) = self.one_time_keys.get(persona.as_str()) {
                share.one_time_keys = counts.clone();
            }
            if let Some(types) = self.fallback_keys.get(persona.as_str()) {
                share.fallback_keys = types.clone();
            }
        }
        out.retain(|(_, share)| !share.is_empty());
        out
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_transaction_is_split_per_persona_and_what_is_for_no_persona_is_dropped() {
        let ext: Extensions = serde_json::from_value(json!({
            "de.sorunome.msc2409.to_device": [
                {"type": "m.room.encrypted", "to_user_id": "@bot:x", "to_device_id": "D1", "sender": "@a:x", "content": {}},
                {"type": "m.room.encrypted", "to_user_id": "@stranger:x", "to_device_id": "S", "sender": "@a:x", "content": {}},
            ],
            "org.matrix.msc3202.device_lists": {"changed": ["@a:x"], "left": []},
            "org.matrix.msc3202.device_one_time_keys_count": {"@bot:x": {"D1": {"signed_curve25519": 3}}},
            "org.matrix.msc3202.device_unused_fallback_key_types": {"@helper:x": {"D2": ["signed_curve25519"]}},
        }))
        .expect("extensions");
        let split = ext.split(&["@bot:x".to_owned(), "@helper:x".to_owned()]);
        assert_eq!(split.len(), 2);
        let (bot, b) = &split[0];
        assert_eq!(bot, "@bot:x");
        assert_eq!(b.to_device.len(), 1);
        assert_eq!(b.one_time_keys["D1"]["signed_curve25519"], 3);
        assert_eq!(b.device_lists.changed, vec!["@a:x".to_owned()]);
        let (helper, h) = &split[1];
        assert_eq!(helper, "@helper:x");
        assert!(h.to_device.is_empty());
        assert_eq!(h.fallback_keys["D2"], vec!["signed_curve25519".to_owned()]);
        // Stored and read back as the same.
        let text = serde_json::to_string(b).expect("json");
        assert_eq!(&serde_json::from_str::<Pushed>(&text).expect("back"), b);
    }

    fn counts(n: u64, fallback: &[&str]) -> Pushed {
        let mut share = Pushed::default();
        share.one_time_keys.insert("D1".into(), BTreeMap::from([("signed_curve25519".into(), n)]));
        share.fallback_keys.insert("D1".into(), fallback.iter().map(|t| (*t).to_owned()).collect());
        share
    }

    #[test]
    fn only_counts_a_device_was_last_given_are_a_repeat() {
        let mut last = LastCounts::default();
        assert!(!last.is_repeat("@bot:x", &counts(50, &["signed_curve25519"])), "nothing given yet");
        last.note("@bot:x", &counts(50, &["signed_curve25519"]));
        assert!(last.is_repeat("@bot:x", &counts(50, &["signed_curve25519"])));
        assert!(!last.is_repeat("@helper:x", &counts(50, &["signed_curve25519"])), "another persona's device");
        assert!(!last.is_repeat("@bot:x", &counts(20, &["signed_curve25519"])), "keys were claimed");
        assert!(!last.is_repeat("@bot:x", &counts(50, &[])), "the fallback key was used");
        let mut with_message = counts(50, &["signed_curve25519"]);
        with_message.to_device.push(json!({"type": "m.room.encrypted"}));
        assert!(!last.is_repeat("@bot:x", &with_message), "a to-device message is news");
        let mut with_change = counts(50, &["signed_curve25519"]);
        with_change.device_lists.changed.push("@a:x".into());
        assert!(!last.is_repeat("@bot:x", &with_change), "a device list change is news");
        // A share without counts leaves the last ones in place.
        last.note("@bot:x", &with_message);
        last.note("@bot:x", &Pushed { to_device: vec![json!({})], ..Pushed::default() });
        assert!(last.is_repeat("@bot:x", &counts(50, &["signed_curve25519"])));
        last.note("@bot:x", &counts(20, &["signed_curve25519"]));
        assert!(!last.is_repeat("@bot:x", &counts(50, &["signed_curve25519"])), "counts are compared with the last");
    }

    #[test]
    fn an_empty_transaction_gives_nothing_to_store() {
        let ext: Extensions = serde_json::from_value(json!({"de.sorunome.msc2409.to_device": []})).expect("ext");
        assert!(ext.is_empty());
        assert!(ext.split(&["@bot:x".to_owned()]).is_empty());
    }
}
