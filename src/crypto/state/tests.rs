//! The crypto state kept in richbot's database, read back by a new machine as a restart
//! would: the account (same identity), the outbound room key (its message index goes on,
//! never repeats), the persona's own inbound keys (what it sent stays decryptable),
//! tracked users, and the rarer kinds under their key prefixes.

use matrix_sdk_common::ruma::events::room::history_visibility::HistoryVisibility;
use matrix_sdk_common::ruma::serde::Raw;
use matrix_sdk_common::ruma::{OwnedRoomId, device_id, room_id, user_id};
use matrix_sdk_crypto::store::CryptoStore;
use matrix_sdk_crypto::store::types::{Changes, RoomSettings};
use matrix_sdk_crypto::types::EventEncryptionAlgorithm;
use matrix_sdk_crypto::{DecryptionSettings, EncryptionSettings, OlmMachine, TrustRequirement};
use serde_json::{Value, json};

use super::DbState;
use crate::store::Store;

async fn machine(store: &Store) -> OlmMachine {
    let state = DbState::new(store.clone(), "@bot:x");
    OlmMachine::with_store(user_id!("@bot:x"), device_id!("RBTEST"), state, None).await.expect("a machine")
}

/// A message of the persona's encrypted in `room`, as the homeserver would push it.
async fn sealed(m: &OlmMachine, room: &OwnedRoomId, body: &str, id: &str) -> Value {
    let settings = EncryptionSettings { history_visibility: HistoryVisibility::Shared, ..Default::default() };
    let shares = m.share_room_key(room, std::iter::empty(), settings).await.expect("a room key");
    assert!(shares.is_empty(), "no one else to share with");
    let content =
        Raw::from_json(serde_json::value::to_raw_value(&json!({"msgtype": "m.text", "body": body})).expect("raw"));
    let out = m.encrypt_room_event_raw(room, "m.room.message", &content).await.expect("encrypted");
    let content: Value = serde_json::from_str(out.content.json().get()).expect("json");
    json!({"type": "m.room.encrypted", "event_id": id, "sender": "@bot:x", "room_id": room,
           "origin_server_ts": 1, "content": content})
}

async fn clear(m: &OlmMachine, room: &OwnedRoomId, event: &Value) -> String {
    let raw = Raw::from_json(serde_json::value::to_raw_value(event).expect("raw"));
    let settings = DecryptionSettings { sender_device_trust_requirement: TrustRequirement::Untrusted };
    let d = m.decrypt_room_event(&raw, room, &settings).await.expect("decrypts");
    let e: Value = serde_json::from_str(d.event.json().get()).expect("json");
    e["content"]["body"].as_str().expect("body").to_owned()
}

#[tokio::test]
async fn a_restarted_machine_has_the_same_identity_and_its_room_key_goes_on() {
    let store = Store::open("sqlite::memory:").await.expect("store");
    let room = room_id!("!r:x").to_owned();
    let first = machine(&store).await;
    let identity = first.identity_keys();
    let one = sealed(&first, &room, "one", "$1").await;
    first.update_tracked_users([user_id!("@alice:x")]).await.expect("tracked");
    let index_one = one["content"]["ciphertext"].clone();
    drop(first);

    let again = machine(&store).await;
    assert_eq!(again.identity_keys().curve25519, identity.curve25519, "the account was kept");
    assert_eq!(again.identity_keys().ed25519, identity.ed25519);
    let two = sealed(&again, &room, "two", "$2").await;
    assert_eq!(one["content"]["session_id"], two["content"]["session_id"], "the same room key, not a new one");
    assert_ne!(index_one, two["content"]["ciphertext"]);
    // Both decrypt after the restart: the persona's own inbound key was kept too.
    assert_eq!(clear(&again, &room, &one).await, "one");
    assert_eq!(clear(&again, &room, &two).await, "two");
    assert!(again.tracked_users().await.expect("tracked").contains(user_id!("@alice:x")));
}

