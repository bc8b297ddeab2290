//! The LLM turn against a real Synapse and the scripted LLM: rich posting, triggers, tool
//! errors the model fixes, edit pacing and ownership, parallel rooms, crash safety and
//! button presses.

use std::time::{Duration, Instant};

use crate::support::llm::{Step, call, last_tool_result, text};
use crate::support::{BOT, Env, eventually};
use serde_json::{Value, json};

fn weather(temp: Value) -> Value {
    json!({"payload": {"v": 1, "blocks": [{"type": "weather", "location": "Lisbon", "temp": temp, "unit": "C", "condition": "Sunny"}]},
           "fallback": "**Lisbon**: 21.5 °C and <b>sunny</b> <script>x</script>"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dm_weather_is_one_rich_message_with_the_float_as_a_decimal_string() {
    let env = Env::start().await;
    env.llm.script([call("rich_send", weather(json!(21.5))), text("[no reply]")]);
    let room = env.dm().await;
    env.alice.say(&room, "weather in Lisbon?").await;
    env.wait_turns(&room, 1).await;

    let msgs = env.alice.messages_from(&room, BOT).await;
    assert_eq!(msgs.len(), 1, "{msgs:#?}");
    let content = &msgs[0]["content"];
    assert_eq!(content["com.ianm.mtrix"]["blocks"][0]["temp"], json!("21.5"));
    assert_eq!(content["body"], "Lisbon: 21.5 °C and sunny x", "plain text, no markup");
    let html = content["formatted_body"].as_str().expect("html");
    assert!(html.contains("<strong>Lisbon</strong>") && !html.contains("<script"), "{html}");
    assert_eq!(content["m.mentions"], json!({}));

    let requests = env.llm.requests();
    assert_eq!(requests.len(), 2);
    let tools: Vec<&str> =
        requests[0]["tools"].as_array().expect("tools").iter().filter_map(|t| t["function"]["name"].as_str()).collect();
    assert_eq!(tools, ["rich_send", "rich_edit", "rich_poll", "rich_poll_end", "schedule", "schedules", "unschedule"]);
    let system = requests[0]["messages"][0]["content"].as_str().expect("system");
    assert!(
        system.starts_with("You are Richbot.") && system.contains("rich_send") && !system.contains("@alice:localhost"),
        "{system}"
    );
    let last_user = requests[0]["messages"].as_array().expect("messages").last().expect("one").clone();
    let last_user = last_user["content"].as_str().expect("text");
    assert!(last_user.ends_with("weather in Lisbon?"), "{last_user}");
    assert!(last_user.starts_with("[Now: ") && last_user.contains("Asked by: @alice:localhost."), "{last_user}");
    assert!(last_user.contains("In: a direct chat with @alice:localhost."), "where, in the note: {last_user}");
    assert!(
        !system.contains("[Now: 2") && !system.contains("Asked by: @"),
        "the system prompt is the same every turn: {system}"
    );
    assert_eq!(last_tool_result(&requests[1]).expect("result")["event_id"], msgs[0]["event_id"]);
    let turns = env.wait_turns(&room, 1).await;
    assert_eq!(turns[0], ("no_reply".to_owned(), 2, 200, 40), "outcome, rounds and token usage recorded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_room_answers_only_when_mentioned() {
    let env = Env::start().await;
    env.llm.respond_with(|_| text("Hello! I'm here."));
    let room = env.alice.create_room(&[BOT, "@bob:localhost"], false).await;
    env.wait_joined(&room, BOT).await;
    env.bob.join(&room).await;
    env.alice.say(&room, "hi bob, lunch?").await;
    env.alice.say(&room, "Richbot, are you there?").await;
    let msgs = env.wait_messages(&room, BOT, 1).await;
    assert_eq!(msgs[0]["content"]["body"], "Hello! I'm here.");
    env.wait_turns(&room, 1).await;
    assert_eq!(env.llm.requests().len(), 1, "the unaddressed message started no turn");
    assert_eq!(env.alice.messages_from(&room, BOT).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_payload_comes_back_with_its_path_and_the_fix_is_the_only_message() {
    let env = Env::start().await;
    let broken =
        json!({"payload": {"v": 1, "blocks": [{"type": "weather", "location": "Lisbon"}]}, "fallback": "Lisbon"});
    env.llm.script([
        Step::Calls(vec![("rich_send".into(), "{not json".into())]),
        call("rich_send", broken),
        call("rich_send", weather(json!("21.5"))),
        text("[no reply]"),
    ]);
    let room = env.dm().await;
    env.alice.say(&room, "weather?").await;
    env.wait_turns(&room, 1).await;
    let requests = env.llm.requests();
    let first = last_tool_result(&requests[1]).expect("error result");
    assert_eq!(first["code"], "invalid_arguments");
    let second = last_tool_result(&requests[2]).expect("error result");
    assert_eq!(second["code"], "invalid_payload");
    assert_eq!(second["path"], "payload.blocks[0]");
    assert_eq!(second["error"], "blocks[0] (weather): missing required field \"temp\"");
    let msgs = env.alice.messages_from(&room, BOT).await;
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0]["content"]["com.ianm.mtrix"]["blocks"][0]["temp"], "21.5");
    let metrics = env.metrics().await;
    for line in [
        "richbot_tool_calls_total{tool=\"rich_send\",result=\"invalid_arguments\"} 1",
        "richbot_tool_calls_total{tool=\"rich_send\",result=\"invalid_payload\"} 1",
        "richbot_tool_calls_total{tool=\"rich_send\",result=\"ok\"} 1",
        "richbot_turns_total{outcome=\"no_reply\"} 1",
        "richbot_llm_requests_total 4",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_edits_in_one_round_land_in_order_at_least_2500_ms_apart() {
    let env = Env::start().await;
    let tracker = |state: &str| json!({"v": 1, "blocks": [{"type": "tracker", "title": "Parcel", "state": state}]});
    env.llm.script([call("rich_send", json!({"payload": tracker("packed"), "fallback": "Parcel: packed"}))]);
    env.llm.respond_with(move |req| {
        let sent = last_tool_result(req).and_then(|r| r["event_id"].as_str().map(str::to_owned));
        match (req["messages"].as_array().map(Vec::len), sent) {
            (Some(n), Some(id)) if n <= 4 => Step::Calls(vec![
                (
                    "rich_edit".into(),
                    json!({"event_id": id, "payload": tracker("shipped"), "fallback": "Parcel: shipped"}).to_string(),
                ),
                (
                    "rich_edit".into(),
                    json!({"event_id": id, "payload": tracker("done"), "fallback": "Parcel: done"}).to_string(),
                ),
            ]),
            _ => text("[no reply]"),
        }
    });
    let room = env.dm().await;
    env.alice.say(&room, "track my parcel").await;
    env.wait_turns(&room, 1).await;
    let msgs = env.alice.messages_from(&room, BOT).await;
    assert_eq!(msgs.len(), 3, "{msgs:#?}");
    let original = msgs[0]["event_id"].clone();
    let ts: Vec<i64> = msgs.iter().map(|m| m["origin_server_ts"].as_i64().expect("ts")).collect();
    assert_eq!(msgs[1]["content"]["m.relates_to"]["event_id"], original);
    assert_eq!(msgs[2]["content"]["m.relates_to"]["event_id"], original);
    assert_eq!(msgs[1]["content"]["m.new_content"]["com.ianm.mtrix"]["blocks"][0]["state"], "shipped");
    assert_eq!(msgs[2]["content"]["m.new_content"]["com.ianm.mtrix"]["blocks"][0]["state"], "done");
    assert!(ts[1] - ts[0] >= 2500 && ts[2] - ts[1] >= 2500, "timestamps {ts:?}");
    let results = env.llm.requests();
    let waited = results.last().and_then(last_tool_result).expect("edit result");
    assert!(waited["waited_ms"].as_u64().expect("waited") > 0, "{waited}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_a_users_message_is_refused_as_not_owner() {
    let env = Env::start().await;
    let room = env.dm().await;
    let theirs = env.alice.say(&room, "my own message").await;
    env.wait_turns(&room, 1).await; // that message was a turn too ([no reply])
    env.llm.script([
        call("rich_edit", json!({"event_id": theirs, "payload": {"v": 1, "blocks": [{"type": "details", "summary": "s", "body": "b"}]}, "fallback": "hacked"})),
        text("[no reply]"),
    ]);
    env.alice.say(&room, "please edit my message").await;
    env.wait_turns(&room, 2).await;
    let result = env.llm.requests().last().and_then(last_tool_result).expect("tool result");
    assert_eq!(result["code"], "not_owner");
    assert!(env.alice.messages_from(&room, BOT).await.is_empty(), "nothing posted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rooms_run_in_parallel_and_mid_turn_messages_form_the_next_turn() {
    let env = Env::start().await;
    env.llm.respond_with(|req| {
        let last = req["messages"]
            .as_array()
            .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
            .and_then(|m| m["content"].as_str())
            .unwrap_or("")
            .to_owned();
        Step::Delay(
            Duration::from_secs(2),
            Box::new(Step::Text(format!("answer to: {}", last.rsplit(": ").next().unwrap_or("")))),
        )
    });
    let a = env.dm().await;
    let b = env.bob.create_room(&[BOT], true).await;
    env.wait_joined_seen_by(&env.bob, &b, BOT).await;

    let start = Instant::now();
    env.alice.say(&a, "question A").await;
    env.bob.say(&b, "question B").await;
    env.wait_messages(&a, BOT, 1).await;
    let bob = env.bob.clone();
    let bb = b.clone();
    eventually("room B answered", Duration::from_secs(10), || {
        let bob = bob.clone();
        let bb = bb.clone();
        async move { (!bob.messages_from(&bb, BOT).await.is_empty()).then_some(()) }
    })
    .await;
    let both = start.elapsed();
    eprintln!("two rooms, 2 s LLM each: both answered after {both:?}");
    // Parallel, told by overlap rather than by the clock (a loaded machine is slow): the
    // two rooms' model calls, 2 s each, were in flight at once.
    assert_eq!(env.llm.most_at_once(), 2, "the two rooms' turns ran one after the other ({both:?})");

    // Two messages while a turn runs: answered by the next turn, in order.
    env.alice.say(&a, "first").await;
    eventually("the turn for 'first' started", Duration::from_secs(10), || async {
        env.llm.requests().iter().any(|r| r.to_string().contains("first")).then_some(())
    })
    .await;
    env.alice.say(&a, "second").await;
    env.alice.say(&a, "third").await;
    let msgs = env.wait_messages(&a, BOT, 3).await;
    assert_eq!(msgs[1]["content"]["body"], "answer to: first");
    assert_eq!(msgs[2]["content"]["body"], "answer to: third");
    let last = env.llm.requests().last().cloned().expect("request");
    let convo: Vec<String> = last["messages"]
        .as_array()
        .expect("m")
        .iter()
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect();
    let pos = |s: &str| convo.iter().position(|c| c.ends_with(s)).unwrap_or_else(|| panic!("{s} in {convo:?}"));
    assert!(pos(": second") < pos(": third"), "both mid-turn messages, in order, in one turn");
    // The answer to "first", posted after "second" and "third" arrived, is in that turn's
    // prompt: the model knows it already answered "first".
    let answered_first =
        last["messages"].as_array().expect("m").iter().any(|m| {
            m["role"] == "assistant" && m["content"].as_str().is_some_and(|c| c.starts_with("answer to: first"))
        });
    assert!(answered_first, "the persona's earlier answer is in the next turn's prompt: {convo:?}");
    assert_eq!(env.alice.messages_from(&a, BOT).await.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_react_button_press_reaches_the_model_as_a_button_press() {
    let env = Env::start().await;
    let buttons = json!({"payload": {"v": 1, "blocks": [{"type": "buttons", "buttons": [{"label": "Yes", "action": {"type": "react", "key": "✅"}}]}]}, "fallback": "Shall I book it? React ✅ for yes."});
    env.llm.script([call("rich_send", buttons), text("[no reply]"), text("Booked!")]);
    let room = env.dm().await;
    env.alice.say(&room, "find me a table").await;
    let msgs = env.wait_messages(&room, BOT, 1).await;
    let target = msgs[0]["event_id"].as_str().expect("id").to_owned();
    env.alice
        .send(
            &room,
            "m.reaction",
            json!({"m.relates_to": {"rel_type": "m.annotation", "event_id": target, "key": "✅"}}),
        )
        .await;
    let msgs = env.wait_messages(&room, BOT, 2).await;
    assert_eq!(msgs[1]["content"]["body"], "Booked!");
    let last = env.llm.requests().last().cloned().expect("request");
    let said = last["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .expect("text")
        .to_owned();
    let press = format!("]\n@alice:localhost pressed the button \"Yes\" (✅) on your message {target}.");
    assert!(said.ends_with(&press) && said.contains("Asked by: @alice:localhost."), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_llm_gets_one_honest_message() {
    let env = Env::start().await;
    env.llm.respond_with(|_| Step::Status(500));
    let room = env.dm().await;
    env.alice.say(&room, "hello?").await;
    let msgs = env.wait_messages(&room, BOT, 1).await;
    assert_eq!(msgs[0]["content"]["body"], richbot::strings::LLM_FAILED);
    let turns = env.wait_turns(&room, 1).await;
    assert!(turns[0].0.starts_with("llm_failed"), "{turns:?}");
    assert!(env.llm.requests().len() >= 2, "bounded retries happened");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_llm_that_never_answers_times_out_into_one_honest_message() {
    let env = Env::start_with(crate::support::Options { llm_timeout_secs: 1, ..Default::default() }).await;
    env.llm.respond_with(|_| Step::Hang);
    let room = env.dm().await;
    env.alice.say(&room, "are you there?").await;
    let msgs = env.wait_messages(&room, BOT, 1).await;
    assert_eq!(msgs[0]["content"]["body"], richbot::strings::LLM_FAILED);
    let turns = env.wait_turns(&room, 1).await;
    assert!(turns[0].0.starts_with("llm_failed"), "{turns:?}");
}
