//! What end-to-end encryption costs richbot, measured in one process: the persona's Olm
//! machine over richbot's own crypto state (`DbState`, on an SQLite file with
//! `synchronous = full`, as `serve` runs it), the people in the room as in-memory Olm
//! machines whose keys reach it as a homeserver's answers would (no network: what is
//! measured is the crypto and its database writes, not a homeserver).
//!
//! The `crypto` scenario of the pipeline bench (`cargo bench --bench pipeline -- crypto
//! [--repeats N]`):
//! - an answer in a 2-member DM and in a 100-member room: the first (follow the members,
//!   query their devices, claim one-time keys, open Olm sessions, share the room key with
//!   every device, encrypt) and the next ones (the key already shared: encrypt);
//! - decrypting a member's message (the room key received before);
//! - ingest: the door's cost of storing what a transaction brings for the devices (a
//!   crypto inbox row), against the same transaction without it.
//!
//! Medians of `--repeats` runs; the machine is shared, so the ratios are the claim, not the
//! absolute figures. In process rather than through `serve`: the stand-in homeserver does
//! not keep devices and keys, and what encryption adds to a turn is these calls.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use matrix_sdk_common::ruma::api::IncomingResponse;
use matrix_sdk_common::ruma::api::client::keys::{claim_keys, get_keys, upload_keys};
use matrix_sdk_common::ruma::events::AnyToDeviceEvent;
use matrix_sdk_common::ruma::serde::Raw;
use matrix_sdk_common::ruma::{OwnedRoomId, OwnedUserId, UserId, device_id};
use matrix_sdk_crypto::types::requests::AnyOutgoingRequest;
use matrix_sdk_crypto::{DecryptionSettings, EncryptionSettings, EncryptionSyncChanges, OlmMachine, TrustRequirement};
use richbot::crypto::DbState;
use richbot::store::Store;
use serde_json::{Value, json};

fn response<R: IncomingResponse>(v: Value) -> R {
    let http = http::Response::builder().status(200).body(serde_json::to_vec(&v).expect("json")).expect("response");
    R::try_from_http_response(http).unwrap_or_else(|_| panic!("a valid answer"))
}

/// A device's keys as its upload would give them: device keys, and one one-time key.
struct Published {
    user: String,
    device: String,
    device_keys: Value,
    one_time_key: (String, Value),
}

/// Takes `m`'s first key upload (as the homeserver would) and returns what it published.
async fn publish(m: &OlmMachine) -> Published {
    let requests = m.outgoing_requests().await.expect("requests");
    let (id, upload) = requests
        .iter()
        .find_map(|r| match r.request() {
            AnyOutgoingRequest::KeysUpload(u) => Some((r.request_id().to_owned(), u.clone())),
            _ => None,
        })
        .expect("a key upload");
    let device_keys: Value = serde_json::from_str(upload.device_keys.expect("device keys").json().get()).expect("json");
    let (key_id, key) = upload.one_time_keys.iter().next().expect("a one-time key");
    let one_time_key = (key_id.to_string(), serde_json::from_str(key.json().get()).expect("json"));
    let counts = json!({"one_time_key_counts": {"signed_curve25519": upload.one_time_keys.len()}});
    m.mark_request_as_sent(&id, &response::<upload_keys::v3::Response>(counts)).await.expect("uploaded");
    Published { user: m.user_id().to_string(), device: m.device_id().to_string(), device_keys, one_time_key }
}

/// Makes `m` know `others`' devices and open an Olm session with each (one-time keys
/// claimed), as a keys query and a key claim against the homeserver would.
async fn introduce(m: &OlmMachine, others: &[Published]) {
    let users: Vec<OwnedUserId> = others.iter().map(|p| UserId::parse(&p.user).expect("user")).collect();
    m.update_tracked_users(users.iter().map(AsRef::as_ref)).await.expect("tracked");
    let mut device_keys = serde_json::Map::new();
    for p in others {
        device_keys.insert(p.user.clone(), json!({ p.device.clone(): p.device_keys }));
    }
    for r in m.outgoing_requests().await.expect("requests") {
        if let AnyOutgoingRequest::KeysQuery(_) = r.request() {
            let answer = response::<get_keys::v3::Response>(json!({"device_keys": device_keys}));
            m.mark_request_as_sent(r.request_id(), &answer).await.expect("queried");
        }
    }
    if let Some((id, _)) = m.get_missing_sessions(users.iter().map(AsRef::as_ref)).await.expect("missing") {
        let mut keys = serde_json::Map::new();
        for p in others {
            keys.insert(p.user.clone(), json!({ p.device.clone(): { p.one_time_key.0.clone(): p.one_time_key.1 } }));
        }
        m.mark_request_as_sent(&id, &response::<claim_keys::v3::Response>(json!({"one_time_keys": keys})))
            .await
            .expect("claimed");
    }
}

