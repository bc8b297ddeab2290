//! Inbound: one crypto inbox row through a persona's machine (room keys, Olm sessions,
//! device list changes, one-time key counts: `receive_sync_changes`, which stores what it
//! learnt before returning), and encrypted room events decrypted into the clear event
//! the rest of richbot sees. Taking the inbox in order is `inbox`'s.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use matrix_sdk_common::deserialized_responses::{VerificationLevel, VerificationState};
use matrix_sdk_common::ruma::api::client::sync::sync_events::DeviceLists;
use matrix_sdk_common::ruma::events::AnyToDeviceEvent;
use matrix_sdk_common::ruma::serde::Raw;
use matrix_sdk_common::ruma::{OneTimeKeyAlgorithm, OwnedRoomId as CryptoRoomId, OwnedUserId as CryptoUserId, UInt};
use matrix_sdk_crypto::types::events::room::encrypted::EncryptedEvent;
use matrix_sdk_crypto::vodozemac::megolm::MegolmMessage;
use matrix_sdk_crypto::{DecryptionSettings, EncryptionSyncChanges, MegolmError, TrustRequirement};
use serde_json::Value;

use super::machine::Held;
use super::pushed::Pushed;
use super::{Counters, Decryption, Error, Settled};
use crate::clock::now_ms;
use crate::store::Store;

/// One row through the machine: the room keys it brought, and the verification requests.
pub(super) async fn receive(held: &Held<'_>, device: &str, pushed: Pushed) -> Result<Settled, Error> {
    let to_device: Vec<Raw<AnyToDeviceEvent>> = pushed
        .to_device
        .iter()
        .filter(|m| m.get("to_device_id").and_then(Value::as_str).is_none_or(|d| d == device || d == "*"))
        .filter_map(|m| serde_json::value::to_raw_value(m).ok().map(Raw::from_json))
        .collect();
    let mut lists = DeviceLists::new();
    lists.changed = users(&pushed.device_lists.changed);
    lists.left = users(&pushed.device_lists.left);
    let counts: BTreeMap<OneTimeKeyAlgorithm, UInt> = pushed
        .one_time_keys
        .get(device)
        .map(|c| c.iter().map(|(alg, n)| (OneTimeKeyAlgorithm::from(alg.as_str()), UInt::new_saturating(*n))).collect())
        .unwrap_or_default();
    let fallback: Option<Vec<OneTimeKeyAlgorithm>> =
        pushed.fallback_keys.get(device).map(|t| t.iter().map(|a| OneTimeKeyAlgorithm::from(a.as_str())).collect());
    let messages = to_device.len();
    let changes = EncryptionSyncChanges {
        to_device_events: to_device,
        changed_devices: &lists,
        one_time_keys_counts: &counts,
        unused_fallback_keys: fallback.as_deref(),
        next_batch_token: None,
    };
    let (events, keys) = Box::pin(held.machine.receive_sync_changes(changes, &settings()))
        .await
        .map_err(|e| Error::Olm(e.to_string()))?;
    tracing::debug!(persona = %held.machine.user_id(), messages, room_keys = keys.len(), "crypto inbox row taken");
    let keys = keys.into_iter().map(|k| (k.room_id.to_string(), k.session_id)).collect();
    Ok((keys, super::verify::requests(&held.machine, &events)))
}

fn users(ids: &[String]) -> Vec<CryptoUserId> {
    ids.iter().filter_map(|u| CryptoUserId::try_from(u.as_str()).ok()).collect()
}

/// Room events are decrypted whatever the sending device's trust (as Element does); who
/// sent them is the homeserver's `sender`, checked against the session's owner.
fn settings() -> DecryptionSettings {
    DecryptionSettings { sender_device_trust_requirement: TrustRequirement::Untrusted }
}

