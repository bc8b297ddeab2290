//! Conversation commands against a real Synapse: `!reset` takes the conversation out of the
//! model's context, `!mode` is refused to a member without power and applied for the
//! room's creator (then answers go in a thread under the question), `!help` and unknown
//! commands are answered as notices; none of them reaches the model. In the default
//! `reply` mode a rich answer replies to the question, as a text answer does.

use serde_json::json;

use crate::support::llm::{Step, call, text};
use crate::support::{BOT, Env, notices};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_help_and_unknown_commands_in_a_dm() {
    let env = Env::start().await;
    env.llm.respond_with(|_| text("Noted."));
    let dm = env.dm().await;
    env.alice.say(&dm, "my secret plan is to bake").await;
    env.wait_turns(&dm, 1).await;
    for (i, command) in ["!help", "!frobnicate", "!reset"].iter().enumerate() {
        env.alice.say(&dm, command).await;
        env.wait_turns(&dm, i + 2).await;
    }
    env.alice.say(&dm, "what was my plan?").await;
    env.wait_turns(&dm, 5).await;
    let requests = env.llm.requests();
    assert_eq!(requests.len(), 2, "commands never reach the model");
    let after_reset = requests[1]["messages"].to_string();
    assert!(!after_reset.contains("bake") && !after_reset.contains("Noted."), "nothing before !reset: {after_reset}");
    assert!(after_reset.contains("what was my plan?"));
    let said = notices(&env.alice.messages_from(&dm, BOT).await);
    assert_eq!(said.len(), 3, "{said:?}");
    assert!(said[0].contains("Commands: !help (this)"), "{}", said[0]);
    assert!(said[1].contains("I don't know !frobnicate"), "{}", said[1]);
    assert!(said[2].contains("set aside our conversation"), "{}", said[2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mode_is_refused_without_power_and_applied_for_the_creator() {
    let env = Env::start().await;
    env.llm.respond_with(|_| Step::Text("An answer.".into()));
    let room = env.alice.create_room(&[BOT, "@bob:localhost"], false).await;
    env.wait_joined(&room, BOT).await;
    env.bob.join(&room).await;

    // Default in a group room: a reply to the question.
    let question = env.bob.say(&room, "Richbot, hello?").await;
    let answered = env.wait_messages(&room, BOT, 1).await;
    assert_eq!(answered[0]["content"]["m.relates_to"]["m.in_reply_to"]["event_id"], question.as_str());

    env.bob.say(&room, "Richbot: !mode thread").await;
    let refused = env.wait_messages(&room, BOT, 2).await;
    assert!(notices(&refused)[0].contains("Only members with power level 50"), "{refused:?}");
    env.alice.say(&room, "Richbot: !mode thread").await;
    let set = env.wait_messages(&room, BOT, 3).await;
    assert!(notices(&set)[1].contains("in a thread under each question"), "{set:?}");

    let asked = env.bob.say(&room, "Richbot, and now?").await;
    let threaded = env.wait_messages(&room, BOT, 4).await;
    let relates = &threaded[3]["content"]["m.relates_to"];
    assert_eq!((relates["rel_type"].as_str(), relates["event_id"].as_str()), (Some("m.thread"), Some(asked.as_str())));
    assert_eq!(env.llm.requests().len(), 2, "only the two questions reached the model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_in_a_group_room_takes_the_power_that_mode_takes() {
    let env = Env::start().await;
    let room = env.alice.create_room(&[BOT, "@bob:localhost"], false).await;
    env.wait_joined(&room, BOT).await;
    env.bob.join(&room).await;
    env.bob.say(&room, "Richbot: !reset").await;
    let refused = env.wait_messages(&room, BOT, 1).await;
    assert!(notices(&refused)[0].contains("sets aside everyone's conversation"), "{refused:?}");
    env.alice.say(&room, "Richbot: !reset").await;
    let done = env.wait_messages(&room, BOT, 2).await;
    assert!(notices(&done)[1].contains("set aside our conversation"), "{done:?}");
    assert!(env.llm.requests().is_empty(), "commands never reach the model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rich_answer_in_a_group_room_replies_to_the_question_like_a_text_answer() {
    let env = Env::start().await;
    let weather = json!({
        "payload": {"v": 1, "blocks": [{"type": "weather", "location": "Lisbon", "temp": 21}]},
        "fallback": "Lisbon: 21 °C",
    });
    env.llm.script([call("rich_send", weather), text("[no reply]")]);
    let room = env.alice.create_room(&[BOT, "@bob:localhost"], false).await;
    env.wait_joined(&room, BOT).await;
    env.bob.join(&room).await;
    let question = env.bob.say(&room, "Richbot, the weather in Lisbon?").await;
    let answered = env.wait_messages(&room, BOT, 1).await;
    let content = &answered[0]["content"];
    assert!(content["com.ianm.mtrix"]["blocks"][0]["type"] == "weather", "{answered:#?}");
    assert_eq!(content["m.relates_to"]["m.in_reply_to"]["event_id"], question.as_str(), "{answered:#?}");
}
