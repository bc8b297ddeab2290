//! Encrypted rooms end to end: real E2EE people (matrix-js-sdk with its Rust crypto, as
//! Element Web has it; `support::e2ee`) talk to the personas in rooms Element would make,
//! against the real Synapse with to-device messages and key counts on.

use std::time::Duration;

use serde_json::json;

use crate::support::courier::Keys;
use crate::support::e2ee::{E2ee, from};
use crate::support::llm::{Step, call, last_tool_result, text};
use crate::support::{BOT, Env, Options, eventually};

/// Alice, with an encrypted client, in an encrypted DM the persona has joined.
pub async fn encrypted_dm(env: &Env) -> (E2ee, String) {
    let mut alice = E2ee::login(&env.synapse.url, "alice", env.dir.path()).await;
    let room = alice.create_room(&[BOT], true).await;
    alice.wait_joined(&room, BOT).await;
    (alice, room)
}

/// A DM whose state is encrypted, made by Alice's plain client, where the persona cannot
/// read (encryption off, or the homeserver lacking it): the room, and the persona's first
/// message there (its notice that it cannot read).
pub async fn encrypted_dm_it_cannot_read(env: &Env) -> (String, serde_json::Value) {
    let encryption =
        json!({"type": "m.room.encryption", "state_key": "", "content": {"algorithm": "m.megolm.v1.aes-sha2"}});
    let room = env
        .alice
        .create_room_with(json!({"invite": [BOT], "is_direct": true, "preset": "trusted_private_chat", "initial_state": [encryption]}))
        .await;
    let notice = eventually("the persona says it cannot read the room", Duration::from_secs(60), || async {
        env.alice.messages_from(&room, BOT).await.into_iter().next()
    })
    .await;
    (room, notice)
}

/// Alice and Bob, as encrypted clients, in a group room Alice made with the persona.
pub async fn alice_and_bob_with_the_persona(env: &Env) -> (E2ee, E2ee, String) {
    let mut alice = E2ee::login(&env.synapse.url, "alice", env.dir.path()).await;
    let mut bob = E2ee::login(&env.synapse.url, "bob", env.dir.path()).await;
    let room = alice.create_room(&[BOT, "@bob:localhost"], false).await;
    bob.join(&room).await;
    alice.wait_joined(&room, BOT).await;
    alice.wait_joined(&room, "@bob:localhost").await;
    (alice, bob, room)
}

