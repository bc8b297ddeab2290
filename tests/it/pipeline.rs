//! The pipeline with the homeserver faked (unit-level, as the style guide allows): outcomes
//! that a real Synapse will not produce on demand, such as a homeserver that refuses a
//! call after letting the persona join, or one that rate-limits a send past the retries.

use std::time::Duration;

use serde_json::json;

use crate::support::fake_hs::{Bot, FakeHs, Reply, invite, message};
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
async fn a_write_that_fails_for_now_is_retried_without_asking_again_and_one_refused_for_good_is_told() {
    // The turn's first write is rate-limited past a whole round of retries (a temporary
    // failure): the turn suspends and resumes from its record, and the write lands. The
    // second is refused for good: the model is told. The final answer lands.
    let rate_limited = std::sync::atomic::AtomicUsize::new(0);
    let fake = FakeHs::start(move |r| {
        let path = r.path();
        if path.ends_with("/joined_members") {
            Reply::ok(json!({"joined": {"@alice:x": {}, "@richbot:x": {}}}))
        } else if path.ends_with("/messages") {
            Reply::ok(json!({"chunk": []}))
        } else if path.contains("/send/m.room.message/") && path.ends_with(".0") {
            if rate_limited.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 8 {
                Reply::rate_limited(1)
            } else {
                Reply::ok(json!({"event_id": "$first"}))
            }
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
    // The second call differs from the first: an identical one would not be sent again.
    let mut tomorrow = weather.clone();
    tomorrow["fallback"] = json!("Lisbon tomorrow 23 °C");
    llm.script([call("rich_send", weather), call("rich_send", tomorrow), text("Lisbon is at 21 °C.")]);
    let bot = Bot::start(&fake.url, &llm.base_url, "").await;
    bot.push("1", vec![invite()]).await;
    let now = richbot::clock::now_ms();
    let question = json!({"event_id": "$q", "room_id": "!room:x", "sender": "@alice:x", "type": "m.room.message",
        "origin_server_ts": now, "content": {"msgtype": "m.text", "body": "weather in Lisbon?"}});
    bot.push("2", vec![question]).await;

    let turns = bot.finished_turns(1).await;
    assert_eq!(turns[0].0, "answered");
    let requests = llm.requests();
    assert_eq!(requests.len(), 3, "the model was not asked again for the suspended call");
    let landed = last_tool_result(&requests[1]).expect("first tool result");
    assert_eq!(landed["event_id"], "$first", "{landed}");
    let never = last_tool_result(&requests[2]).expect("second tool result");
    assert_eq!(never["code"], "send_failed", "{never}");
    assert!(never["error"].as_str().is_some_and(|e| e.contains("M_FORBIDDEN")), "{never}");
    let sent = fake.sent();
    assert!(sent.iter().all(|c| c["org.richbot.write"].as_str().is_some_and(|m| m.starts_with("rb."))), "marked");
    bot.stop().await;
}

#[tokio::test]
async fn an_answer_too_large_for_one_event_goes_out_in_several_each_within_the_cap() {
    let fake = dm_homeserver().await;
    let llm = FakeLlm::start().await;
    llm.script([text(&"word ".repeat(20_000))]);
    let bot = Bot::start(&fake.url, &llm.base_url, "").await;
    bot.push("1", vec![invite()]).await;
    let question = json!({"event_id": "$q", "room_id": "!room:x", "sender": "@alice:x", "type": "m.room.message",
        "origin_server_ts": richbot::clock::now_ms(), "content": {"msgtype": "m.text", "body": "write a lot"}});
    bot.push("2", vec![question]).await;
    let turns = bot.finished_turns(1).await;
    assert_eq!(turns[0].0, "answered");
    let sent = fake.sent();
    assert!(sent.len() >= 7, "100 KB in parts of at most 16 KB: {}", sent.len());
    assert!(sent.iter().all(|c| c.to_string().len() < 61_440), "each part within one event");
    let whole: String = sent.iter().filter_map(|c| c["body"].as_str()).collect::<Vec<_>>().join(" ");
    assert_eq!(whole.split_whitespace().count(), 20_000, "nothing lost");
    bot.stop().await;
}

/// `llm.max_concurrent_requests` bounds the calls in flight across all turns (LLM calls
/// are I/O, limited apart from the room cap); the others wait their turn and all answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_calls_in_flight_never_pass_the_llm_concurrency_limit() {
    use richbot::agent::{Complete, Llm, Message};
    for (limit, calls) in [(2, 6), (6, 6)] {
        let llm = FakeLlm::start().await;
        llm.respond_with(|_| {
            crate::support::llm::Step::Delay(std::time::Duration::from_millis(150), Box::new(text("ok")))
        });
        let client =
            Llm::new(&llm.base_url, None, "m", std::time::Duration::from_secs(10), 100).with_concurrency(limit);
        let asks = (0..calls).map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                let (live, _) = tokio::sync::watch::channel(String::new());
                client.complete(&[Message::User("hi".into())], &[], &live).await.map(|r| r.text)
            })
        });
        for answer in futures::future::join_all(asks).await {
            assert_eq!(answer.expect("task").expect("answer").as_deref(), Some("ok"));
        }
        assert_eq!(llm.most_at_once(), limit, "limit {limit}, {calls} calls at once");
    }
}

