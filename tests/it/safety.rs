//! Safety rules of the turn pipeline against a stand-in homeserver, for what a real Synapse
//! will not do on demand (deliver a question ten minutes late, put two askers' messages in
//! one transaction) or where only richbot's side is in question (caps on tool calls and
//! writes, the deadline, an LLM asking to retry after an hour).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::FakeLlm;
use crate::support::fake_hs::{Bot, FakeHs, Reply, invite, message};
use crate::support::llm::{Step, call, last_tool_result, text};

/// A stand-in homeserver whose `!room:x` has `members`; every send lands.
async fn homeserver(members: &'static [&'static str]) -> FakeHs {
    homeserver_with_state(members, json!({})).await
}

/// The stand-in, answering the room's state with `state`.
async fn homeserver_with_state(members: &'static [&'static str], state: Value) -> FakeHs {
    FakeHs::start(move |r| {
        if r.path().ends_with("/state") {
            Reply::ok(state.clone())
        } else if r.path().ends_with("/joined_members") {
            let joined: serde_json::Map<String, Value> = members.iter().map(|m| ((*m).to_owned(), json!({}))).collect();
            Reply::ok(json!({"joined": joined}))
        } else if r.path().contains("/send/") {
            Reply::ok(json!({"event_id": format!("$sent{}", r.path().rsplit('.').next().unwrap_or("0"))}))
        } else {
            Reply::ok(json!({}))
        }
    })
    .await
}

const DM: &[&str] = &["@alice:x", "@richbot:x"];
const GROUP: &[&str] = &["@alice:x", "@bob:x", "@richbot:x"];

fn weather() -> Value {
    json!({"payload": {"v": 1, "blocks": [{"type": "weather", "location": "Lisbon", "temp": 21}]}, "fallback": "Lisbon 21 °C"})
}

#[tokio::test]
async fn a_batch_with_two_askers_runs_one_turn_for_each_in_order() {
    let hs = homeserver(GROUP).await;
    let llm = FakeLlm::start().await;
    llm.respond_with(|_| text("ok"));
    let bot = Bot::start(&hs.url, &llm.base_url, "").await;
    bot.push("1", vec![invite()]).await;
    bot.push("2", vec![message("$a", "@alice:x", "Richbot, send it to my DM"), message("$b", "@bob:x", "Richbot, hi")])
        .await;
    let turns = bot.finished_turns(2).await;
    assert_eq!(turns.len(), 2, "{turns:?}");
    let askers: Vec<String> = llm
        .requests()
        .iter()
        .map(|r| {
            r["messages"].as_array().into_iter().flatten().filter_map(|m| m["content"].as_str()).collect::<String>()
        })
        .map(|told| told.split("Asked by: ").nth(1).unwrap_or_default().split('.').next().unwrap_or("").to_owned())
        .collect();
    assert_eq!(askers, ["@alice:x", "@bob:x"], "each turn is its asker's");
    bot.stop().await;
}

#[tokio::test]
async fn reply_and_thread_targets_must_be_events_of_the_room_written_in() {
    let hs = homeserver(DM).await;
    let llm = FakeLlm::start().await;
    let with = |key: &str, id: &str| {
        let mut args = weather();
        args[key] = json!(id);
        call("rich_send", args)
    };
    llm.script([
        with("reply_to", "$elsewhere"),
        with("thread", "$other-room"),
        with("reply_to", "$q"),
        text("[no reply]"),
    ]);
    let bot = Bot::start(&hs.url, &llm.base_url, "").await;
    bot.push("1", vec![invite()]).await;
    bot.push("2", vec![message("$q", "@alice:x", "weather?")]).await;
    bot.finished_turns(1).await;
    let requests = llm.requests();
    for (i, path) in [(1, "reply_to"), (2, "thread")] {
        let refused = last_tool_result(&requests[i]).expect("a tool result");
        assert_eq!((refused["code"].as_str(), refused["path"].as_str()), (Some("invalid_arguments"), Some(path)));
    }
    assert!(last_tool_result(&requests[3]).expect("result")["event_id"].is_string(), "a reply to $q lands");
    let sent = hs.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["m.relates_to"]["m.in_reply_to"]["event_id"], "$q");
    bot.stop().await;
}