/// Decrypts `event` (an `m.room.encrypted` event of `room`) with `held`'s machine.
pub async fn decrypt(held: &Held<'_>, room: &str, event: &Value) -> Result<Decryption, Error> {
    let Ok(room_id) = CryptoRoomId::try_from(room) else { return Ok(Decryption::Undecryptable("bad room id".into())) };
    let raw: Raw<EncryptedEvent> = Raw::from_json(serde_json::value::to_raw_value(event)?);
    let session = event["content"]["session_id"].as_str().unwrap_or_default().to_owned();
    match Box::pin(held.machine.decrypt_room_event(&raw, &room_id, &settings())).await {
        Ok(decrypted) => {
            // The session's owner, as its device keys tell, must be the event's sender: a
            // member who pastes another's ciphertext into their own event is not credited
            // with it.
            let sender = event.get("sender").and_then(Value::as_str).unwrap_or_default();
            let info = &decrypted.encryption_info;
            let mismatched =
                info.verification_state == VerificationState::Unverified(VerificationLevel::MismatchedSender);
            if mismatched || info.sender.as_str() != sender {
                return Ok(Decryption::Undecryptable("the room key belongs to another user than the sender".into()));
            }
            let inner: Value = serde_json::from_str(decrypted.event.json().get())?;
            if let Err(why) = accepted(&inner) {
                return Ok(Decryption::Undecryptable(why));
            }
            Ok(Decryption::Clear(clear(event, &inner)))
        }
        Err(MegolmError::MissingRoomKey(Some(code))) => Ok(Decryption::Withheld(code.to_string())),
        Err(MegolmError::MissingRoomKey(None)) => Ok(Decryption::MissingKey { session }),
        Err(MegolmError::Decryption(matrix_sdk_crypto::vodozemac::megolm::DecryptionError::UnknownMessageIndex(
            ..,
        ))) => Ok(Decryption::MissingKey { session }),
        Err(MegolmError::Store(e)) => Err(Error::Olm(e.to_string())),
        Err(e) => Ok(Decryption::Undecryptable(e.to_string())),
    }
}

/// `clear`, decrypted from `event`, unless its (session, message index) came in another
/// event first: a copy of someone's ciphertext under a new event id.
pub async fn unless_replayed(
    store: &Store,
    counters: &Counters,
    event: &Value,
    clear: Value,
) -> Result<Decryption, Error> {
    let event_id = event["event_id"].as_str().unwrap_or_default();
    if let Some((session, index)) = message_index(event) {
        let first = store.crypto_message_index(&session, index, event_id, now_ms()).await?;
        if first != event_id {
            return Ok(Decryption::Undecryptable(format!("a copy of {first} (the same message index)")));
        }
    }
    counters.decrypted.fetch_add(1, Ordering::Relaxed);
    Ok(Decryption::Clear(clear))
}

/// The megolm session (its id, encoded for a key) and message index an encrypted event
/// names, read from its ciphertext: each pair is carried by one event only.
fn message_index(event: &Value) -> Option<(String, i64)> {
    let content = &event["content"];
    let session = content["session_id"].as_str()?;
    let message = MegolmMessage::from_base64(content["ciphertext"].as_str()?).ok()?;
    Some((super::key::part(session).into_owned(), i64::from(message.message_index())))
}

/// The inner event types richbot acts on as messages. Anything else inside an encrypted
/// event (a state event, a redaction, a type richbot does not know) would let a member
/// forge what only the room's state or the homeserver may say: membership (a group made
/// to look like a DM), redactions without the power to redact. Such an event is
/// undecryptable.
pub const INNER_TYPES: [&str; 9] = [
    "m.room.message",
    "m.sticker",
    "m.reaction",
    "m.poll.start",
    "m.poll.response",
    "m.poll.end",
    "org.matrix.msc3381.poll.start",
    "org.matrix.msc3381.poll.response",
    "org.matrix.msc3381.poll.end",
];

