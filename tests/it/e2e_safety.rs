//! What a hostile member or another bot tries, against a real Synapse: editing outside the
//! asker's rooms, a bot loop, flooding one room while another waits, a spent budget across
//! a restart, triggers from another room, and a huge room name in the prompt.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::llm::{Step, call, last_tool_result, text};
use crate::support::{BOT, Env, Options, eventually, room_id};

fn details(body: &str) -> Value {
    json!({"v": 1, "blocks": [{"type": "details", "summary": "s", "body": body}]})
}

fn with_limits(toml: &str) -> Options {
    Options { extra_toml: toml.to_owned(), ..Default::default() }
}

/// `sender`'s messages of `msgtype` in `room` (not counting edits), as `viewer` sees them.
async fn of_type(viewer: &crate::support::User, room: &str, sender: &str, msgtype: &str) -> Vec<Value> {
    let messages = viewer.messages_from(room, sender).await.into_iter();
    messages
        .filter(|m| m["content"]["msgtype"] == msgtype && m["content"]["m.relates_to"]["rel_type"] != "m.replace")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rich_edit_cannot_reach_a_message_in_a_room_the_asker_is_not_in() {
    let env = Env::start().await;
    let bob_dm = env.bob.create_room(&[BOT], true).await;
    env.wait_joined_seen_by(&env.bob, &bob_dm, BOT).await;
    env.llm.script([
        call("rich_send", json!({"payload": details("for bob"), "fallback": "For Bob only."})),
        text("[no reply]"),
    ]);
    env.bob.say(&bob_dm, "note this for me").await;
    env.wait_turns(&bob_dm, 1).await;
    let bobs = env.bob.messages_from(&bob_dm, BOT).await;
    let target = bobs[0]["event_id"].as_str().expect("id").to_owned();

    let edit = json!({"event_id": target, "payload": details("hijacked"), "fallback": "Hijacked."});
    env.llm.script([call("rich_edit", edit), text("[no reply]")]);
    let dm = env.dm().await;
    env.alice.say(&dm, "edit your last message").await;
    env.wait_turns(&dm, 1).await;
    let refused = last_tool_result(&env.llm.requests()[3]).expect("a tool result");
    assert_eq!((refused["code"].as_str(), refused["path"].as_str()), (Some("room_not_allowed"), Some("event_id")));
    let after = env.bob.messages_from(&bob_dm, BOT).await;
    assert!(after.iter().all(|m| m["content"]["m.relates_to"]["rel_type"] != "m.replace"), "{after:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_echo_bot_in_a_dm_gets_at_most_the_bucket_and_one_notice() {
    let env = Env::start_with(with_limits("[limits]\nturns_per_room_per_minute = 3\n")).await;
    // Each answer its own words: the same words to another message go back to the model
    // as a repeat, which would spend requests this test counts.
    let answered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    env.llm.respond_with(move |_| text(&format!("Answer {} worth echoing.", answered.fetch_add(1, Ordering::Relaxed))));
    let dm = env.dm().await;
    // Alice's client plays an echo bot: whatever the persona posts, it posts back as text.
    let stop = Arc::new(AtomicBool::new(false));
    let echo = {
        let (alice, dm, stop) = (env.alice.clone(), dm.clone(), stop.clone());
        tokio::spawn(async move {
            let mut echoed = 0;
            for _ in 0..300 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let posts = alice.messages_from(&dm, BOT).await;
                for post in &posts[echoed.min(posts.len())..] {
                    alice.say(&dm, &format!("echo: {}", post["content"]["body"].as_str().unwrap_or(""))).await;
                }
                echoed = posts.len();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    env.alice.say(&dm, "hello, bot").await;
    let notice = eventually("the cool-down notice", Duration::from_secs(30), || async {
        of_type(&env.alice, &dm, BOT, "m.notice").await.into_iter().next()
    })
    .await;
    assert!(notice["content"]["body"].as_str().is_some_and(|b| b.contains("pausing")), "{notice}");
    // The echo of the notice arrives and is handled (not answered) before we count.
    let store = env.store().await;
    eventually("the echo of the notice is handled", Duration::from_secs(30), || async {
        let events = store.room_events(&room_id(&dm)).await.expect("events");
        let echoed = events
            .iter()
            .any(|e| e.content()["body"].as_str().is_some_and(|b| b.starts_with("echo: ") && b.contains("pausing")));
        (echoed && events.iter().all(|e| e.processed)).then_some(())
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    echo.await.expect("echo bot");
    assert!(env.llm.requests().len() <= 3, "at most the bucket: {}", env.llm.requests().len());
    assert!(of_type(&env.alice, &dm, BOT, "m.text").await.len() <= 3);
    assert_eq!(of_type(&env.alice, &dm, BOT, "m.notice").await.len(), 1, "one notice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooded_room_delays_another_rooms_question_by_at_most_one_turn() {
    let limits =
        "[bot]\nmax_parallel_rooms = 1\n[limits]\nturns_per_room_per_minute = 1000\nturns_per_user_per_minute = 1000\n";
    let env = Env::start_with(with_limits(limits)).await;
    env.llm.respond_with(|_| Step::Delay(Duration::from_millis(400), Box::new(text("ok"))));
    let flooded = env.alice.create_room(&[BOT, "@bob:localhost"], false).await;
    env.wait_joined(&flooded, BOT).await;
    env.bob.join(&flooded).await;
    let bob_dm = env.bob.create_room(&[BOT], true).await;
    env.wait_joined_seen_by(&env.bob, &bob_dm, BOT).await;
    let stop = Arc::new(AtomicBool::new(false));
    let flood = {
        let (alice, bob, room, stop) = (env.alice.clone(), env.bob.clone(), flooded.clone(), stop.clone());
        tokio::spawn(async move {
            for i in 0..100 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let who = if i % 2 == 0 { &alice } else { &bob };
                who.say(&room, &format!("Richbot, one more ({i})")).await;
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
        })
    };
    eventually("the flood keeps the bot busy", Duration::from_secs(30), || async {
        (env.llm.requests().len() >= 2).then_some(())
    })
    .await;
    let before = env.llm.requests().len();
    env.bob.say(&bob_dm, "a quick question").await;
    let answered_at = eventually("bob's DM question reaches the model", Duration::from_secs(30), || async {
        env.llm
            .requests()
            .iter()
            // Where a turn is, is in its note, at the start of the newest message.
            .position(|r| {
                let newest = r["messages"].as_array().and_then(|m| m.last()).and_then(|m| m["content"].as_str());
                newest.is_some_and(|s| s.contains("a direct chat with @bob"))
            })
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    flood.await.expect("flood");
    assert!(answered_at <= before + 1, "waited {} flooded turn(s)", answered_at.saturating_sub(before));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_user_budget_gives_one_notice_and_no_llm_call_even_after_a_restart() {
    let mut env = Env::start_with(with_limits("[limits]\ntokens_per_user_per_day = 10000\n")).await;
    env.llm.set_usage(9_000, 0);
    env.llm.respond_with(|_| text("Here you go."));
    let dm = env.dm().await;
    env.alice.say(&dm, "first question").await;
    env.wait_turns(&dm, 1).await;
    env.alice.say(&dm, "second question").await;
    env.wait_turns(&dm, 2).await;
    env.alice.say(&dm, "third question").await;
    let turns = env.wait_turns(&dm, 3).await;
    assert_eq!(
        turns.iter().map(|t| t.0.as_str()).collect::<Vec<_>>(),
        ["answered", "budget_spent: user", "budget_spent: user"]
    );
    env.bot.stop().await;
    env.start_bot_again().await;
    env.alice.say(&dm, "after the restart").await;
    let turns = env.wait_turns(&dm, 4).await;
    assert_eq!(turns[3].0, "budget_spent: user", "the budget survives a restart");
    assert_eq!(env.llm.requests().len(), 1, "a spent budget never calls the LLM");
    let notices = of_type(&env.alice, &dm, BOT, "m.notice").await;
    assert_eq!(notices.len(), 1, "one notice: {notices:#?}");
    assert!(
        notices[0]["content"]["body"].as_str().is_some_and(|b| b.contains("your daily allowance (10000 tokens a day)"))
    );
    env.alice.say(&dm, "!usage").await;
    let usage = eventually("the usage notice", Duration::from_secs(30), || async {
        let n = of_type(&env.alice, &dm, BOT, "m.notice").await;
        (n.len() == 2).then(|| n[1]["content"]["body"].as_str().unwrap_or("").to_owned())
    })
    .await;
    assert!(usage.contains("9000 tokens") && usage.contains("10000 tokens a day"), "{usage}");
    assert!(usage.contains("in 1 turn(s)"), "only the turn that asked the model counts: {usage}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_prompt_tokens_count_at_their_weight_and_usage_tells_them_apart() {
    let toml = "[limits]\ntokens_per_user_per_day = 10000\n\n[budget]\ncached_token_weight = 0.1\n";
    let env = Env::start_with(with_limits(toml)).await;
    // Each call: 1,000 fresh + 8,000 cached at 0.1 + 100 completion = 1,900 tokens. At the
    // full weight the first would leave no room for the second.
    env.llm.set_usage_cached(9_000, 100, 8_000);
    env.llm.respond_with(|_| text("Here you go."));
    let dm = env.dm().await;
    env.alice.say(&dm, "first question").await;
    env.wait_turns(&dm, 1).await;
    env.alice.say(&dm, "second question").await;
    let turns = env.wait_turns(&dm, 2).await;
    assert_eq!(turns.iter().map(|t| t.0.as_str()).collect::<Vec<_>>(), ["answered", "answered"], "{turns:?}");
    env.alice.say(&dm, "!usage").await;
    let usage = eventually("the usage notice", Duration::from_secs(30), || async {
        let n = of_type(&env.alice, &dm, BOT, "m.notice").await;
        n.first().map(|n| n["content"]["body"].as_str().unwrap_or("").to_owned())
    })
    .await;
    assert!(usage.contains("you used 3800 tokens in 2 turn(s)"), "{usage}");
    assert!(
        usage.contains(
            "Of the 18000 prompt tokens, 16000 were reused from the model server's cache and 2000 read afresh"
        ),
        "{usage}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_reactions_and_button_clicks_count_only_in_the_room_of_the_message() {
    let env = Env::start().await;
    let a = env.alice.create_room(&[BOT, "@bob:localhost"], false).await;
    env.wait_joined(&a, BOT).await;
    env.bob.join(&a).await;
    let buttons = json!({"v": 1, "blocks": [{"type": "buttons", "buttons": [
        {"label": "Yes", "action": {"type": "react", "key": "✅"}},
        {"label": "More", "action": {"type": "send", "body": "more please"}, "id": "more"}]}]});
    env.llm.script([
        call("rich_send", json!({"payload": buttons, "fallback": "Yes? React ✅. More? Say more."})),
        text("[no reply]"),
    ]);
    env.alice.say(&a, "Richbot, ask me something").await;
    env.wait_turns(&a, 1).await;
    let asked = env.wait_messages(&a, BOT, 1).await[0]["event_id"].as_str().expect("id").to_owned();

    let b = env.alice.create_room(&[BOT, "@bob:localhost"], false).await;
    env.wait_joined(&b, BOT).await;
    env.bob.join(&b).await;
    let reply = json!({"msgtype": "m.text", "body": "yes", "m.relates_to": {"m.in_reply_to": {"event_id": asked}}});
    env.alice.send(&b, "m.room.message", reply).await;
    let forged = json!({"msgtype": "m.text", "body": "more please", "com.ianm.mtrix.used": {"id": "more"}});
    env.alice.send(&b, "m.room.message", forged).await;
    // Synapse may refuse a reaction to another room's event; if it takes it, it is nothing.
    let reaction = json!({"m.relates_to": {"rel_type": "m.annotation", "event_id": asked, "key": "✅"}});
    let _ = env
        .alice
        .call(
            reqwest::Method::PUT,
            &format!("/_matrix/client/v3/rooms/{}/send/m.reaction/r1", crate::support::enc(&b)),
            Some(reaction),
        )
        .await;
    env.llm.script([text("pong")]);
    env.alice.say(&b, "Richbot, ping").await;
    env.wait_turns(&b, 1).await;
    let requests = env.llm.requests();
    assert_eq!(requests.len(), 3, "only the mention in room B started a turn");
    let last = requests[2]["messages"].as_array().expect("messages").last().expect("one").clone();
    assert!(last["content"].as_str().is_some_and(|c| c.ends_with("Richbot, ping")), "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_room_name_never_reaches_the_prompt_whole() {
    let env = Env::start().await;
    let dm = env.dm().await;
    let name = "N".repeat(20_000);
    let big = env.alice.create_room_with(json!({"invite": [BOT], "name": name, "preset": "private_chat"})).await;
    env.wait_joined(&big, BOT).await;
    env.llm.script([text("[no reply]")]);
    env.alice.say(&dm, "where can you post?").await;
    env.wait_turns(&dm, 1).await;
    let request = env.llm.requests()[0].to_string();
    // The rooms `room` may name are in the turn's note (the tools are the same everywhere).
    let messages = env.llm.requests()[0]["messages"].clone();
    let note = messages.as_array().and_then(|m| m.last()).and_then(|m| m["content"].as_str()).expect("the note");
    assert!(note.contains(&big), "the shared room is offered: {note}");
    assert!(note.contains(&format!("named \"{}…\"", "N".repeat(80))), "cut and quoted: {note}");
    assert!(!request.contains(&"N".repeat(81)), "never whole");
}