#[tokio::test]
async fn questions_delivered_after_an_outage_get_one_notice_per_outage_and_no_answer() {
    let hs = homeserver(DM).await;
    let llm = FakeLlm::start().await;
    llm.respond_with(|_| text("fresh answer"));
    let bot = Bot::start(&hs.url, &llm.base_url, "").await;
    bot.push("1", vec![invite()]).await;
    let late = |id: &str| {
        let mut m = message(id, "@alice:x", "are you there?");
        m["origin_server_ts"] = json!(richbot::clock::now_ms() - 10 * 60 * 1000);
        m
    };
    bot.push("2", vec![late("$late1")]).await;
    bot.finished_turns(1).await;
    bot.push("3", vec![late("$late2")]).await;
    bot.push("4", vec![message("$fresh", "@alice:x", "hello again")]).await;
    let turns = bot.finished_turns(2).await;
    assert_eq!(turns.iter().map(|t| t.0.as_str()).collect::<Vec<_>>(), ["away", "answered"]);
    let sent = hs.sent();
    assert_eq!(sent.len(), 2, "one notice for the outage, one answer: {sent:?}");
    assert_eq!((sent[0]["msgtype"].as_str(), sent[1]["msgtype"].as_str()), (Some("m.notice"), Some("m.text")));
    assert!(sent[0]["body"].as_str().is_some_and(|b| b.contains("ask again")));
    assert_eq!(llm.requests().len(), 1, "late questions never reach the model");
    let late2 = bot.store.event(ruma::event_id!("$late2")).await.expect("query").expect("stored");
    assert!(late2.processed, "a late question is done with, not queued");
    bot.stop().await;
}

#[tokio::test]
async fn tool_calls_per_reply_and_writes_per_turn_are_capped() {
    let hs = homeserver(DM).await;
    let llm = FakeLlm::start().await;
    // Distinct calls (the same call repeated in a reply runs once: e2e_model_output).
    let calls = |n: i32| -> Vec<(String, String)> {
        (0..n)
            .map(|i| {
                let mut w = weather();
                w["payload"]["blocks"][0]["temp"] = json!(i);
                ("rich_send".to_owned(), w.to_string())
            })
            .collect()
    };
    let forty = Step::Calls(calls(40));
    llm.script([forty, text("[no reply]")]);
    let bot = Bot::start(&hs.url, &llm.base_url, "").await;
    bot.push("1", vec![invite()]).await;
    bot.push("2", vec![message("$q", "@alice:x", "forty please")]).await;
    bot.finished_turns(1).await;
    assert_eq!(hs.sent().len(), 8, "tool_calls_per_round = 8 by default");
    let results: Vec<Value> = llm.requests()[1]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| serde_json::from_str(m["content"].as_str().unwrap_or("{}")).expect("json"))
        .collect();
    assert_eq!(results.len(), 40, "every call gets a result");
    assert_eq!(results.iter().filter(|r| r["code"] == "limit_reached").count(), 32);
    bot.stop().await;

    let hs = homeserver(DM).await;
    let llm = FakeLlm::start().await;
    let five = Step::Calls(calls(5));
    llm.script([five.clone(), five, text("[no reply]")]);
    let bot = Bot::start(&hs.url, &llm.base_url, "[limits]\nwrites_per_turn = 3\n").await;
    bot.push("1", vec![invite()]).await;
    bot.push("2", vec![message("$q", "@alice:x", "ten please")]).await;
    bot.finished_turns(1).await;
    assert_eq!(hs.sent().len(), 3, "writes_per_turn across the turn's rounds");
    bot.stop().await;
}

#[tokio::test]
async fn a_turn_past_its_deadline_ends_with_a_notice() {
    let hs = homeserver(DM).await;
    let llm = FakeLlm::start().await;
    llm.script([Step::Delay(Duration::from_secs(30), Box::new(text("too late")))]);
    let bot = Bot::start(&hs.url, &llm.base_url, "[limits]\nturn_deadline_secs = 1\n").await;
    bot.push("1", vec![invite()]).await;
    bot.push("2", vec![message("$q", "@alice:x", "a slow one")]).await;
    let turns = bot.finished_turns(1).await;
    assert_eq!(turns[0].0, "deadline");
    let sent = hs.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["msgtype"], "m.notice");
    bot.stop().await;
}

#[tokio::test]
async fn an_llm_asking_to_retry_after_an_hour_fails_the_call_within_its_bound() {
    let hs = homeserver(DM).await;
    let llm = FakeLlm::start().await;
    llm.script([Step::RetryAfter(3600)]);
    let bot = Bot::start(&hs.url, &llm.base_url, "").await;
    bot.push("1", vec![invite()]).await;
    let asked = Instant::now();
    bot.push("2", vec![message("$q", "@alice:x", "hello")]).await;
    let turns = bot.finished_turns(1).await;
    // llm.timeout_secs = 2 here: 4 attempts of 2 s at most, plus 2 s of waiting between them.
    assert!(asked.elapsed() < Duration::from_secs(15), "{:?}", asked.elapsed());
    assert!(turns[0].0.starts_with("llm_failed"), "{}", turns[0].0);
    assert_eq!(hs.sent()[0]["msgtype"], "m.notice", "the person is told, as a notice");
    bot.stop().await;
}