#[tokio::test]
async fn an_invite_greets_once_when_a_later_event_of_its_transaction_fails_for_a_while() {
    // Leaving fails for a while (the homeserver is unavailable): the step that applied the
    // invite (and greeted) fails on the next event, and runs again later.
    let leaves = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = leaves.clone();
    let fake = FakeHs::start(move |r| {
        if r.path().ends_with("/joined_members") {
            Reply::ok(json!({"joined": {"@richbot:x": {}, "@alice:x": {}}}))
        } else if r.path().ends_with("/leave") && counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 8 {
            Reply::unavailable(502)
        } else {
            Reply::ok(json!({"event_id": "$sent"}))
        }
    })
    .await;
    let greeting = "[[personas]]\nlocalpart = \"richbot\"\ngreeting = \"Hello, I'm here.\"\n";
    let bot = Bot::start(&fake.url, "http://127.0.0.1:9/v1", greeting).await;
    let left = json!({"event_id": "$left", "room_id": "!room:x", "sender": "@alice:x", "type": "m.room.member",
        "state_key": "@alice:x", "origin_server_ts": 2, "content": {"membership": "leave"}});
    bot.push("1", vec![invite(), left]).await;
    let store = bot.store.clone();
    eventually("the leave is applied in the end", Duration::from_secs(60), || {
        let store = store.clone();
        async move { store.event(ruma::event_id!("$left")).await.expect("query").filter(|e| e.processed) }
    })
    .await;
    let greetings = fake.sent().iter().filter(|b| b["body"] == "Hello, I'm here.").count();
    assert_eq!(greetings, 1, "greeted once: {:?}", fake.sent());
    assert!(leaves.load(std::sync::atomic::Ordering::SeqCst) > 8, "the failing step ran again");
    bot.stop().await;
}

#[tokio::test]
async fn a_refused_final_edit_ends_the_live_message_and_the_rest_follows_as_new_messages() {
    let sends = std::sync::atomic::AtomicUsize::new(0);
    let fake = FakeHs::start(move |r| {
        let path = r.path();
        if path.ends_with("/joined_members") {
            return Reply::ok(json!({"joined": {"@alice:x": {}, "@richbot:x": {}}}));
        }
        if path.ends_with("/messages") {
            return Reply::ok(json!({"chunk": []}));
        }
        if !path.contains("/send/m.room.message/") {
            return Reply::ok(json!({}));
        }
        // The final edit (an edit with no live marker) is refused as too large, once;
        // the edit that ends the message with "continued below" is taken.
        let body = &r.body;
        let is_final_edit = body["m.relates_to"]["rel_type"] == "m.replace"
            && body["m.new_content"].get("org.matrix.msc4357.live").is_none()
            && !body["body"].as_str().is_some_and(|b| b.contains("continued below"));
        if is_final_edit {
            return Reply::refused(413, "M_TOO_LARGE", "event too large");
        }
        let n = sends.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Reply::ok(json!({"event_id": format!("$sent{n}")}))
    })
    .await;
    let llm = FakeLlm::start().await;
    let pieces: Vec<String> = (0..20).map(|i| format!("Sentence number {i} of a long answer. ")).collect();
    llm.script([crate::support::llm::Step::Pieces(pieces.clone(), Duration::from_millis(150))]);
    let bot = Bot::start(&fake.url, &llm.base_url, "[bot]\nedit_interval_ms = 300\n").await;
    bot.push("1", vec![invite()]).await;
    bot.push("2", vec![crate::support::fake_hs::message("$q", "@alice:x", "tell me at length")]).await;
    let turns = bot.finished_turns(1).await;
    assert_eq!(turns[0].0, "answered", "{turns:?}");
    let sent = fake.sent();
    let ended = sent
        .iter()
        .find(|c| c["m.new_content"]["body"].as_str().is_some_and(|b| b.ends_with("(continued below)")))
        .unwrap_or_else(|| panic!("the live message is ended, not left live: {sent:#?}"));
    assert!(ended["m.new_content"].get("org.matrix.msc4357.live").is_none(), "{ended}");
    let shown = ended["m.new_content"]["body"].as_str().unwrap_or_default().trim_end_matches("(continued below)");
    let after: Vec<&str> = sent
        .iter()
        .skip_while(|c| c["m.new_content"]["body"] != ended["m.new_content"]["body"])
        .skip(1)
        .filter_map(|c| c["body"].as_str())
        .collect();
    let whole = pieces.concat();
    let said = format!("{shown} {}", after.join(" "));
    let words = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(words(&said), words(&whole), "what was shown, then the rest: nothing lost");
    bot.stop().await;
}

