//! Never a downgrade: where richbot cannot encrypt (encryption off, or a homeserver that
//! lacks what it needs), nothing goes into an encrypted room in the clear but the notice
//! that says so, whether the model or an agent client writes; and a direct chat is made
//! encrypted only once a probe found encryption working.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::llm::{call, last_tool_result, text};
use crate::support::{BOT, Env, Options, enc, eventually, synapse};

const OPS: &str = "ops-fedcba9876543210fedcba9876543210";
const WAIT: Duration = Duration::from_secs(60);

fn details(body: &str) -> Value {
    json!({"v": 1, "blocks": [{"type": "details", "summary": "Answer", "body": body}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_encryption_off_nothing_but_the_notice_goes_clear_into_an_encrypted_room() {
    let port = synapse::free_port();
    let extra_toml = format!(
        "[bot]\nencrypted_rooms = \"stay\"\n\n[encryption]\nenabled = false\n\n[agents]\nlisten = \"127.0.0.1:{port}\"\n\n\
         [[agents.clients]]\nname = \"ops\"\ntoken = \"{OPS}\"\npersona = \"richbot\"\nrooms = [\"!*\"]\n\n"
    );
    let env = Env::start_with(Options { extra_toml, ..Options::default() }).await;
    // The persona says once that it cannot read the room (in the clear: the one thing
    // people there must learn), and stays.
    let (room, notice) = crate::e2e_encrypted::encrypted_dm_it_cannot_read(&env).await;
    assert!(
        notice["content"]["body"].as_str().is_some_and(|b| b.contains("can't read encrypted messages")),
        "{notice}"
    );

    // A clear message there (a script, or a client that does not encrypt) starts a turn:
    // the model's answer is refused, and the model is told why.
    env.llm.script([
        call("rich_send", json!({"payload": details("secret"), "fallback": "the secret answer"})),
        text("[no reply]"),
    ]);
    env.alice.say(&room, "what is the secret?").await;
    env.wait_turns(&room, 2).await;
    let requests = env.llm.requests();
    let refused = last_tool_result(&requests[1]).expect("a tool result");
    assert_eq!(refused["code"], "send_failed", "{refused}");
    assert!(refused["error"].as_str().is_some_and(|e| e.contains("encrypted room")), "{refused}");

    // An agent client's write is refused with a reason.
    let response = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/v1/send"))
        .bearer_auth(OPS)
        .json(&json!({"kind": "channel", "to": room, "body": "deploy: done"}))
        .send()
        .await
        .expect("post");
    let status = response.status().as_u16();
    let answer: Value = response.json().await.expect("a JSON answer");
    assert_eq!((status, answer["code"].as_str()), (409, Some("encryption_unavailable")), "{answer}");

    let sent = env.alice.messages_from(&room, BOT).await;
    assert_eq!(sent.len(), 1, "only the notice went out: {sent:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_chat_opened_before_the_probe_answers_is_not_made_encrypted() {
    // A homeserver without what encryption needs: its probe never comes back, and the
    // model opens a DM while `serve` is still waiting for it.
    let env = Env::start_with(Options { homeserver_encryption: false, ..Options::default() }).await;
    let group = env.alice.create_room(&[BOT, "@bob:localhost"], false).await;
    env.wait_joined(&group, BOT).await;
    env.bob.join(&group).await;
    // richbot knows the room has three members (else it would take it for a DM).
    let (store, id) = (env.store().await, crate::support::room_id(&group));
    eventually("richbot records Bob's join", WAIT, || async {
        (store.joined_members(&id).await.expect("members").len() == 3).then_some(())
    })
    .await;
    env.llm.script([
        call(
            "rich_send",
            json!({"payload": details("privately"), "fallback": "Your answer, privately.", "room": "dm"}),
        ),
        text("[no reply]"),
    ]);
    env.alice.say(&group, "richbot, tell me privately").await;
    env.wait_turns(&group, 1).await;
    let dm = store
        .dm_room(&crate::support::user_id(BOT), &crate::support::user_id("@alice:localhost"))
        .await
        .expect("query")
        .expect("a DM was recorded")
        .to_string();
    env.alice.join(&dm).await;
    let path = format!("/_matrix/client/v3/rooms/{}/state/m.room.encryption/", enc(&dm));
    let (status, state) = env.alice.call(reqwest::Method::GET, &path, None).await;
    assert_eq!(status, 404, "the DM is not encrypted: {state}");
    let msgs = env.alice.messages_from(&dm, BOT).await;
    assert_eq!(msgs[0]["content"]["body"], "Your answer, privately.", "{msgs:#?}");
}

/// A start-up probe that is lost (as on a loaded homeserver: its to-device message never
/// comes back) is not the last word: the persona asks again (30 s later, then backing
/// off) and the finding that encryption works is remembered. Takes about a minute and a
/// half of real time: the first probe waits its 30 s, then the 30 s before the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_lost_at_start_is_asked_again_until_encryption_is_found_working() {
    use crate::support::courier::Keys;
    let mut env = Env::start_with(Options { courier: true, ..Options::default() }).await;
    crate::e2e_encrypted::devices_ready(&env).await;
    env.bot.stop().await;
    let store = env.store().await;
    store.set_meta(richbot::crypto::PROBE_FOUND, "forgotten").await.expect("meta");
    let courier = env.courier.as_ref().expect("a courier");
    courier.keys(Keys::Lose);
    env.start_bot_again().await;
    let found = || async { store.meta(richbot::crypto::PROBE_FOUND).await.ok().flatten() };
    eventually("the first probe is lost", Duration::from_secs(120), || async {
        (found().await.as_deref() == Some("lacking")).then_some(())
    })
    .await;
    env.courier.as_ref().expect("a courier").keys(Keys::Pass);
    eventually("a later probe finds encryption working", Duration::from_secs(180), || async {
        (found().await.as_deref() == Some("works")).then_some(())
    })
    .await;
}
