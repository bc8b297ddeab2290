//! Crash safety with the real binary: `richbot serve` is killed (SIGKILL) after the model's
//! tool call was posted but before the turn was recorded done; after a restart the turn
//! resumes from its record (the model is not asked again for what it already said) and
//! the message is not posted twice, nor is the file it carried uploaded twice.

use std::time::Duration;

use crate::support::llm::{Step, call, last_tool_result, text};
use crate::support::{BOT, Env, eventually};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_killed_after_posting_is_resumed_without_posting_twice() {
    let mut env = Env::start().await;
    let room = env.dm().await;
    env.bot.stop().await;
    let mut serve = env.serve_binary().await;

    // With a file the model made: uploaded with the first post, and not again on resume.
    let file = json!({"type": "file", "url": "data:text/csv,day%2Ctemp%0Amon%2C21", "name": "week.csv"});
    let blocks = json!([{"type": "weather", "location": "Lisbon", "temp": "21.5"}, file]);
    let args = json!({"payload": {"v": 1, "blocks": blocks}, "fallback": "Lisbon 21.5 °C, and week.csv"});
    env.llm.script([call("rich_send", args.clone()), Step::Hang]);
    env.alice.say(&room, "weather in Lisbon?").await;
    let posted = env.wait_messages(&room, BOT, 1).await;
    eventually("the model was asked again after the tool call", Duration::from_secs(20), || async {
        (env.llm.requests().len() >= 2).then_some(())
    })
    .await;
    serve.start_kill().expect("SIGKILL");
    let _ = serve.wait().await;

    env.llm.script([text("[no reply]")]);
    let mut serve = env.serve_binary().await;
    let turns = env.wait_turns(&room, 1).await;
    assert_eq!(turns[0].0, "no_reply");
    let requests = env.llm.requests();
    // The recorded reply (the rich_send) is replayed, not asked again: only the reply that
    // was cut short is asked for.
    assert_eq!(requests.len(), 3, "the resumed turn replays what was recorded");
    assert_eq!(
        last_tool_result(&requests[2]).expect("result")["event_id"],
        posted[0]["event_id"],
        "the replayed send found the first post"
    );
    let ours = env.alice.messages_from(&room, BOT).await;
    let kinds: Vec<&str> = ours.iter().filter_map(|m| m["content"]["msgtype"].as_str()).collect();
    assert_eq!(kinds, ["m.text", "m.file"], "posted once, the message and its file: {ours:#?}");
    let store = env.store().await;
    assert_eq!(store.uploads_in_turn(1).await.expect("uploads"), 1, "the file was uploaded once");
    let payload = richbot::blocks::read_payload(&posted[0]["content"]).expect("blocks");
    let url = payload["blocks"][1]["url"].as_str().expect("an mxc URL");
    assert!(store.uploaded_by(&crate::support::user_id(BOT), url).await.expect("store"), "{url}");
    assert_eq!(env.alice.download(url).await.0, b"day,temp\nmon,21");
    serve.start_kill().expect("kill");
    let _ = serve.wait().await;
}
