//! Encrypted rooms against a hostile member and a stranger, with real E2EE clients on the
//! real Synapse (both databases): what one of them sends to a persona's device or into a
//! room must neither stop the persona reading and writing, nor forge what only the
//! homeserver may say.

use serde_json::json;

use std::time::Duration;

use crate::e2e_encrypted::{devices_ready, echo};
use crate::support::e2ee::from;
use crate::support::llm::text;
use crate::support::olm_device::OlmDevice;
use crate::support::{BOT, Env, Options, eventually};

/// The persona's answers among `events` (its notices left out).
fn answers(events: &[serde_json::Value]) -> Vec<&str> {
    from(events, BOT)
        .iter()
        .filter(|e| e["content"]["msgtype"] != "m.notice")
        .filter_map(|e| e["content"]["body"].as_str())
        .collect()
}

/// Waits until the model has been asked something holding `word`.
async fn asked(env: &Env, word: &str) {
    eventually(&format!("the model is asked {word}"), Duration::from_secs(60), || async {
        env.llm.requests().iter().any(|r| r["messages"].to_string().contains(word)).then_some(())
    })
    .await;
}

/// The messages of the model's last request, as one text.
fn last_prompt(env: &Env) -> String {
    env.llm.requests().last().map(|r| r["messages"].to_string()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_withheld_notice_and_a_members_forged_inner_events_stop_and_erase_nothing() {
    let env = Env::start().await;
    env.llm.respond_with(|req| {
        let asked = req["messages"].as_array().and_then(|m| m.last()).and_then(|m| m["content"].as_str()).unwrap_or("");
        text(if asked.contains("second") { "Second answer." } else { "First answer." })
    });
    devices_ready(&env).await;
    let device = env.store().await.crypto_kv(BOT, richbot::crypto::DEVICE_ID).await.expect("store").expect("device");
    let (mut alice, mut bob, room) = crate::e2e_encrypted::alice_and_bob_with_the_persona(&env).await;

    // A plaintext withheld notice for a room nobody shares, its session id with a NUL (on
    // PostgreSQL it failed every later save of the persona's crypto), and an encrypted
    // event whose inner type has one (it failed the room's step for ever).
    let withheld = json!({
        "algorithm": "m.megolm.v1.aes-sha2", "room_id": "!elsewhere:localhost", "session_id": "bad\u{0}session",
        "sender_key": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "code": "m.unverified", "reason": "no",
    });
    bob.send_to_device("m.room_key.withheld", (BOT, &device), withheld).await;
    bob.send_typed(&room, "m.room.message\u{0}", json!({"msgtype": "m.text", "body": "Richbot, nothing"})).await;

    // The forged type is undecryptable, which the room is told once (a notice), then
    // Alice is answered.
    let question = alice.say(&room, "Richbot, the first question").await;
    let events = alice.wait_messages(&room, BOT, 2).await;
    assert_eq!(answers(&events), ["First answer."], "{events:#?}");

    // Bob, who may not redact Alice's message, redacts it inside an encrypted event: not
    // a redaction (the homeserver never saw one), so her question stays in the context.
    bob.send_sealed(&room, "m.room.redaction", json!({"redacts": question})).await;
    alice.say(&room, "Richbot, the second question").await;
    let events = alice.wait_messages(&room, BOT, 3).await;
    assert_eq!(answers(&events), ["First answer.", "Second answer."], "{events:#?}");
    let prompt = last_prompt(&env);
    assert!(prompt.contains("the first question"), "the first question is still in the context: {prompt}");
    assert!(!prompt.contains("Richbot, nothing"), "the event of a forged type is not read: {prompt}");
    let metrics = env.metrics().await;
    assert!(metrics.contains("richbot_e2ee_undecryptable_total 2"), "both forged events were refused: {metrics}");
    // The withheld notice was stored like any other (its ids encoded), not set aside
    // after failing (which would keep the persona from its keys for a few seconds).
    assert!(metrics.contains("richbot_e2ee_inbox_set_aside_total 0"), "nothing was set aside: {metrics}");
    // And it was not kept: it is for a room the persona is not in.
    let prefix = richbot::crypto::key::under(richbot::crypto::key::WITHHELD, &["!elsewhere:localhost"]);
    let kept = env.store().await.crypto_kv_prefixed(BOT, &prefix).await.expect("read");
    assert!(kept.is_empty(), "a stranger's withheld notice for another room is dropped: {kept:?}");
    for client in [alice, bob] {
        client.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ciphertext_pasted_by_another_member_or_sent_again_is_not_read() {
    let env = Env::start().await;
    env.llm.respond_with(|_| text("Answered."));
    devices_ready(&env).await;
    let (mut alice, bob, room) = crate::e2e_encrypted::alice_and_bob_with_the_persona(&env).await;

    // Alice's device seals a message she never sends; Bob sends it as his own event.
    let sealed =
        alice.seal(&room, "m.room.message", json!({"msgtype": "m.text", "body": "Richbot, alice-pasted-by-bob"})).await;
    env.bob.send(&room, "m.room.encrypted", sealed).await;
    // Alice's real question, then the very same ciphertext again under a new event id.
    let question = alice.say(&room, "Richbot, the real question").await;
    // The paste is undecryptable (the room is told once, a notice), and Alice answered.
    let events = alice.wait_messages(&room, BOT, 2).await;
    assert_eq!(answers(&events), ["Answered."], "{events:#?}");
    let (status, original) = env
        .alice
        .call(
            reqwest::Method::GET,
            &format!(
                "/_matrix/client/v3/rooms/{}/event/{}",
                crate::support::enc(&room),
                crate::support::enc(&question)
            ),
            None,
        )
        .await;
    assert_eq!(status, 200, "{original}");
    env.alice.send(&room, "m.room.encrypted", original["content"].clone()).await;
    alice.say(&room, "Richbot, the last question").await;
    let events = alice.wait_messages(&room, BOT, 3).await;
    let prompt = last_prompt(&env);
    assert!(prompt.contains("the last question") && prompt.contains("the real question"), "{prompt}");
    assert!(!prompt.contains("alice-pasted-by-bob"), "Bob is not credited with Alice's words: {prompt}");
    // Once as a line of the conversation (the turn's note may quote it too, by its id).
    let lines = prompt.matches("@alice:localhost: Richbot, the real question").count();
    assert_eq!(lines, 1, "the copy is not read again: {prompt}");
    let metrics = env.metrics().await;
    assert!(metrics.contains("richbot_e2ee_undecryptable_total 2"), "both copies were refused: {metrics}");
    assert_eq!(answers(&events), ["Answered.", "Answered."], "{events:#?}");
    for client in [alice, bob] {
        client.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_verification_request_is_cancelled_at_once_with_the_reason() {
    let env = Env::start().await;
    devices_ready(&env).await;
    let (mut alice, room) = crate::e2e_encrypted::encrypted_dm(&env).await;
    let ended = alice.request_verification(BOT, &room).await;
    assert_eq!(ended["phase"], 5, "cancelled, not left waiting: {ended}");
    assert_eq!((ended["code"].as_str(), ended["by"].as_str()), (Some("m.user"), Some(BOT)), "{ended}");
    let events = alice.wait_messages_of(&room, BOT, 1, "m.key.verification.cancel").await;
    let cancel = events
        .iter()
        .find(|e| e["sender"] == BOT && e["type"] == "m.key.verification.cancel")
        .expect("the cancel in the timeline");
    let reason = cancel["content"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("cannot verify interactively"), "{cancel}");
    assert_eq!(cancel["wire_type"], "m.room.encrypted", "sent encrypted in the encrypted DM: {cancel}");
    assert!(env.llm.requests().is_empty(), "no turn of the model: {:?}", env.llm.requests());
    // Asked to-device, of the persona's one device, as a client verifies a device.
    let device = env.store().await.crypto_kv(BOT, richbot::crypto::DEVICE_ID).await.expect("store").expect("device");
    let ended = alice.request_device_verification(BOT, &device).await;
    assert_eq!(ended["phase"], 5, "cancelled, not left waiting: {ended}");
    assert_eq!((ended["code"].as_str(), ended["by"].as_str()), (Some("m.user"), Some(BOT)), "{ended}");
    assert!(env.llm.requests().is_empty(), "no turn of the model: {:?}", env.llm.requests());
    alice.stop().await;
}

/// A member who holds a room key sends it to the persona again, labelled with another
/// room they share, and writes there with it: the key stays the first room's (which
/// still reads it), and the other room's message is not read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_key_sent_again_for_another_room_stays_with_the_first() {
    let opts = Options { extra_toml: "[encryption]\nwait_for_key_secs = 2\n".into(), ..Options::default() };
    let env = Env::start_with(opts).await;
    env.llm.respond_with(echo);
    devices_ready(&env).await;
    let encryption =
        json!({"type": "m.room.encryption", "state_key": "", "content": {"algorithm": "m.megolm.v1.aes-sha2"}});
    let mut rooms = Vec::new();
    for _ in 0..2 {
        let body = json!({"invite": [BOT], "preset": "private_chat", "initial_state": [encryption]});
        let room = env.bob.create_room_with(body).await;
        env.wait_joined_seen_by(&env.bob, &room, BOT).await;
        rooms.push(room);
    }
    let (a, b) = (&rooms[0], &rooms[1]);
    let bob = OlmDevice::new(&env.bob).await;
    let mut session = OlmDevice::group_session();
    bob.send_room_key(BOT, a, &session).await;
    bob.say(a, a, &mut session, "Richbot, alpha").await;
    asked(&env, "alpha").await;

    // The same key for room B, and a message of it there; then room A again.
    bob.send_room_key(BOT, b, &session).await;
    bob.say(b, b, &mut session, "Richbot, bravo").await;
    bob.say(a, a, &mut session, "Richbot, charlie").await;
    asked(&env, "charlie").await;
    eventually("room B's message is given up as unreadable", Duration::from_secs(60), || async {
        env.metrics().await.contains("richbot_e2ee_undecryptable_total 1").then_some(())
    })
    .await;
    let prompts: Vec<String> = env.llm.requests().iter().map(|r| r["messages"].to_string()).collect();
    assert!(prompts.iter().all(|p| !p.contains("bravo")), "room B did not read room A's key: {prompts:?}");
    let turns = env.store().await.turn_outcomes(&crate::support::room_id(b)).await.expect("turns");
    // At most the notice that its message could not be read (recorded as a turn of its
    // own, which may land just after the metric): never an answer.
    assert!(turns.iter().all(|t| t.0 == "undecryptable"), "no answer in room B: {turns:?}");
}
