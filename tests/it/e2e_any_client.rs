//! What a member sees and can do in a client that draws no blocks (nheko, FluffyChat,
//! Element without the blocks module), on the real Synapse: the text says what the
//! blocks show, and a typed answer presses a button.

use serde_json::json;

use crate::support::llm::{call, text};
use crate::support::{BOT, Env};

/// The last message the model was sent in its last request.
fn last_said(env: &Env) -> String {
    let last = env.llm.requests().last().cloned().expect("request");
    last["messages"].as_array().and_then(|m| m.last()).and_then(|m| m["content"].as_str()).expect("text").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vague_fallback_reaches_the_member_with_the_blocks_facts_and_how_to_press() {
    let env = Env::start().await;
    let offer = json!({
        "payload": {"v": 1, "blocks": [
            {"type": "card", "title": "Casa Lisboa", "price": "42.50", "currency": "EUR", "fields": [{"label": "Table for", "value": 4}]},
            {"type": "buttons", "buttons": [
                {"label": "Yes, book it", "action": {"type": "react", "key": "✅"}},
                {"label": "Another time", "action": {"type": "send", "body": "another time"}}]}]},
        "fallback": "I found a place for you.",
    });
    env.llm.script([call("rich_send", offer), text("[no reply]"), text("Booked!")]);
    let room = env.dm().await;
    env.alice.say(&room, "find me a table").await;
    let sent = env.wait_messages(&room, BOT, 1).await;
    let content = &sent[0]["content"];
    let body = content["body"].as_str().expect("body");
    assert!(body.starts_with("I found a place for you.\n\n"), "the model's words lead: {body}");
    for fact in ["Casa Lisboa", "42.50 EUR", "Table for: 4", "React ✅ for Yes, book it · or reply Another time"] {
        assert!(body.contains(fact), "body lacks {fact:?}: {body}");
    }
    let html = content["formatted_body"].as_str().expect("html");
    assert!(html.contains("<p><strong>Casa Lisboa</strong></p>"), "{html}");
    assert!(html.contains("React ✅ for <em>Yes, book it</em>"), "{html}");
    assert_eq!(content["com.ianm.mtrix"]["blocks"][0]["title"], "Casa Lisboa", "the payload as the model sent it");

    // Typed as the line says: the same press as a reaction, through the same path.
    let target = sent[0]["event_id"].as_str().expect("id").to_owned();
    env.alice.say(&room, "Yes, book it!").await;
    let answers = env.wait_messages(&room, BOT, 2).await;
    assert_eq!(answers[1]["content"]["body"], "Booked!");
    let said = last_said(&env);
    let press = format!("@alice:localhost pressed the button \"Yes, book it\" (✅) on your message {target}.");
    assert!(said.ends_with(&format!("\n{press}")), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_group_room_a_typed_answer_presses_only_as_a_reply_to_the_message() {
    let env = Env::start().await;
    let question = json!({
        "payload": {"v": 1, "blocks": [{"type": "chips", "chips": [
            {"label": "Tea", "action": {"type": "send", "body": "tea please"}},
            {"label": "Coffee", "action": {"type": "send", "body": "coffee please"}}]}]},
        "fallback": "Tea or coffee?",
    });
    env.llm.script([call("rich_send", question), text("[no reply]"), text("Coffee it is.")]);
    let room = env.alice.create_room(&[BOT, "@bob:localhost"], false).await;
    env.wait_joined(&room, BOT).await;
    env.bob.join(&room).await;
    env.bob.say(&room, "Richbot, tea or coffee for the meeting?").await;
    let sent = env.wait_messages(&room, BOT, 1).await;
    assert!(sent[0]["content"]["body"].as_str().is_some_and(|b| b.ends_with("Reply Tea or Coffee")), "{sent:#?}");
    let target = sent[0]["event_id"].as_str().expect("id").to_owned();
    // Said to the room, not to the persona: nobody asked it anything.
    env.bob.say(&room, "coffee").await;
    // A reply to its message: the press.
    let reply = json!({"msgtype": "m.text", "body": "Coffee", "m.relates_to": {"m.in_reply_to": {"event_id": target}}});
    env.bob.send(&room, "m.room.message", reply).await;
    let answers = env.wait_messages(&room, BOT, 2).await;
    assert_eq!(answers[1]["content"]["body"], "Coffee it is.");
    let said = last_said(&env);
    let press = format!("@bob:localhost pressed the button \"Coffee\" (coffee please) on your message {target}.");
    assert!(said.ends_with(&format!("\n{press}")), "{said}");
    assert_eq!(
        env.llm.requests().len(),
        3,
        "one turn for the question, one for the press: the unaddressed word started none"
    );
}