/// Waits until every persona's device is set up and cross-signed, and the probe found
/// encryption working.
pub async fn devices_ready(env: &Env) {
    let store = env.store().await;
    for persona in [BOT, crate::support::HELPER] {
        let store = store.clone();
        eventually(&format!("{persona}'s device is cross-signed"), Duration::from_secs(90), || {
            let store = store.clone();
            async move { store.crypto_kv(persona, richbot::crypto::CROSS_SIGNED).await.ok().flatten().map(|_| ()) }
        })
        .await;
    }
    // And its probe found encryption working: only then are new DMs made encrypted.
    eventually("the probe finds encryption working", Duration::from_secs(90), || async {
        let found = store.meta(richbot::crypto::PROBE_FOUND).await.ok().flatten();
        (found.as_deref() == Some("works")).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_encrypted_dm_is_answered_and_the_answer_decrypts() {
    let env = Env::start().await;
    env.llm.respond_with(|_| text("It is sunny in Lisbon."));
    devices_ready(&env).await;
    let (mut alice, room) = encrypted_dm(&env).await;
    alice.say(&room, "What's the weather in Lisbon?").await;

    let events = alice.wait_messages(&room, BOT, 1).await;
    let answers = from(&events, BOT);
    assert_eq!(answers.len(), 1, "{events:#?}");
    assert_eq!(answers[0]["wire_type"], "m.room.encrypted", "the answer went out encrypted");
    assert_eq!(answers[0]["decryption_failure"], json!(null));
    assert_eq!(answers[0]["content"]["body"], "It is sunny in Lisbon.");
    let question = env.llm.requests()[0]["messages"].as_array().expect("messages").last().expect("one").clone();
    assert!(question["content"].as_str().expect("text").ends_with("What's the weather in Lisbon?"), "{question}");
    alice.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rich_message_and_its_edit_decrypt_with_the_payload_intact_and_the_edit_an_encrypted_replace() {
    let env = Env::start().await;
    let tracker = |state: &str| json!({"v": 1, "blocks": [{"type": "tracker", "title": "Parcel", "state": state}]});
    env.llm.script([call("rich_send", json!({"payload": tracker("packed"), "fallback": "Parcel: packed"}))]);
    env.llm.respond_with(move |req| {
        match last_tool_result(req).and_then(|r| r["event_id"].as_str().map(str::to_owned)) {
            Some(id) if req["messages"].as_array().map(Vec::len) <= Some(4) => Step::Calls(vec![(
                "rich_edit".into(),
                json!({"event_id": id, "payload": tracker("shipped"), "fallback": "Parcel: shipped"}).to_string(),
            )]),
            _ => text("[no reply]"),
        }
    });
    devices_ready(&env).await;
    let (mut alice, room) = encrypted_dm(&env).await;
    alice.say(&room, "track my parcel").await;

    let events = alice.wait_messages(&room, BOT, 2).await;
    let ours = from(&events, BOT);
    assert_eq!(ours.len(), 2, "{events:#?}");
    assert!(
        ours.iter().all(|e| e["wire_type"] == "m.room.encrypted" && e["decryption_failure"].is_null()),
        "{ours:#?}"
    );
    let (sent, edit) = (ours[0], ours[1]);
    assert_eq!(sent["content"]["com.ianm.mtrix"], tracker("packed"), "the payload decrypts intact: {ours:#?}");
    assert_eq!(sent["content"]["body"], "Parcel: packed", "{ours:#?}");
    // The relation travels in the clear (the homeserver aggregates it); the new content
    // only inside.
    let replaces = json!({"rel_type": "m.replace", "event_id": sent["event_id"]});
    assert_eq!(edit["wire_content"]["m.relates_to"], replaces, "{ours:#?}");
    assert!(edit["wire_content"].get("m.new_content").is_none(), "{edit:#?}");
    assert_eq!(edit["content"]["m.new_content"]["com.ianm.mtrix"], tracker("shipped"), "{edit:#?}");
    assert_eq!(edit["content"]["body"], "* Parcel: shipped", "{edit:#?}");
    alice.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_personas_device_is_signed_by_its_owner_and_a_client_sharing_only_with_signed_devices_is_answered() {
    let env = Env::start().await;
    env.llm.respond_with(|_| text("Signed and sealed."));
    devices_ready(&env).await;
    let mut alice = E2ee::login(&env.synapse.url, "alice", env.dir.path()).await;
    alice.only_signed_devices().await;
    let room = alice.create_room(&[BOT], true).await;
    alice.wait_joined(&room, BOT).await;
    alice.say(&room, "Are you there?").await;
    let events = alice.wait_messages(&room, BOT, 1).await;
    let answer = from(&events, BOT);
    assert_eq!(answer.len(), 1, "{events:#?}");
    assert_eq!(answer[0]["content"]["body"], "Signed and sealed.");
    assert_eq!(answer[0]["decryption_failure"], json!(null), "decrypted in only-signed-devices mode");
    let status = alice.device_status(BOT).await;
    let device = env.store().await.crypto_kv(BOT, richbot::crypto::DEVICE_ID).await.expect("store").expect("a device");
    assert_eq!(status["devices"], json!([device]), "one device, the one richbot keeps: {status}");
    assert_eq!(status["signed_by_owner"], true, "{status}");
    alice.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_an_encrypted_group_both_people_decrypt_the_answer_and_a_device_logged_in_later_the_next() {
    let env = Env::start().await;
    env.llm.respond_with(|req| {
        let asked = req["messages"].as_array().and_then(|m| m.last()).and_then(|m| m["content"].as_str()).unwrap_or("");
        text(if asked.contains("second") { "Second answer." } else { "First answer." })
    });
    devices_ready(&env).await;
    let (mut alice, mut bob, room) = alice_and_bob_with_the_persona(&env).await;
    alice.say(&room, "Richbot, the first question").await;
    for person in [&mut alice, &mut bob] {
        let events = person.wait_messages(&room, BOT, 1).await;
        let answer = from(&events, BOT);
        assert_eq!(answer.first().map(|a| a["content"]["body"].clone()), Some(json!("First answer.")), "{events:#?}");
    }

    // Bob logs in on a second device; the next answer reaches it too.
    let mut bob_laptop = E2ee::login(&env.synapse.url, "bob", env.dir.path()).await;
    bob_laptop.wait_joined(&room, "@bob:localhost").await;
    bob.say(&room, "Richbot, the second question").await;
    // The first answer came before this device and may never decrypt there: wait for the
    // second by its text.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let events = bob_laptop.messages(&room).await;
        if from(&events, BOT).iter().any(|a| a["content"]["body"] == "Second answer.") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the device logged in later decrypts the next answer: {events:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for client in [alice, bob, bob_laptop] {
        client.stop().await;
    }
}

/// The model answers "Answer to: <the question's last word>".
pub fn echo(req: &serde_json::Value) -> Step {
    let asked = req["messages"].as_array().and_then(|m| m.last()).and_then(|m| m["content"].as_str()).unwrap_or("");
    text(&format!("Answer to: {}", asked.split_whitespace().last().unwrap_or("")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_between_questions_and_asked_while_down_it_answers_decryptably_after_each_restart() {
    let mut env = Env::start().await;
    env.llm.respond_with(echo);
    devices_ready(&env).await;
    env.bot.stop().await;
    let health = format!("http://{}/health", env.bot_addr);
    let serve = || crate::support::serve_binary(&env.config_path, std::process::Stdio::null(), &health);
    let mut running = serve().await;
    let (mut alice, room) = encrypted_dm(&env).await;
    alice.say(&room, "question one").await;
    alice.wait_messages(&room, BOT, 1).await;

    // Killed; a question comes while it is down.
    running.start_kill().expect("SIGKILL");
    let _ = running.wait().await;
    alice.say(&room, "question two").await;
    let mut running = serve().await;
    alice.wait_messages(&room, BOT, 2).await;

    // Killed between questions.
    running.start_kill().expect("SIGKILL");
    let _ = running.wait().await;
    let mut running = serve().await;
    alice.say(&room, "question three").await;
    let events = alice.wait_messages(&room, BOT, 3).await;
    let answers: Vec<_> =
        from(&events, BOT).iter().map(|e| (e["content"]["body"].clone(), e["decryption_failure"].clone())).collect();
    assert_eq!(
        answers,
        ["one", "two", "three"].map(|q| (json!(format!("Answer to: {q}")), json!(null))),
        "every answer once, each decrypted: {events:#?}"
    );
    running.start_kill().expect("kill");
    let _ = running.wait().await;
    alice.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_the_persona_opens_is_encrypted_and_the_person_reads_it() {
    let env = Env::start().await;
    let details = json!({"v": 1, "blocks": [{"type": "details", "summary": "Yours", "body": "privately"}]});
    env.llm.script([
        call("rich_send", json!({"payload": details, "fallback": "Your answer, privately.", "room": "dm"})),
        text("[no reply]"),
    ]);
    devices_ready(&env).await;
    let mut alice = E2ee::login(&env.synapse.url, "alice", env.dir.path()).await;
    let group = alice.create_room(&[BOT, "@bob:localhost"], false).await;
    env.bob.join(&group).await;
    alice.wait_joined(&group, BOT).await;
    alice.wait_joined(&group, "@bob:localhost").await;
    alice.say(&group, "Richbot, tell me privately").await;
    let store = env.store().await;
    let dm = eventually("the persona opens a DM", Duration::from_secs(90), || {
        let (store, group) = (store.clone(), group.clone());
        async move {
            let dm = store.dm_room(&crate::support::user_id(BOT), &crate::support::user_id("@alice:localhost")).await;
            dm.ok().flatten().filter(|dm| dm.as_str() != group)
        }
    })
    .await;
    assert!(store.room_encryption(&dm).await.expect("store").encrypted(), "the DM is encrypted from the start");
    alice.join(dm.as_str()).await;
    let events = alice.wait_messages(dm.as_str(), BOT, 1).await;
    let sent = from(&events, BOT);
    assert_eq!(sent.len(), 1, "{events:#?}");
    assert_eq!(sent[0]["wire_type"], "m.room.encrypted");
    assert_eq!(
        sent[0]["content"]["body"], "Your answer, privately.\n\nYours\nprivately",
        "the fallback, completed by the block"
    );
    alice.stop().await;
}

/// An environment whose transactions pass through a courier that can hold room keys back.
async fn with_courier(toml: &str) -> Env {
    Env::start_with(Options { courier: true, extra_toml: toml.to_owned(), ..Options::default() }).await
}

/// Waits until richbot has set an event of `room` aside to wait for its key.
async fn waiting_for_a_key(env: &Env, room: &str) {
    let store = env.store().await;
    eventually("an encrypted message waits for its key", Duration::from_secs(60), || {
        let store = store.clone();
        async move { (store.key_waits(&crate::support::room_id(room)).await.ok()? > 0).then_some(()) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_comes_after_its_message_decrypts_the_waiting_question() {
    let env = with_courier("").await;
    env.llm.respond_with(echo);
    devices_ready(&env).await;
    let courier = env.courier.as_ref().expect("a courier");
    let (mut alice, room) = encrypted_dm(&env).await;

    courier.keys(Keys::Hold);
    alice.say(&room, "question late").await;
    eventually("the room key is held back", Duration::from_secs(60), || async { (courier.held() > 0).then_some(()) })
        .await;
    waiting_for_a_key(&env, &room).await;
    assert!(env.llm.requests().is_empty(), "nothing is answered without the key");
    courier.keys(Keys::Pass);
    courier.release().await;

    let events = alice.wait_messages(&room, BOT, 1).await;
    let answer = from(&events, BOT);
    assert_eq!(answer.first().map(|a| a["content"]["body"].clone()), Some(json!("Answer to: late")), "{events:#?}");
    alice.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_never_comes_gives_the_room_one_notice_an_hour() {
    let env = with_courier("[encryption]\nwait_for_key_secs = 2\n").await;
    env.llm.respond_with(echo);
    devices_ready(&env).await;
    let courier = env.courier.as_ref().expect("a courier");
    let (mut alice, room) = encrypted_dm(&env).await;

    courier.keys(Keys::Lose);
    alice.say(&room, "lost one").await;
    let events = alice.wait_messages(&room, BOT, 1).await;
    let notice = from(&events, BOT);
    assert_eq!(notice.len(), 1, "{events:#?}");
    assert_eq!(notice[0]["content"]["msgtype"], "m.notice");
    assert_eq!(notice[0]["content"]["body"], richbot::strings::UNDECRYPTABLE);
    assert_eq!(notice[0]["wire_type"], "m.room.encrypted", "the notice is encrypted too");

    // A second message whose key is lost is given up without another notice.
    alice.say(&room, "lost two").await;
    eventually("both given up", Duration::from_secs(60), || async {
        env.metrics().await.lines().any(|l| l == "richbot_e2ee_undecryptable_total 2").then_some(())
    })
    .await;
    let events = alice.messages(&room).await;
    assert_eq!(from(&events, BOT).len(), 1, "one notice an hour: {events:#?}");
    assert!(env.llm.requests().is_empty(), "the model never saw a message it could not read");
    alice.stop().await;
}

/// Takes about 30 s: `serve` waits that long for its probe before it concludes that the
/// homeserver does not send what encryption needs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_homeserver_without_what_encryption_needs_gets_the_fix_logged_once_and_todays_behaviour() {
    let mut env = Env::start_with(Options { homeserver_encryption: false, ..Options::default() }).await;
    env.bot.stop().await;
    let log = env.dir.path().join("serve.log");
    let stderr = std::fs::File::create(&log).expect("log");
    let health = format!("http://{}/health", env.bot_addr);
    let mut serve = crate::support::serve_binary(&env.config_path, stderr.into(), &health).await;
    let fix = "msc2409_to_device_messages_enabled: true";
    eventually("serve says what the homeserver lacks", Duration::from_secs(120), || async {
        std::fs::read_to_string(&log).ok().filter(|l| l.contains(fix)).map(|_| ())
    })
    .await;

    // Then an encrypted DM gets today's answer: one notice, and the persona leaves.
    let (room, notice) = encrypted_dm_it_cannot_read(&env).await;
    assert!(
        notice["content"]["body"].as_str().is_some_and(|b| b.contains("can't read encrypted messages")),
        "{notice}"
    );
    eventually("the persona leaves", Duration::from_secs(60), || async {
        (!env.alice.joined_members(&room).await.iter().any(|u| u == BOT)).then_some(())
    })
    .await;
    let logged = std::fs::read_to_string(&log).expect("log");
    assert_eq!(logged.matches(fix).count(), 1, "said once: {logged}");
    serve.start_kill().expect("kill");
    let _ = serve.wait().await;
}

fn reset_crypto(env: &Env) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_richbot"))
        .args(["reset-crypto", "--persona", "richbot", "--config"])
        .arg(&env.config_path)
        .output()
        .expect("run reset-crypto")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_crypto_waits_for_serve_to_stop_then_the_persona_starts_over_with_a_new_device() {
    let mut env = Env::start().await;
    env.llm.respond_with(echo);
    devices_ready(&env).await;
    let store = env.store().await;
    let old = store.crypto_kv(BOT, richbot::crypto::DEVICE_ID).await.expect("store").expect("a device");
    if env.db_url.starts_with("sqlite") {
        let refused = tokio::task::block_in_place(|| reset_crypto(&env));
        assert_eq!(refused.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&refused.stderr).contains("stop richbot serve first"), "{refused:?}");
    }
    env.bot.stop().await;
    let done = tokio::task::block_in_place(|| reset_crypto(&env));
    assert!(done.status.success(), "{done:?}");
    assert!(String::from_utf8_lossy(&done.stdout).contains(&format!("device {old} deleted")), "{done:?}");
    assert_eq!(store.crypto_kv(BOT, richbot::crypto::DEVICE_ID).await.expect("store"), None);

    env.start_bot_again().await;
    devices_ready(&env).await;
    let new = store.crypto_kv(BOT, richbot::crypto::DEVICE_ID).await.expect("store").expect("a device");
    assert_ne!(new, old);
    let (mut alice, room) = encrypted_dm(&env).await;
    alice.say(&room, "question again").await;
    let events = alice.wait_messages(&room, BOT, 1).await;
    assert_eq!(from(&events, BOT)[0]["content"]["body"], "Answer to: again", "{events:#?}");
    let status = alice.device_status(BOT).await;
    assert_eq!(status["devices"], json!([new]), "only the new device is left: {status}");
    assert_eq!(status["signed_by_owner"], true, "signed by the new identity: {status}");
    alice.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_encrypted_write_whose_answer_is_lost_goes_out_once_its_retries_the_same_ciphertext() {
    let env = Env::start_with(Options { lossy: true, ..Options::default() }).await;
    env.llm.respond_with(echo);
    devices_ready(&env).await;
    let lossy = env.lossy.as_ref().expect("a lossy way to the homeserver");
    let (mut alice, room) = encrypted_dm(&env).await;

    // Every answer to the first write's attempts is lost: the retries give up, the turn
    // resumes, and the write is found (its marker, decrypted) instead of sent again.
    lossy.lose(6);
    alice.say(&room, "question once").await;
    let turns = env.wait_turns(&room, 1).await;
    assert_eq!(turns[0].0, "answered", "{turns:?}");
    let sends = lossy.sends();
    let first = &sends[0];
    let retries: Vec<_> = sends.iter().filter(|(path, _)| *path == first.0).collect();
    // Six attempts (the homeserver client's retries), all answers lost; after the turn
    // resumed, none more: the write was found by its marker in the persona's own
    // (decrypted) messages.
    assert_eq!(retries.len(), 6, "{sends:?}");
    assert_eq!(sends.len(), 6, "no other write: {sends:?}");
    assert!(retries.iter().all(|(_, body)| *body == first.1), "every attempt carried the same ciphertext");
    let events = alice.wait_messages(&room, BOT, 1).await;
    let answers = from(&events, BOT);
    assert_eq!(answers.len(), 1, "posted once: {events:#?}");
    assert_eq!(answers[0]["content"]["body"], "Answer to: once");
    alice.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_that_turns_encryption_on_midway_is_answered_encrypted_from_then_on() {
    let env = Env::start().await;
    env.llm.respond_with(echo);
    devices_ready(&env).await;
    let mut alice = E2ee::login(&env.synapse.url, "alice", env.dir.path()).await;
    let room = alice.create_room_with(&[BOT], true, false).await;
    alice.wait_joined(&room, BOT).await;
    alice.say(&room, "question clear").await;
    alice.wait_messages(&room, BOT, 1).await;
    alice.encrypt_room(&room).await;
    alice.say(&room, "question secret").await;
    let events = alice.wait_messages(&room, BOT, 2).await;
    let answers: Vec<_> =
        from(&events, BOT).iter().map(|e| (e["content"]["body"].clone(), e["wire_type"].clone())).collect();
    assert_eq!(
        answers,
        [(json!("Answer to: clear"), json!("m.room.message")), (json!("Answer to: secret"), json!("m.room.encrypted"))],
        "{events:#?}"
    );
    alice.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_redacted_while_it_waits_for_its_key_is_dropped_without_a_word() {
    let env = with_courier("[encryption]\nwait_for_key_secs = 3\n").await;
    env.llm.respond_with(echo);
    devices_ready(&env).await;
    let courier = env.courier.as_ref().expect("a courier");
    let (mut alice, room) = encrypted_dm(&env).await;

    courier.keys(Keys::Hold);
    let regret = alice.say(&room, "question regretted").await;
    waiting_for_a_key(&env, &room).await;
    alice.redact(&room, &regret).await;
    courier.keys(Keys::Pass);
    courier.release().await;
    alice.say(&room, "question kept").await;
    let events = alice.wait_messages(&room, BOT, 1).await;
    let answers: Vec<_> = from(&events, BOT).iter().map(|e| e["content"]["body"].clone()).collect();
    assert_eq!(answers, [json!("Answer to: kept")], "no notice, no answer to what was redacted: {events:#?}");
    let store = env.store().await;
    eventually("nothing waits any more", Duration::from_secs(30), || async {
        (store.key_waits(&crate::support::room_id(&room)).await.ok()? == 0).then_some(())
    })
    .await;
    assert!(from(&alice.messages(&room).await, BOT).len() == 1);
    alice.stop().await;
}