#[tokio::test]
async fn the_rarer_kinds_are_kept_under_their_prefixes_and_one_persona_never_sees_anothers() {
    let store = Store::open("sqlite::memory:").await.expect("store");
    let bot = DbState::new(store.clone(), "@bot:x");
    let settings = RoomSettings {
        algorithm: EventEncryptionAlgorithm::MegolmV1AesSha2,
        only_allow_trusted_devices: true,
        session_rotation_period: None,
        session_rotation_period_messages: Some(7),
    };
    let mut changes = Changes::default();
    changes.room_settings.insert(room_id!("!r:x").to_owned(), settings.clone());
    bot.save_changes(changes).await.expect("saved");
    bot.set_custom_value("k", vec![1, 2, 3]).await.expect("custom");
    assert_eq!(bot.get_room_settings(room_id!("!r:x")).await.expect("read"), Some(settings));
    assert_eq!(bot.get_custom_value("k").await.expect("read"), Some(vec![1, 2, 3]));
    assert_eq!(bot.get_room_settings(room_id!("!other:x")).await.expect("read"), None);
    let helper = DbState::new(store.clone(), "@helper:x");
    assert_eq!(helper.get_custom_value("k").await.expect("read"), None, "scoped to its persona");
    bot.remove_custom_value("k").await.expect("removed");
    assert_eq!(bot.get_custom_value("k").await.expect("read"), None);
}

/// Pinned for every upgrade of matrix-sdk-crypto (past 0.18 a transaction without counts
/// is read as zero keys left): a transaction that says nothing of the device's one-time
/// keys, as most of Synapse's do, uploads none.
#[tokio::test]
async fn a_transaction_without_key_counts_uploads_no_keys() {
    use std::collections::BTreeMap;

    use matrix_sdk_common::ruma::api::client::keys::upload_keys;
    use matrix_sdk_common::ruma::api::client::sync::sync_events::DeviceLists;
    use matrix_sdk_common::ruma::{OneTimeKeyAlgorithm, UInt};
    use matrix_sdk_crypto::EncryptionSyncChanges;
    use matrix_sdk_crypto::types::requests::AnyOutgoingRequest;

    let store = Store::open("sqlite::memory:").await.expect("store");
    let m = machine(&store).await;
    let uploads = |requests: &[matrix_sdk_crypto::types::requests::OutgoingRequest]| {
        requests.iter().filter(|r| matches!(r.request(), AnyOutgoingRequest::KeysUpload(_))).count()
    };
    let first = m.outgoing_requests().await.expect("requests");
    let upload = first.iter().find(|r| matches!(r.request(), AnyOutgoingRequest::KeysUpload(_))).expect("an upload");
    let on_server = BTreeMap::from([(OneTimeKeyAlgorithm::SignedCurve25519, UInt::new(50).expect("50"))]);
    m.mark_request_as_sent(upload.request_id(), &upload_keys::v3::Response::new(on_server)).await.expect("sent");
    assert_eq!(uploads(&m.outgoing_requests().await.expect("requests")), 0, "the keys are up");

    let lists = DeviceLists::new();
    let no_counts = BTreeMap::new();
    let changes = EncryptionSyncChanges {
        to_device_events: Vec::new(),
        changed_devices: &lists,
        one_time_keys_counts: &no_counts,
        unused_fallback_keys: None,
        next_batch_token: None,
    };
    let settings = DecryptionSettings { sender_device_trust_requirement: TrustRequirement::Untrusted };
    m.receive_sync_changes(changes, &settings).await.expect("received");
    assert_eq!(uploads(&m.outgoing_requests().await.expect("requests")), 0, "no upload for a silent transaction");
    // While one that says none are left does make one (the check can see an upload).
    let none_left = BTreeMap::from([(OneTimeKeyAlgorithm::SignedCurve25519, UInt::new(0).expect("0"))]);
    let changes = EncryptionSyncChanges {
        to_device_events: Vec::new(),
        changed_devices: &lists,
        one_time_keys_counts: &none_left,
        unused_fallback_keys: None,
        next_batch_token: None,
    };
    m.receive_sync_changes(changes, &settings).await.expect("received");
    assert_eq!(uploads(&m.outgoing_requests().await.expect("requests")), 1, "keys are replenished");
}
