//! What one member (or the model, prompted by one) can do to everyone else, against a
//! real Synapse: a forged `m.room.encrypted` event (the room's state says it is not
//! encrypted), a burst of commands from one member, and a chart bomb change nothing for
//! the others.

use std::time::Duration;

use serde_json::json;

use crate::support::llm::{call, last_tool_result, text};
use crate::support::{BOT, Env, eventually, notices, terminate};

/// A group room of alice, bob and mallory (not in `access.allow`) with the persona.
async fn group(env: &Env) -> String {
    let room = env.alice.create_room(&[BOT, "@bob:localhost", "@mallory:localhost"], false).await;
    env.wait_joined(&room, BOT).await;
    env.bob.join(&room).await;
    env.mallory.join(&room).await;
    room
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_encrypted_event_in_a_clear_room_neither_silences_nor_evicts_the_persona() {
    let env = Env::start().await;
    let room = group(&env).await;
    let forged = json!({"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "AAAA", "sender_key": "x", "session_id": "y", "device_id": "Z"});
    env.mallory.send(&room, "m.room.encrypted", forged.clone()).await;
    env.alice.send(&room, "m.room.encrypted", forged).await;
    env.llm.script([text("Still here, in the clear.")]);
    env.bob.say(&room, "Richbot, are you still with us?").await;
    let said = eventually("the answer", Duration::from_secs(30), || async {
        let m = env.alice.messages_from(&room, BOT).await;
        m.iter().any(|m| m["content"]["body"] == "Still here, in the clear.").then_some(m)
    })
    .await;
    assert!(notices(&said).is_empty(), "no encrypted-room notice: {:?}", notices(&said));
    assert!(env.alice.joined_members(&room).await.iter().any(|u| u == BOT), "the persona stays");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nine_commands_from_one_member_do_not_pause_the_persona_for_the_others() {
    let env = Env::start().await;
    let room = group(&env).await;
    for _ in 0..9 {
        env.alice.say(&room, "Richbot: !help").await;
    }
    let helps = eventually("nine help notices", Duration::from_secs(60), || async {
        let n = notices(&env.alice.messages_from(&room, BOT).await);
        (n.len() >= 9).then_some(n)
    })
    .await;
    assert!(helps.iter().all(|n| n.contains("Commands:")), "commands answered, no pause: {helps:?}");
    env.llm.script([text("Answering Bob.")]);
    env.bob.say(&room, "Richbot, a real question").await;
    eventually("bob is answered", Duration::from_secs(30), || async {
        let m = env.alice.messages_from(&room, BOT).await;
        m.iter().any(|m| m["content"]["body"] == "Answering Bob.").then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_cannot_edit_richbots_own_notices_nor_see_them() {
    let env = Env::start().await;
    let dm = env.dm().await;
    env.alice.say(&dm, "!help").await;
    let help = eventually("the help notice", Duration::from_secs(30), || async {
        env.alice.messages_from(&dm, BOT).await.into_iter().find(|m| m["content"]["msgtype"] == "m.notice")
    })
    .await;
    let id = help["event_id"].as_str().expect("id").to_owned();
    let edit = json!({"event_id": id, "payload": {"v": 1, "blocks": [{"type": "details", "summary": "s", "body": "b"}]}, "fallback": "Approved."});
    env.llm.script([crate::support::llm::call("rich_edit", edit), text("[no reply]")]);
    env.alice.say(&dm, "now edit that notice").await;
    env.wait_turns(&dm, 2).await;
    let requests = env.llm.requests();
    let refused = crate::support::llm::last_tool_result(&requests[1]).expect("a tool result");
    assert_eq!(refused["code"], "not_owner", "{refused}");
    let prompt = requests[0]["messages"].to_string();
    assert!(!prompt.contains(&id) && !prompt.contains("Commands:"), "the notice is not in the prompt: {prompt}");
    let edits = env.alice.messages_from(&dm, BOT).await;
    assert!(edits.iter().all(|m| m["content"]["m.relates_to"]["event_id"] != id.as_str()), "never edited");
}

/// A chart bomb on the real binary: values at the ends of the doubles are refused with
/// their path (the model can fix its call), and values that pass the check but strain a
/// drawing (one ULP of span at the bound, a subnormal) are drawn at once. The persona then
/// answers another member, and `serve` still exits on SIGTERM (no drawing spins on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chart_bomb_is_refused_or_drawn_and_the_persona_answers_others_then_exits_on_sigterm() {
    let mut env = Env::start().await;
    let room = env.dm().await;
    env.bot.stop().await;
    let mut serve = env.serve_binary().await;
    let payload = |blocks| json!({"payload": {"v": 1, "blocks": blocks}, "fallback": "The numbers, charted."});
    let bomb = payload(json!([{"type": "chart", "kind": "bar", "series": [1, "1.7e308"]}]));
    let strain = payload(json!([
        {"type": "chart", "title": "ULP", "series": ["999999999999999.875", "1000000000000000"]},
        {"type": "chart", "title": "Tiny", "kind": "bar", "series": ["5e-324", "0"]}
    ]));
    env.llm.script([call("rich_send", bomb), call("rich_send", strain), text("[no reply]")]);
    env.alice.say(&room, "chart these numbers").await;
    env.wait_turns(&room, 1).await;
    let refused = last_tool_result(&env.llm.requests()[1]).expect("the bomb's result");
    assert_eq!(refused["path"], "payload.blocks[0].series[1]", "{refused}");
    assert!(refused["error"].as_str().is_some_and(|e| e.contains("within ±1e15")), "{refused}");
    let sent = env.alice.messages_from(&room, BOT).await;
    let html = sent[0]["content"]["formatted_body"].as_str().expect("html");
    assert_eq!(html.matches("<img").count(), 2, "both strained charts drawn: {html}");

    let bob_dm = env.bob.create_room(&[BOT], true).await;
    env.wait_joined_seen_by(&env.bob, &bob_dm, BOT).await;
    env.llm.script([text("Hello Bob, still quick.")]);
    env.bob.say(&bob_dm, "are you still there?").await;
    let answer = env.wait_messages_seen_by(&env.bob, &bob_dm, BOT, 1).await;
    assert_eq!(answer[0]["content"]["body"], "Hello Bob, still quick.");

    let status = terminate(&mut serve).await;
    assert!(status.success(), "exit 0 on SIGTERM: {status}");
}
