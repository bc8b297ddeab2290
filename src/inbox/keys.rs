//! What a transaction brings for the personas' devices (to-device messages such as room
//! keys, device list changes, one-time key counts), stored in their crypto inboxes before
//! the transaction is answered (the homeserver never sends a to-device message twice),
//! then handed to the crypto (`crate::crypto`), which is woken for it. A probe a persona
//! sent itself (`crypto::probe`) is recorded here instead, with whether the transaction
//! carried its device's key counts. A share that only repeats the key counts its device
//! was last given is left out (`crypto::LastCounts`): Synapse sends them with every
//! transaction about the persona's rooms, and each stored share is a round of the crypto.
//!
//! And what a room's state says of its encryption (`m.room.encryption`,
//! `m.room.history_visibility`), recorded as it arrives: a write made a moment later is
//! encrypted, and its key shared as the room says.

use std::sync::atomic::Ordering;

use serde_json::Value;

use super::Inbox;
use crate::clock::now_ms;
use crate::crypto::{self, Extensions};
use crate::store::{self, NewEvent};

impl Inbox {
    /// Stores `ext`'s shares for the personas' crypto inboxes; returns whether any was.
    pub(super) async fn keep_for_devices(&self, mut ext: Extensions) -> Result<bool, store::Error> {
        if self.crypto.is_none() || ext.is_empty() {
            return Ok(false);
        }
        let personas: Vec<String> = self.door.personas.all().iter().map(|p| p.user_id.to_string()).collect();
        let mut probes = Vec::new();
        ext.to_device.retain(|m| {
            let is_probe = m["type"] == crypto::PROBE_TYPE
                && m["sender"] == m["to_user_id"]
                && personas.iter().any(|p| m["sender"] == p.as_str());
            if is_probe {
                probes.push(m.clone());
            }
            !is_probe
        });
        for probe in probes {
            let (user, device) =
                (probe["to_user_id"].as_str().unwrap_or(""), probe["to_device_id"].as_str().unwrap_or(""));
            let counts = ext.one_time_keys.get(user).is_some_and(|d| d.contains_key(device));
            if let Some(nonce) = probe["content"]["nonce"].as_str() {
                crypto::probe_seen(&self.store, nonce, counts).await?;
            }
        }
        let mut last = self.last_counts.lock().await;
        let (shares, repeats): (Vec<_>, Vec<_>) =
            ext.split(&personas).into_iter().partition(|(persona, share)| !last.is_repeat(persona, share));
        if let Some(crypto) = &self.crypto {
            crypto.counters().repeated_counts.fetch_add(repeats.len() as u64, Ordering::Relaxed);
        }
        let rows: Vec<(String, String)> = shares
            .iter()
            .filter_map(|(persona, share)| Some((persona.clone(), serde_json::to_string(share).ok()?)))
            .collect();
        self.store.crypto_inbox_add(&rows, now_ms()).await?;
        for (persona, share) in &shares {
            last.note(persona, share);
        }
        Ok(!rows.is_empty())
    }

    /// Records what `events` say of their rooms' encryption.
    pub(super) async fn note_room_crypto(&self, events: &[NewEvent]) -> Result<(), store::Error> {
        for e in events.iter().filter(|e| e.state_key.as_deref() == Some("")) {
            let kind = e.event_type.as_str();
            if kind != "m.room.encryption" && kind != "m.room.history_visibility" {
                continue;
            }
            let Ok(event) = serde_json::from_str::<Value>(&e.event) else { continue };
            let content = &event["content"];
            if kind == "m.room.history_visibility" {
                if let Some(v) = content["history_visibility"].as_str() {
                    self.store.set_history_visibility(&e.room_id, v).await?;
                }
            } else if let Some(algorithm) = content["algorithm"].as_str().filter(|a| !a.is_empty()) {
                let rotation = crate::store::Rotation::of(content);
                self.store.set_room_encryption(&e.room_id, algorithm, rotation).await?;
            }
        }
        Ok(())
    }
}