fn settings() -> EncryptionSettings {
    EncryptionSettings::default()
}

/// Shares `m`'s room key in `room` with `members` and encrypts one message; returns the
/// to-device messages for each member's device, as events.
async fn answer(m: &OlmMachine, room: &OwnedRoomId, members: &[OwnedUserId]) -> Vec<Value> {
    let shares = m.share_room_key(room, members.iter().map(AsRef::as_ref), settings()).await.expect("shared");
    let mut events = Vec::new();
    for share in shares {
        for (user, devices) in &share.messages {
            for content in devices.values() {
                let content: Value = serde_json::from_str(content.json().get()).expect("json");
                events.push(json!({"type": "m.room.encrypted", "sender": m.user_id(), "to": user, "content": content}));
            }
        }
        let ok =
            response::<matrix_sdk_common::ruma::api::client::to_device::send_event_to_device::v3::Response>(json!({}));
        m.mark_request_as_sent(&share.txn_id, &ok).await.expect("sent");
    }
    let body =
        Raw::from_json(serde_json::value::to_raw_value(&json!({"msgtype": "m.text", "body": "hi"})).expect("raw"));
    m.encrypt_room_event_raw(room, "m.room.message", &body).await.expect("encrypted");
    events
}

fn median(mut v: Vec<Duration>) -> Duration {
    crate::load::pct(&mut v, 50.0)
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", crate::load::ms(d))
}

/// The persona's machine over a fresh richbot database, and the room's members.
async fn room(dir: &std::path::Path, n: usize, tag: &str) -> (OlmMachine, Vec<OlmMachine>, Store) {
    let store = Store::open(&format!("sqlite://{}/{tag}.db", dir.display())).await.expect("store");
    let bot = OlmMachine::with_store(
        matrix_sdk_common::ruma::user_id!("@bot:x"),
        device_id!("RBBENCH"),
        DbState::new(store.clone(), "@bot:x"),
        None,
    )
    .await
    .expect("machine");
    let mut members = Vec::new();
    for i in 0..n {
        let user = UserId::parse(format!("@m{i}:x")).expect("user");
        members.push(OlmMachine::new(&user, device_id!("PEER")).await);
    }
    (bot, members, store)
}

/// An answer's cost in a room of `n` other members: the first and the next.
async fn answers(dir: &std::path::Path, n: usize, repeats: usize) -> (Duration, Duration) {
    let (mut first, mut next) = (Vec::new(), Vec::new());
    for r in 0..repeats {
        let (bot, members, _store) = room(dir, n, &format!("answers-{n}-{r}")).await;
        publish(&bot).await;
        let mut published = Vec::new();
        for m in &members {
            published.push(publish(m).await);
        }
        let users: Vec<OwnedUserId> = members.iter().map(|m| m.user_id().to_owned()).collect();
        let room_id = OwnedRoomId::try_from(format!("!bench{r}:x")).expect("room");
        let start = Instant::now();
        introduce(&bot, &published).await;
        let shared = answer(&bot, &room_id, &users).await;
        first.push(start.elapsed());
        assert_eq!(shared.len(), n, "one room key for each member's device");
        let start = Instant::now();
        for _ in 0..10 {
            answer(&bot, &room_id, &users).await;
        }
        next.push(start.elapsed() / 10);
    }
    (median(first), median(next))
}