#[tokio::test]
async fn an_answer_undelivered_by_the_deadline_is_told_once_the_homeserver_is_back() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let down = Arc::new(AtomicBool::new(false));
    let hs = {
        let down = down.clone();
        FakeHs::start(move |r| {
            if r.path().ends_with("/joined_members") {
                Reply::ok(json!({"joined": {"@alice:x": {}, "@richbot:x": {}}}))
            } else if r.path().ends_with("/messages") {
                Reply::ok(json!({"chunk": []}))
            } else if down.load(Ordering::SeqCst) {
                Reply::unavailable(502)
            } else if r.path().contains("/send/") {
                Reply::ok(json!({"event_id": "$told"}))
            } else {
                Reply::ok(json!({}))
            }
        })
        .await
    };
    let llm = FakeLlm::start().await;
    llm.respond_with(|_| text("An answer that will not arrive."));
    let bot = Bot::start(&hs.url, &llm.base_url, "[bot]\ndelivery_deadline_secs = 1\n").await;
    bot.push("1", vec![invite()]).await;
    crate::support::eventually("the invite is handled", Duration::from_secs(20), || async {
        bot.store.event(ruma::event_id!("$invite")).await.expect("query").filter(|e| e.processed)
    })
    .await;
    down.store(true, Ordering::SeqCst);
    bot.push("2", vec![message("$q", "@alice:x", "hello")]).await;
    // Down well past the deadline: the turn is retried, then gives the answer up.
    crate::support::eventually("the answer is given up", Duration::from_secs(40), || async {
        let store = &bot.store;
        let running = store.unfinished_turn(ruma::room_id!("!room:x")).await.expect("query");
        running.filter(|(t, _)| t.notice.is_some()).map(|_| ())
    })
    .await;
    down.store(false, Ordering::SeqCst);
    let turns = bot.finished_turns(1).await;
    assert_eq!(turns[0].0, "undelivered");
    let sent = hs.sent();
    let told = sent.last().expect("a notice was sent");
    assert_eq!(told["msgtype"], "m.notice");
    assert!(told["body"].as_str().is_some_and(|b| b.contains("I lost an answer")), "{told}");
    let lost: std::collections::HashSet<&str> = sent
        .iter()
        .filter(|c| c["body"].as_str().is_some_and(|b| b.contains("I lost an answer")))
        .filter_map(|c| c["org.richbot.write"].as_str())
        .collect();
    assert_eq!(lost.len(), 1, "one notice (every attempt under one write id)");
    assert_eq!(llm.requests().len(), 1, "the model was asked once");
    bot.stop().await;
}

/// A bot in the DM on `hs`, told Alice's password (`$pw`) in its first turn.
async fn told_a_password(hs: &str) -> (FakeLlm, Bot) {
    let llm = FakeLlm::start().await;
    llm.respond_with(|_| text("noted"));
    let bot = Bot::start(hs, &llm.base_url, "").await;
    bot.push("1", vec![invite()]).await;
    bot.push("2", vec![message("$pw", "@alice:x", "my password is hunter2")]).await;
    bot.finished_turns(1).await;
    (llm, bot)
}

/// `sender`'s redaction `id` of the password message.
fn redaction(id: &str, sender: &str) -> Value {
    json!({"event_id": id, "room_id": "!room:x", "sender": sender, "type": "m.room.redaction", "redacts": "$pw",
           "origin_server_ts": richbot::clock::now_ms(), "content": {"redacts": "$pw"}})
}

#[tokio::test]
async fn a_redacted_message_never_reaches_a_later_prompt() {
    let hs = homeserver(DM).await;
    let (llm, bot) = told_a_password(&hs.url).await;
    bot.push("3", vec![redaction("$red", "@alice:x"), message("$q", "@alice:x", "what did I tell you?")]).await;
    bot.finished_turns(2).await;
    let last = llm.requests().last().expect("a request").to_string();
    assert!(!last.contains("hunter2"), "{last}");
    assert!(llm.requests()[0].to_string().contains("hunter2"), "it was there before the redaction");
    bot.stop().await;
}

#[tokio::test]
async fn a_redaction_applies_only_from_the_sender_or_a_member_with_the_power_to_redact() {
    let state = json!([
        {"type": "m.room.create", "state_key": "", "sender": "@alice:x", "content": {"room_version": "10"}},
        {"type": "m.room.power_levels", "state_key": "", "sender": "@alice:x",
         "content": {"users": {"@alice:x": 100, "@mod:x": 50}, "users_default": 0, "redact": 50}},
    ]);
    let hs = homeserver_with_state(DM, state).await;
    let (llm, bot) = told_a_password(&hs.url).await;
    // Someone on another server, without the power to redact (a homeserver passes any
    // redaction on): not applied.
    bot.push("3", vec![redaction("$r1", "@eve:remote.example"), message("$q1", "@alice:x", "what did I say?")]).await;
    bot.finished_turns(2).await;
    let last = llm.requests().last().expect("a request").to_string();
    assert!(last.contains("hunter2"), "Eve could not erase Alice's message: {last}");
    // A moderator's (power 50, the room's redact level): applied.
    bot.push("4", vec![redaction("$r2", "@mod:x"), message("$q2", "@alice:x", "and now?")]).await;
    bot.finished_turns(3).await;
    let last = llm.requests().last().expect("a request").to_string();
    assert!(!last.contains("hunter2"), "{last}");
    bot.stop().await;
}