/// Whether a decrypted inner event is one richbot takes (see [`INNER_TYPES`]); else why not.
fn accepted(inner: &Value) -> Result<(), String> {
    let kind = inner.get("type").and_then(Value::as_str).unwrap_or_default();
    if !INNER_TYPES.contains(&kind) {
        let shown: String = kind.chars().filter(|c| !c.is_control()).take(80).collect();
        return Err(format!("an encrypted event of type {shown:?} is not accepted"));
    }
    if inner.get("state_key").is_some() || inner.get("redacts").is_some() {
        return Err("an encrypted event may not carry a state key or a redaction".to_owned());
    }
    if !inner.get("content").is_none_or(Value::is_object) {
        return Err("an encrypted event's content is not an object".to_owned());
    }
    Ok(())
}

/// The clear event: the encrypted one with the decrypted type and content, under the same
/// id, sender and time. The relation is the one sent in the clear, as the spec says (it
/// is what the homeserver aggregates and what every client shows).
fn clear(encrypted: &Value, inner: &Value) -> Value {
    let mut event = encrypted.clone();
    let mut content = inner.get("content").cloned().unwrap_or(Value::Object(Default::default()));
    if let (Some(relation), Some(c)) = (encrypted["content"].get("m.relates_to"), content.as_object_mut()) {
        c.insert("m.relates_to".to_owned(), relation.clone());
    }
    if let Some(e) = event.as_object_mut() {
        e.insert("type".to_owned(), inner.get("type").cloned().unwrap_or(Value::Null));
        e.insert("content".to_owned(), content);
    }
    event
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_message_like_inner_types_without_state_or_redaction_are_accepted() {
        let ok = |v: Value| accepted(&v).is_ok();
        for kind in INNER_TYPES {
            assert!(ok(json!({"type": kind, "content": {}})), "{kind}");
        }
        assert!(ok(json!({"type": "m.room.message"})), "content may be missing (an empty one)");
        for refused in [
            json!({"type": "m.room.redaction", "content": {"redacts": "$x"}, "redacts": "$x"}),
            json!({"type": "m.room.member", "state_key": "@a:x", "content": {"membership": "leave"}}),
            json!({"type": "m.room.message\u{0}", "content": {}}),
            json!({"type": "m.room.message", "state_key": "", "content": {}}),
            json!({"type": "m.room.message", "redacts": "$x", "content": {}}),
            json!({"type": "m.room.message", "content": "text"}),
            json!({"type": 5, "content": {}}),
            json!({"content": {}}),
        ] {
            let why = accepted(&refused).expect_err(&refused.to_string());
            assert!(!why.contains('\u{0}'), "the reason quotes no control character: {why:?}");
        }
    }

    #[test]
    fn the_clear_event_keeps_its_id_sender_and_time_and_the_relation_sent_in_the_clear() {
        let encrypted = json!({
            "event_id": "$e", "sender": "@a:x", "origin_server_ts": 5, "room_id": "!r:x", "type": "m.room.encrypted",
            "content": {"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "…",
                        "m.relates_to": {"m.in_reply_to": {"event_id": "$outer"}}},
        });
        let inner = json!({"type": "m.room.message", "room_id": "!r:x",
            "content": {"msgtype": "m.text", "body": "hi", "m.relates_to": {"m.in_reply_to": {"event_id": "$inner"}}}});
        let clear = clear(&encrypted, &inner);
        assert_eq!(clear["type"], "m.room.message");
        assert_eq!(
            (&clear["event_id"], &clear["sender"], &clear["origin_server_ts"]),
            (&json!("$e"), &json!("@a:x"), &json!(5))
        );
        assert_eq!(clear["content"]["body"], "hi");
        assert_eq!(clear["content"]["m.relates_to"]["m.in_reply_to"]["event_id"], "$outer");
        // Without a clear relation the payload's stands (older clients put it inside).
        let plain = json!({"event_id": "$e", "sender": "@a:x", "type": "m.room.encrypted", "content": {}});
        assert_eq!(super::clear(&plain, &inner)["content"]["m.relates_to"]["m.in_reply_to"]["event_id"], "$inner");
    }
}