/// A quick answer shows no typing notice: it would flash on and off, two homeserver calls
/// on the answer's way. (That one which takes a while shows it, on and then off, is
/// `e2e_rooms::the_persona_is_typing_while_the_model_thinks`, on a real Synapse.)
#[tokio::test]
async fn a_quick_answer_shows_no_typing_notice() {
    let fake = dm_homeserver().await;
    let llm = FakeLlm::start().await;
    llm.script([text("quick")]);
    let bot = Bot::start(&fake.url, &llm.base_url, "").await;
    bot.push("1", vec![invite()]).await;
    bot.push("2", vec![message("$q1", "@alice:x", "quick?")]).await;
    assert_eq!(bot.finished_turns(1).await[0].0, "answered");
    let requests = fake.requests();
    assert!(requests.iter().any(|r| r.path().contains("/send/m.room.message/")), "the answer was posted");
    let typing: Vec<&str> = requests.iter().map(|r| r.path()).filter(|p| p.contains("/typing/")).collect();
    assert!(typing.is_empty(), "no notice for a quick answer: {typing:?}");
    bot.stop().await;
}

/// A homeserver that takes every write, where alice and the persona are in the DM.
async fn dm_homeserver() -> FakeHs {
    FakeHs::start(|r| {
        if r.path().ends_with("/joined_members") {
            Reply::ok(json!({"joined": {"@alice:x": {}, "@richbot:x": {}}}))
        } else {
            Reply::ok(json!({"event_id": "$sent"}))
        }
    })
    .await
}

/// A model server on a CPU reads a long prompt for longer than `llm.timeout_secs`, pinging
/// meanwhile (SSE comments, which the event reader drops): the call waits for it, since
/// bytes are coming. The same wait with nothing sent times out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_call_waits_past_its_timeout_for_a_server_that_pings_but_not_for_a_silent_one() {
    use crate::support::llm::Step;
    use richbot::agent::{Complete, Llm, Message};
    let llm = FakeLlm::start().await;
    let client = Llm::new(&llm.base_url, None, "m", Duration::from_secs(2), 100)
        .with_idle_timeout(Duration::from_secs(2))
        .with_streaming(true);
    let (live, _) = tokio::sync::watch::channel(String::new());
    let asked = [Message::User("hi".into())];
    let ask = || client.complete(&asked, &[], &live);
    // 6 s of reading, three times the timeout, a ping every 0.5 s.
    llm.script([Step::Pinged(12, Duration::from_millis(500), "read it all".into())]);
    let reply = ask().await.expect("answered");
    assert_eq!(reply.text.as_deref(), Some("read it all"));
    // The stream opened at once, then nothing for 6 s.
    llm.script([Step::Pieces(vec!["too late".into()], Duration::from_secs(6))]);
    let error = ask().await.expect_err("timed out");
    assert!(matches!(error, richbot::agent::Error::TimedOut(_)), "{error:?}");
}
