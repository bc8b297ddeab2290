//! The pipeline with the homeserver faked (unit-level, as the style guide allows): outcomes
//! that a real Synapse will not produce on demand, such as a homeserver that refuses a
//! call after letting the persona join, or one that rate-limits a send past the retries.

use std::time::Duration;

use serde_json::json;

use crate::support::fake_hs::{Bot, FakeHs, Reply, invite};
use crate::support::llm::{call, last_tool_result, text};
use crate::support::{FakeLlm, eventually};

#[tokio::test]
async fn a_member_event_the_homeserver_refuses_is_recorded_done_not_retried_forever() {
    let fake = FakeHs::start(|r| {
        if r.path().ends_with("/joined_members") {
            Reply::refused(403, "M_FORBIDDEN", "You are not in this room")
        } else {
            Reply::ok(json!({}))
        }
    })
    .await;
    let bot = Bot::start(&fake.url, "http://127.0.0.1:9/v1", "").await;
    bot.push("1", vec![invite()]).await;
    let store = bot.store.clone();
    eventually("the refused member event is finished", Duration::from_secs(20), || {
        let store = store.clone();
        async move { store.event(ruma::event_id!("$invite")).await.expect("query").filter(|e| e.processed) }
    })
    .await;
    let asked: Vec<String> = fake.requests().iter().map(|r| format!("{} {}", r.method, r.path())).collect();
    assert_eq!(
        asked.iter().filter(|r| r.ends_with("/joined_members")).count(),
        1,
        "asked once, not in a loop: {asked:?}"
    );
    assert!(asked.iter().any(|r| r == "POST /_matrix/client/v3/rooms/%21room%3Ax/join"), "{asked:?}");
    bot.stop().await;
}

#[tokio::test]
async fn the_model_is_told_whether_a_failed_send_may_work_later_or_never() {
    // The turn's first write is rate-limited past every retry (a temporary failure), the
    // second is refused for good, the final answer lands.
    let fake = FakeHs::start(|r| {
        let path = r.path();
        if path.ends_with("/joined_members") {
            Reply::ok(json!({"joined": {"@alice:x": {}, "@richbot:x": {}}}))
        } else if path.contains("/send/m.room.message/") && path.ends_with(".0") {
            Reply::rate_limited(1)
        } else if path.contains("/send/m.room.message/") && path.ends_with(".1") {
            Reply::refused(403, "M_FORBIDDEN", "You are not allowed to send here")
        } else if path.contains("/send/") {
            Reply::ok(json!({"event_id": "$answer"}))
        } else {
            Reply::ok(json!({}))
        }
    })
    .await;
    let llm = FakeLlm::start().await;
    let weather = json!({"payload": {"v": 1, "blocks": [{"type": "weather", "location": "Lisbon", "temp": 21}]},
        "fallback": "Lisbon 21 °C"});
    llm.script([call("rich_send", weather.clone()), call("rich_send", weather), text("Lisbon is at 21 °C.")]);
    let bot = Bot::start(&fake.url, &llm.base_url, "").await;
    bot.push("1", vec![invite()]).await;
    let now = richbot::clock::now_ms();
    let question = json!({"event_id": "$q", "room_id": "!room:x", "sender": "@alice:x", "type": "m.room.message",
        "origin_server_ts": now, "content": {"msgtype": "m.text", "body": "weather in Lisbon?"}});
    bot.push("2", vec![question]).await;

    let turns = bot.finished_turns(1).await;
    assert_eq!(turns[0].0, "answered");
    let requests = llm.requests();
    assert_eq!(requests.len(), 3);
    let later = last_tool_result(&requests[1]).expect("first tool result");
    assert_eq!(later["code"], "homeserver_unavailable", "{later}");
    let never = last_tool_result(&requests[2]).expect("second tool result");
    assert_eq!(never["code"], "send_failed", "{never}");
    assert!(never["error"].as_str().is_some_and(|e| e.contains("M_FORBIDDEN")), "{never}");
    let sends = fake.requests().iter().filter(|r| r.path().contains("/send/m.room.message/")).count();
    assert_eq!(sends, 6 + 1 + 1, "six attempts at the rate-limited write, one at each other");
    bot.stop().await;
}

#[tokio::test]
async fn an_answer_too_large_to_send_is_recorded_as_such_not_as_a_homeserver_refusal() {
    let fake = FakeHs::start(|r| {
        if r.path().ends_with("/joined_members") {
            Reply::ok(json!({"joined": {"@alice:x": {}, "@richbot:x": {}}}))
        } else {
            Reply::ok(json!({"event_id": "$sent"}))
        }
    })
    .await;
    let llm = FakeLlm::start().await;
    llm.script([text(&"word ".repeat(20_000))]);
    let bot = Bot::start(&fake.url, &llm.base_url, "").await;
    bot.push("1", vec![invite()]).await;
    let question = json!({"event_id": "$q", "room_id": "!room:x", "sender": "@alice:x", "type": "m.room.message",
        "origin_server_ts": richbot::clock::now_ms(), "content": {"msgtype": "m.text", "body": "write a lot"}});
    bot.push("2", vec![question]).await;
    let turns = bot.finished_turns(1).await;
    let outcome: richbot::turn::Outcome = turns[0].0.parse().expect("a known outcome");
    assert_eq!(outcome.kind(), "post_failed");
    assert!(
        turns[0].0.contains("at most 61440 fit in one Matrix event") && !turns[0].0.contains("refused"),
        "{}",
        turns[0].0
    );
    assert!(!fake.requests().iter().any(|r| r.path().contains("/send/m.room.message/")), "nothing was sent");
    bot.stop().await;
}
