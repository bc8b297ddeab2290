//! Where answers go, against a real Synapse: threads, the `room` argument (`dm`, a shared
//! room, a refused one), edits of edits, and the typing notice while the model thinks.

use std::time::Duration;

use crate::support::llm::{Step, call, last_tool_result, text};
use crate::support::{BOT, Env, Options, user_id};
use reqwest::Method;
use serde_json::{Value, json};

fn details(body: &str) -> Value {
    json!({"v": 1, "blocks": [{"type": "details", "summary": "Answer", "body": body}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_in_the_personas_thread_is_answered_in_the_thread() {
    let env = Env::start().await;
    env.llm.script([text("root answer"), text("in-thread answer")]);
    let room = env.alice.create_room(&[BOT, "@bob:localhost"], false).await;
    env.wait_joined(&room, BOT).await;
    env.bob.join(&room).await;
    env.alice.say(&room, "Richbot: start a thread?").await;
    let root = env.wait_messages(&room, BOT, 1).await[0]["event_id"].as_str().expect("id").to_owned();
    env.alice
        .send(&room, "m.room.message", json!({"msgtype": "m.text", "body": "and more?", "m.relates_to": {"rel_type": "m.thread", "event_id": root, "is_falling_back": true, "m.in_reply_to": {"event_id": root}}}))
        .await;
    let msgs = env.wait_messages(&room, BOT, 2).await;
    assert_eq!(msgs[1]["content"]["body"], "in-thread answer");
    assert_eq!(msgs[1]["content"]["m.relates_to"]["rel_type"], "m.thread");
    assert_eq!(msgs[1]["content"]["m.relates_to"]["event_id"], root.as_str());
    let convo = env.llm.requests()[1]["messages"].to_string();
    assert!(convo.contains("thread rooted at"), "the model is told it is in a thread");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn room_dm_opens_a_direct_chat_and_unshared_rooms_are_refused() {
    // Encryption off: with it on, the DM is encrypted (`e2e_encrypted` reads that one with
    // an encrypted client; this test's people are plain HTTP).
    let env =
        Env::start_with(Options { extra_toml: "[encryption]\nenabled = false\n".into(), ..Options::default() }).await;
    let group = env.alice.create_room(&[BOT, "@bob:localhost"], false).await;
    env.wait_joined(&group, BOT).await;
    env.bob.join(&group).await;
    let elsewhere = env.bob.create_room(&[], false).await;
    let team = env.alice.create_room_with(json!({"invite": [BOT], "name": "Team", "preset": "private_chat"})).await;
    env.wait_joined(&team, BOT).await;
    env.llm.script([
        call(
            "rich_send",
            json!({"payload": details("secret"), "fallback": "Your answer, privately.", "room": elsewhere}),
        ),
        call("rich_send", json!({"payload": details("secret"), "fallback": "Your answer, privately.", "room": "dm"})),
        // A second one before she accepts the invite: the same DM, not another.
        call("rich_send", json!({"payload": details("more"), "fallback": "And more.", "room": "dm"})),
        text("[no reply]"),
    ]);
    env.alice.say(&group, "richbot, tell me privately").await;
    env.wait_turns(&group, 1).await;
    let requests = env.llm.requests();
    // A group room is not told which other rooms the asker shares with the persona: its
    // turn's note offers the DM alone.
    let messages = requests[0]["messages"].as_array().cloned().unwrap_or_default();
    let note = messages.last().and_then(|m| m["content"].as_str()).unwrap_or_default().to_owned();
    assert!(!note.contains(&team), "{note}");
    assert!(
        note.contains("Rooms you may post to besides this chat: \"dm\" (a direct chat with @alice:localhost)."),
        "{note}"
    );
    let refused = last_tool_result(&requests[1]).expect("result");
    assert_eq!(refused["code"], "room_not_allowed");
    assert_eq!(refused["path"], "room");
    let sent = last_tool_result(&requests[2]).expect("result");
    assert!(sent["event_id"].is_string(), "{sent}");

    let store = env.store().await;
    let dm =
        store.dm_room(&user_id(BOT), &user_id("@alice:localhost")).await.expect("query").expect("a DM was recorded");
    let dm = dm.to_string();
    assert_ne!(dm, group);
    env.alice.join(&dm).await;
    let msgs = env.alice.messages_from(&dm, BOT).await;
    let bodies: Vec<&Value> = msgs.iter().map(|m| &m["content"]["body"]).collect();
    assert_eq!(
        bodies,
        [&json!("Your answer, privately.\n\nAnswer\nsecret"), &json!("And more.\n\nAnswer\nmore")],
        "both in the one DM"
    );
    let member = env
        .alice
        .call(
            Method::GET,
            &format!(
                "/_matrix/client/v3/rooms/{}/state/m.room.member/{}",
                crate::support::enc(&dm),
                crate::support::enc("@alice:localhost")
            ),
            None,
        )
        .await;
    assert_eq!(member.1["membership"], "join");
    assert!(env.alice.messages_from(&group, BOT).await.is_empty(), "nothing in the group room");
    assert!(env.bob.messages_from(&elsewhere, BOT).await.is_empty(), "nothing in the unshared room");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_of_an_edit_targets_the_original() {
    let env = Env::start().await;
    env.llm.script([call("rich_send", json!({"payload": details("v1"), "fallback": "v1"}))]);
    env.llm.respond_with(|req| {
        let n = req["messages"].as_array().map_or(0, Vec::len);
        let last = last_tool_result(req).and_then(|r| r["event_id"].as_str().map(str::to_owned));
        match (n, last) {
            // After the send: edit it; after that edit: edit the edit's event id.
            (4 | 6, Some(id)) => call(
                "rich_edit",
                json!({"event_id": id, "payload": details(&format!("v{}", n / 2)), "fallback": format!("v{}", n / 2)}),
            ),
            _ => text("[no reply]"),
        }
    });
    let room = env.dm().await;
    env.alice.say(&room, "draft something").await;
    env.wait_turns(&room, 1).await;
    let msgs = env.alice.messages_from(&room, BOT).await;
    assert_eq!(msgs.len(), 3, "{msgs:#?}");
    for edit in &msgs[1..] {
        assert_eq!(edit["content"]["m.relates_to"]["event_id"], msgs[0]["event_id"], "aimed at the original");
    }
    assert_eq!(msgs[2]["content"]["m.new_content"]["body"], "v3\n\nAnswer\nv3");
}

/// Whether a sync response says `BOT` is typing in `room` (`None`: no typing update).
fn bot_typing(sync: &Value, room: &str) -> Option<bool> {
    let events = sync["rooms"]["join"][room]["ephemeral"]["events"].as_array()?;
    let typing = events.iter().rev().find(|e| e["type"] == "m.typing")?;
    Some(typing["content"]["user_ids"].as_array().is_some_and(|u| u.iter().any(|x| x == BOT)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_persona_is_typing_while_the_model_thinks() {
    let env = Env::start().await;
    env.llm.script([Step::Delay(Duration::from_secs(3), Box::new(text("done thinking")))]);
    let room = env.dm().await;
    let (_, first) = env.alice.call(Method::GET, "/_matrix/client/v3/sync?timeout=0", None).await;
    let mut since = first["next_batch"].as_str().expect("next_batch").to_owned();
    env.alice.say(&room, "think hard").await;
    // Follow alice's sync stream: the persona starts typing, then stops before it answers.
    let mut updates = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while updates.last() != Some(&false) || updates.is_empty() {
        assert!(std::time::Instant::now() < deadline, "typing updates so far: {updates:?}");
        let (_, sync) =
            env.alice.call(Method::GET, &format!("/_matrix/client/v3/sync?since={since}&timeout=2000"), None).await;
        since = sync["next_batch"].as_str().expect("next_batch").to_owned();
        if let Some(t) = bot_typing(&sync, &room) {
            updates.push(t);
        }
    }
    assert_eq!(updates.first(), Some(&true), "typing came on first: {updates:?}");
    let msgs = env.wait_messages(&room, BOT, 1).await;
    assert_eq!(msgs[0]["content"]["body"], "done thinking");
}

/// The reason the persona gave for leaving (declining) `room`, as `viewer` sees it.
async fn declined_with(viewer: &crate::support::User, room: &str) -> String {
    crate::support::eventually("the invite is declined", std::time::Duration::from_secs(30), || async {
        viewer.messages(room).await.into_iter().find_map(|e| {
            let declined = e["type"] == "m.room.member"
                && e["state_key"] == crate::support::BOT
                && e["content"]["membership"] == "leave";
            declined.then(|| e["content"]["reason"].as_str().unwrap_or_default().to_owned())
        })
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invites_past_the_room_limits_are_declined_saying_why() {
    let extra_toml = "[limits]\nrooms_per_inviter = 2\nrooms_total = 3\n".to_owned();
    let env = crate::support::Env::start_with(crate::support::Options { extra_toml, ..Default::default() }).await;
    for _ in 0..2 {
        env.dm().await;
    }
    let third = env.alice.create_room(&[crate::support::BOT], true).await;
    let why = declined_with(&env.alice, &third).await;
    assert!(why.contains("rooms you invited me to"), "{why}");
    let bobs = env.bob.create_room(&[crate::support::BOT], true).await;
    env.wait_joined_seen_by(&env.bob, &bobs, crate::support::BOT).await;
    let over = env.bob.create_room(&[crate::support::BOT], true).await;
    let why = declined_with(&env.bob, &over).await;
    assert!(why.contains("as many rooms as this deployment allows"), "{why}");
}