/// Decrypting a member's message, the room key received (Olm) before.
async fn decrypting(dir: &std::path::Path, repeats: usize) -> Duration {
    let mut each = Vec::new();
    for r in 0..repeats {
        let (bot, members, _store) = room(dir, 1, &format!("decrypt-{r}")).await;
        let alice = &members[0];
        let bot_keys = publish(&bot).await;
        publish(alice).await;
        introduce(alice, &[bot_keys]).await;
        let room_id = OwnedRoomId::try_from(format!("!dec{r}:x")).expect("room");
        let to_bot = answer(alice, &room_id, &[bot.user_id().to_owned()]).await;
        let events: Vec<Raw<AnyToDeviceEvent>> =
            to_bot.iter().map(|e| Raw::from_json(serde_json::value::to_raw_value(e).expect("raw"))).collect();
        let lists = Default::default();
        let counts = BTreeMap::new();
        let changes = EncryptionSyncChanges {
            to_device_events: events,
            changed_devices: &lists,
            one_time_keys_counts: &counts,
            unused_fallback_keys: None,
            next_batch_token: None,
        };
        let trust = DecryptionSettings { sender_device_trust_requirement: TrustRequirement::Untrusted };
        let (_, keys) = bot.receive_sync_changes(changes, &trust).await.expect("received");
        assert_eq!(keys.len(), 1, "the room key arrived");
        let mut sealed = Vec::new();
        for i in 0..20 {
            let body = json!({"msgtype": "m.text", "body": format!("question {i}")});
            let raw = Raw::from_json(serde_json::value::to_raw_value(&body).expect("raw"));
            let out = alice.encrypt_room_event_raw(&room_id, "m.room.message", &raw).await.expect("encrypted");
            let content: Value = serde_json::from_str(out.content.json().get()).expect("json");
            sealed.push(json!({"type": "m.room.encrypted", "sender": alice.user_id(), "event_id": format!("$e{i}"),
                               "room_id": room_id, "origin_server_ts": 1, "content": content}));
        }
        let start = Instant::now();
        for event in &sealed {
            let raw = Raw::from_json(serde_json::value::to_raw_value(event).expect("raw"));
            bot.decrypt_room_event(&raw, &room_id, &trust).await.expect("decrypted");
        }
        each.push(start.elapsed() / sealed.len() as u32);
    }
    median(each)
}

/// The door's cost of a crypto inbox row per transaction, beside the transaction alone.
async fn ingest(dir: &std::path::Path, repeats: usize) -> (Duration, Duration) {
    let store = Store::open(&format!("sqlite://{}/ingest.db", dir.display())).await.expect("store");
    let mut events = Vec::new();
    let row = json!({"to_device": [{"type": "m.room.encrypted", "sender": "@a:x", "to_user_id": "@bot:x",
        "to_device_id": "RBBENCH", "content": {"algorithm": "m.olm.v1.curve25519-aes-sha2", "ciphertext": {"k": {"type": 0, "body": "x".repeat(600)}}}}],
        "one_time_keys": {"RBBENCH": {"signed_curve25519": 49}}})
    .to_string();
    let (mut plain, mut with_keys) = (Vec::new(), Vec::new());
    for r in 0..repeats {
        for (i, with) in [(0, false), (1, true)] {
            let start = Instant::now();
            for t in 0..200 {
                events.clear();
                for e in 0..100 {
                    let id = format!("$r{r}i{i}t{t}e{e}");
                    events.push(richbot::store::NewEvent {
                        event_id: id.as_str().try_into().expect("id"),
                        room_id: "!quiet:x".try_into().expect("room"),
                        sender: "@a:x".try_into().expect("user"),
                        event_type: "m.room.message".into(),
                        state_key: None,
                        origin_ts: 1,
                        event: format!("{{\"event_id\":\"{id}\",\"content\":{{\"body\":\"hi\"}}}}"),
                        processed: true,
                    });
                }
                if with {
                    store.crypto_inbox_add(&[("@bot:x".to_owned(), row.clone())], 1).await.expect("row");
                }
                store.insert_events(&events, 1).await.expect("events");
                store.sync().await.expect("flush");
            }
            let per_txn = start.elapsed() / 200;
            if with { with_keys.push(per_txn) } else { plain.push(per_txn) }
        }
    }
    (median(plain), median(with_keys))
}

/// Prints what encryption adds to an answer and to ingest.
pub async fn costs(repeats: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    println!("crypto: what end-to-end encryption adds (medians of {repeats})");
    for n in [1, 99] {
        let (first, next) = answers(dir.path(), n, repeats).await;
        println!(
            "  an answer, {} members: first {} (devices queried, {n} Olm session(s), room key shared), next {} (encrypt)",
            n + 1,
            ms(first),
            ms(next)
        );
    }
    println!("  decrypting one member's message: {}", ms(decrypting(dir.path(), repeats).await));
    let (plain, with_keys) = ingest(dir.path(), repeats).await;
    println!(
        "  ingest, a transaction of 100 events with its flush: {} alone, {} with a crypto inbox row (+{:.0}%)",
        ms(plain),
        ms(with_keys),
        (with_keys.as_secs_f64() / plain.as_secs_f64() - 1.0) * 100.0
    );
}
