//! What a member reads when the model misbehaves as ordinary local models do, from the
//! scripted model against a real Synapse: a tool call written as text is run as the call
//! (and never shown while it is typed), a block called as a tool is its rich message;
//! one that cannot be read, an empty answer, an answer with the prompt's annotations, a
//! copied tool result and a promise no tool kept are never posted as they are (the model is told
//! and asked again, then the member reads one honest sentence); silence in a DM is asked
//! about once; with `text_tool_calls = false` the model's text is posted as it wrote it.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::llm::{Step, call, text};
use crate::support::{BOT, Env, Options};

fn weather() -> Value {
    json!({"payload": {"v": 1, "blocks": [{"type": "weather", "location": "Porto", "temp": "14", "unit": "C", "condition": "Rain"}]},
           "fallback": "**Porto**: 14 °C, rain"})
}

/// Every body the persona posted in `room`: its messages and each of their edits, as
/// anyone could have read them at some moment.
async fn everything_shown(env: &Env, room: &str) -> Vec<String> {
    env.alice
        .messages_from(room, BOT)
        .await
        .iter()
        .map(|m| {
            let content = &m["content"];
            content.get("m.new_content").unwrap_or(content)["body"].as_str().unwrap_or_default().to_owned()
        })
        .collect()
}

/// The bodies members read now: each message's latest edit.
async fn final_bodies(env: &Env, room: &str) -> Vec<String> {
    let all = env.alice.messages_from(room, BOT).await;
    let edit_of = |m: &Value| m["content"]["m.relates_to"]["rel_type"] == "m.replace";
    all.iter()
        .filter(|m| !edit_of(m))
        .map(|m| {
            let id = &m["event_id"];
            let latest = all.iter().rev().find(|e| edit_of(e) && e["content"]["m.relates_to"]["event_id"] == *id);
            latest
                .map_or(&m["content"]["body"], |e| &e["content"]["m.new_content"]["body"])
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect()
}

/// The text the model was last sent as a member's (or richbot's correction).
fn last_user(request: &Value) -> String {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

fn pieces(text: &str) -> Step {
    let parts: Vec<String> = text.as_bytes().chunks(12).map(|c| String::from_utf8_lossy(c).into_owned()).collect();
    Step::Pieces(parts, Duration::from_millis(150))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_written_as_text_is_run_as_the_call_and_never_shown_while_it_is_typed() {
    let env = Env::start().await;
    let room = env.dm().await;
    let written = format!("```json\n{{\"name\": \"rich_send\", \"arguments\": {}}}\n```", weather());
    env.llm.script([pieces(&written), text("[no reply]")]);
    env.alice.say(&room, "weather in Porto?").await;
    assert_eq!(env.wait_turns(&room, 1).await[0].0, "no_reply");
    let shown = everything_shown(&env, &room).await;
    assert_eq!(shown, ["Porto: 14 °C, rain"], "the call ran; nothing of it was typed out: {shown:#?}");
    let posted = env.alice.messages_from(&room, BOT).await;
    assert!(posted[0]["content"].get("com.ianm.mtrix").is_some(), "a rich message");
    let second = &env.llm.requests()[1];
    let result = crate::support::llm::last_tool_result(second).expect("a tool result");
    assert_eq!(result["event_id"], posted[0]["event_id"], "the model hears the call's result");
    let metrics = env.metrics().await;
    assert!(metrics.lines().any(|l| l == "richbot_llm_written_calls_total 1"), "{metrics}");
}

/// Qwen2.5-Coder narrates what it writes ("Here's the payload you need:") and leaves out
/// the fallback: the payload is run as `rich_send` with the blocks' own rendering as its
/// fallback, the narration is never shown (live or posted) nor given back to the model,
/// the result says the message is out, and "No reply." after it is no reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_narrated_payload_without_a_fallback_is_its_rich_message_and_the_narration_is_never_shown() {
    let env = Env::start().await;
    let room = env.dm().await;
    let payload = weather()["payload"].to_string();
    let narrated = format!("Here's the payload you need:\n\n{payload}\n\nThis will send a rich message.");
    env.llm.script([pieces(&narrated), text("No reply.")]);
    env.alice.say(&room, "weather in Porto?").await;
    let outcome = env.wait_turns(&room, 1).await[0].0.clone();
    let shown = everything_shown(&env, &room).await;
    assert_eq!(outcome, "no_reply", "{shown:#?}");
    assert_eq!(shown.len(), 1, "the rich message alone: {shown:#?}");
    assert!(shown[0].contains("Porto") && shown[0].contains("14"), "the blocks' rendering: {shown:#?}");
    assert!(shown.iter().all(|b| !b.contains("payload") && !b.contains("No reply")), "{shown:#?}");
    let second = &env.llm.requests()[1];
    let result = crate::support::llm::last_tool_result(second).expect("a tool result");
    assert_eq!(result["posted"], richbot::strings::POSTED);
    assert!(!second["messages"].to_string().contains("Here's the payload"), "the narration is not replayed");
}

/// Qwen2.5-Coder reads `rich_send`'s block list as functions: it calls `countdown`
/// (written, with one brace too many). A tool it imagines is answered as unknown, and the
/// error it then copies into its answer goes back to it, never to the member.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_called_as_a_tool_is_its_rich_message_and_a_copied_tool_result_is_never_shown() {
    let env = Env::start().await;
    let room = env.dm().await;
    env.llm.script([
        text(r#"{{"name": "countdown", "arguments": {"until": "2027-01-01T00:00:00Z", "label": "New Year 2027"}}"#),
        text("[no reply]"),
    ]);
    env.alice.say(&room, "How long until New Year 2027? Show me a countdown.").await;
    env.wait_turns(&room, 1).await;
    let posted = env.alice.messages_from(&room, BOT).await;
    assert_eq!(posted.len(), 1, "{posted:#?}");
    let block = &posted[0]["content"]["com.ianm.mtrix"]["blocks"][0];
    assert_eq!(block["type"], "countdown", "{posted:#?}");
    let body = posted[0]["content"]["body"].as_str().expect("a body");
    assert!(body.contains("New Year 2027"), "the fallback says what the block shows: {body}");
    let result = crate::support::llm::last_tool_result(&env.llm.requests()[1]).expect("a result");
    assert_eq!(result["event_id"], posted[0]["event_id"], "{result}");

    // An imagined tool is no tool, and the model copies the error it got: never shown.
    env.llm.script([
        text(r#"{"name": "web_search", "arguments": {"q": "new year"}}"#),
        text(r#"{"error":"no tool `web_search` (tools: rich_send, rich_edit)","code":"unknown_tool"}"#),
        text("New Year 2027 is on a Friday."),
    ]);
    env.alice.say(&room, "What day is that?").await;
    env.wait_turns(&room, 2).await;
    let requests = env.llm.requests();
    let unknown = crate::support::llm::last_tool_result(&requests[3]).expect("a result");
    assert_eq!(unknown["code"], "unknown_tool", "{unknown}");
    assert_eq!(last_user(&requests[4]), richbot::strings::CORRECT_TOOL_RESULT);
    let bodies = final_bodies(&env, &room).await;
    assert_eq!(bodies.last().map(String::as_str), Some("New Year 2027 is on a Friday."), "{bodies:#?}");
    assert!(everything_shown(&env, &room).await.iter().all(|b| !b.contains("\"error\"")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_call_an_empty_or_annotated_answer_is_sent_back_never_posted_as_it_is() {
    let env = Env::start().await;
    let room = env.dm().await;
    env.llm.script([
        text("<rich_send>payload: the weather in Porto</rich_send>"),
        text("[Now: 2026-12-06T10:00Z. In: a direct chat with @alice:localhost. Asked by: @alice:localhost.]"),
        text("@richbot:localhost: It rains in Porto, 14 °C.\n[event_id: $made-up]"),
    ]);
    env.alice.say(&room, "weather in Porto?").await;
    env.wait_turns(&room, 1).await;
    assert_eq!(final_bodies(&env, &room).await, ["It rains in Porto, 14 °C."]);
    let shown = everything_shown(&env, &room).await;
    assert!(
        shown.iter().all(|b| !b.contains("rich_send") && !b.contains("[Now") && !b.contains("$made-up")),
        "{shown:#?}"
    );
    let requests = env.llm.requests();
    assert_eq!(last_user(&requests[1]), richbot::strings::CORRECT_WRITTEN_CALL);
    assert_eq!(last_user(&requests[2]), richbot::strings::CORRECT_EMPTY);
    // Never the ids or notes in what the model reads of its own answer next time.
    env.llm.script([text("You're welcome.")]);
    env.alice.say(&room, "thanks").await;
    env.wait_turns(&room, 2).await;
    let history = env.llm.requests()[3]["messages"].to_string();
    assert!(history.contains("\"It rains in Porto, 14 °C.\""), "its answer, clean: {history}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promise_no_tool_kept_is_kept_by_the_call_the_model_fills_in_or_told_honestly() {
    let env = Env::start().await;
    let room = env.dm().await;
    // The model says it did, and calls nothing: asked for the call's arguments alone (its
    // output held to their schema), it fills them in; the call is made, then it answers.
    env.llm.script([
        pieces("Reminder: stretch in an hour."),
        text(r#"{"at": "in 1 hour", "message": "Time to stretch!"}"#),
        text("Done: I'll remind you in an hour."),
    ]);
    env.alice.say(&room, "Remind me in an hour to stretch").await;
    env.wait_turns(&room, 1).await;
    assert_eq!(final_bodies(&env, &room).await, ["Done: I'll remind you in an hour."]);
    let requests = env.llm.requests();
    let fill = &requests[1];
    assert_eq!(fill["response_format"]["json_schema"]["name"], "schedule", "{fill}");
    assert_eq!(fill["response_format"]["json_schema"]["schema"]["required"], json!(["at", "message"]));
    assert!(fill.get("tools").is_none() && fill["stream"] == false, "{fill}");
    assert!(last_user(fill).contains("Write the arguments of the schedule call"), "{}", last_user(fill));
    // The model then sees the call made, with its result, not its promise.
    let result = crate::support::llm::last_tool_result(&requests[2]).expect("the call's result");
    assert!(result.get("error").is_none(), "{result}");
    let store = env.store().await;
    let made = store.active_schedules(None, Some(&crate::support::room_id(&room))).await.expect("schedules");
    assert_eq!(made.len(), 1, "the reminder exists");
    assert!(made[0].body.contains("Time to stretch!"), "{:?}", made[0].body);
    // A model that gives no arguments and keeps saying it did: asked once a turn, then
    // told twice in words; the member reads one honest sentence, never the claim.
    env.llm.script([
        text("Reminder set!"),
        text("I have set it."),
        text("Your reminder is set."),
        text("Reminder: all set."),
    ]);
    env.alice.say(&room, "Remind me tomorrow at 9 to call mum").await;
    env.wait_turns(&room, 2).await;
    let bodies = final_bodies(&env, &room).await;
    assert_eq!(bodies.last().map(String::as_str), Some(richbot::strings::PROMISE_NOT_KEPT), "{bodies:#?}");
    let shown = everything_shown(&env, &room).await;
    assert!(
        shown.iter().all(|b| !b.contains("Reminder set") && !b.contains("is set") && !b.contains("all set")),
        "{shown:#?}"
    );
    let asked_for_arguments = || env.llm.requests().iter().filter(|r| r.get("response_format").is_some()).count();
    assert_eq!(asked_for_arguments(), 2, "once a turn");
    // An endpoint that refuses structured output is not asked for it again: the model is
    // told in words.
    env.llm.script([
        text("Poll created!"),
        Step::Status(400),
        call("rich_poll", json!({"question": "Tea or coffee?", "answers": ["Tea", "Coffee"]})),
        text("There it is."),
    ]);
    env.alice.say(&room, "Make a poll: tea or coffee?").await;
    env.wait_turns(&room, 3).await;
    env.llm.script([
        text("Poll created!"),
        call("rich_poll", json!({"question": "Tea or cocoa?", "answers": ["Tea", "Cocoa"]})),
        text("Here."),
    ]);
    env.alice.say(&room, "Make a poll: tea or cocoa?").await;
    env.wait_turns(&room, 4).await;
    assert_eq!(asked_for_arguments(), 3, "refused once, then never asked");
    assert_eq!(final_bodies(&env, &room).await.last().map(String::as_str), Some("Here."));
    let metrics = env.metrics().await;
    assert!(metrics.lines().any(|l| l == "richbot_answer_corrections_total 4"), "{metrics}");
    assert!(metrics.lines().any(|l| l == "richbot_llm_filled_calls_total 1"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_text_tool_calls_off_the_models_text_is_posted_as_it_wrote_it() {
    let options = Options { llm_lines: "text_tool_calls = false", ..Default::default() };
    let env = Env::start_with(options).await;
    let room = env.dm().await;
    let written = json!({"name": "rich_send", "arguments": weather()}).to_string();
    env.llm.script([text(&written)]);
    env.alice.say(&room, "weather in Porto?").await;
    env.wait_turns(&room, 1).await;
    let bodies = final_bodies(&env, &room).await;
    assert_eq!(bodies.len(), 1, "{bodies:#?}");
    assert!(bodies[0].contains("\"name\"") && bodies[0].contains("rich_send"), "posted as written: {bodies:#?}");
    assert_eq!(env.llm.requests().len(), 1, "no call was run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reminder_written_as_text_that_nobody_asked_for_is_never_set_nor_a_posted_call_made_again() {
    let env = Env::start().await;
    let room = env.dm().await;
    let at = richbot::clock::rfc3339(richbot::clock::now_ms() + 600_000);
    let unasked = format!(
        "```json\n{}\n```",
        json!({"name": "schedule", "arguments": {"at": at, "message": {"text": "Remember to go for a walk!"}}})
    );
    // After its answer was posted, as Qwen2.5-Coder-1.5B did: the turn ends there.
    env.llm.script([call("rich_send", weather()), text(&unasked)]);
    env.alice.say(&room, "weather in Porto?").await;
    assert_eq!(env.wait_turns(&room, 1).await[0].0, "no_reply");
    assert_eq!(everything_shown(&env, &room).await, ["Porto: 14 °C, rain"]);
    assert_eq!(env.llm.requests().len(), 2, "not asked again");
    // Before any answer: the model is told it was not run, and answers.
    env.llm.script([text(&unasked), text("Lie on your back and pull one knee to your chest.")]);
    env.alice.say(&room, "What's a good stretch for the back?").await;
    env.wait_turns(&room, 2).await;
    let told = last_user(&env.llm.requests()[3]);
    assert!(told.contains("schedule call as text, and it was not run"), "{told}");
    let bodies = final_bodies(&env, &room).await;
    assert_eq!(bodies.last().map(String::as_str), Some("Lie on your back and pull one knee to your chest."));
    let store = env.store().await;
    let made = store.active_schedules(None, Some(&crate::support::room_id(&room))).await.expect("schedules");
    assert!(made.is_empty(), "no reminder: {made:?}");
    // Its posted call written out again: the model is done, not asked twice more.
    let again = format!(
        "You can use the following command:\n```json\n{}\n```",
        json!({"name": "rich_send", "arguments": weather()})
    );
    env.llm.script([call("rich_send", weather()), text(&again)]);
    env.alice.say(&room, "and now?").await;
    assert_eq!(env.wait_turns(&room, 3).await[2].0, "no_reply");
    assert_eq!(env.llm.requests().len(), 6);
    assert_eq!(final_bodies(&env, &room).await.len(), 3, "the weather twice and the stretch");
    let metrics = env.metrics().await;
    assert!(metrics.contains(r#"richbot_tool_calls_total{tool="other",result="unasked"} 2"#), "{metrics}");
    assert!(metrics.contains(r#"richbot_tool_calls_total{tool="rich_send",result="unasked"} 1"#), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silence_in_a_dm_is_asked_about_once_and_then_respected() {
    // The answers benchmark (Qwen2.5-Coder-1.5B): "[no reply]" to a recipe asked in a DM.
    let env = Env::start().await;
    let room = env.dm().await;
    env.llm.script([text("[no reply]"), text("Mix a cup of flour, an egg and a cup of milk; fry by the ladle.")]);
    env.alice.say(&room, "Give me a simple pancake recipe.").await;
    env.wait_turns(&room, 1).await;
    assert_eq!(final_bodies(&env, &room).await, ["Mix a cup of flour, an egg and a cup of milk; fry by the ladle."]);
    assert_eq!(last_user(&env.llm.requests()[1]), richbot::strings::CORRECT_SILENT);
    // Asked once, a model that still chooses silence posts nothing.
    env.llm.script([text("[no reply]"), text("[no reply]")]);
    env.alice.say(&room, "Thanks!").await;
    env.wait_turns(&room, 2).await;
    assert_eq!(env.llm.requests().len(), 4, "one question more, not two");
    assert_eq!(final_bodies(&env, &room).await.len(), 1, "nothing more was posted");
}
