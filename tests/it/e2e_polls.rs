//! Polls against the real Synapse: the persona starts two (MSC3381, with text fallbacks,
//! each shown by a message for clients that draw no polls), two members vote (one
//! changes her mind, one replies with a number), the next turn's prompt holds the tally,
//! the persona ends one when asked (and may neither end a poll that is not its own nor
//! edit one as a message), and the other ends by itself at its `end_after_secs`; each
//! result is posted as a message. Waits about a minute for that end. In a DM a bare
//! number is a vote.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::llm::{Step, text};
use crate::support::{BOT, Env, eventually};

const START: &str = "org.matrix.msc3381.poll.start";
const END: &str = "org.matrix.msc3381.poll.end";

fn calls(list: &[(&str, Value)]) -> Step {
    Step::Calls(list.iter().map(|(n, a)| ((*n).to_owned(), a.to_string())).collect())
}

/// The text of a request's messages: the polls are told in the newest one's first lines.
fn told(request: &Value) -> String {
    let messages = request["messages"].as_array().into_iter().flatten();
    messages.filter_map(|m| m["content"].as_str()).collect::<Vec<_>>().join("\n")
}

/// The poll id the prompt lists for `question`.
fn listed(request: &Value, question: &str) -> Option<String> {
    let told = told(request);
    let line = told.lines().find(|l| l.starts_with("- $") && l.contains(&format!("{question:?}")))?;
    Some(line[2..].split_whitespace().next()?.to_owned())
}

/// The tool results the model was given in `request`.
fn tool_results(request: Option<&Value>) -> Vec<Value> {
    let messages = request.and_then(|r| r["messages"].as_array()).into_iter().flatten();
    messages.filter(|m| m["role"] == "tool").filter_map(|m| serde_json::from_str(m["content"].as_str()?).ok()).collect()
}

/// How many of `requests` asked about a member's message (not a tool's result).
fn asked(requests: &[Value]) -> usize {
    requests
        .iter()
        .filter(|r| r["messages"].as_array().and_then(|m| m.last()).is_some_and(|m| m["role"] == "user"))
        .count()
}

fn vote(poll: &str, answer: &str) -> Value {
    json!({"m.relates_to": {"rel_type": "m.reference", "event_id": poll}, "org.matrix.msc3381.poll.response": {"answers": [answer]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_is_voted_on_tallied_for_the_model_and_ended_when_asked_or_when_due() {
    let env = Env::start().await;
    let room = env.alice.create_room(&[BOT, "@bob:localhost"], false).await;
    env.bob.join(&room).await;
    env.wait_joined(&room, BOT).await;
    env.llm.respond_with(move |request| {
        let last = request["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
        let said = last["content"].as_str().unwrap_or_default();
        if last["role"] == "user" && said.contains("end the lunch poll") {
            let lunch = listed(request, "Lunch?").unwrap_or_default();
            // First a message that is no poll of its own: the question that asked for them.
            let asked = request["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m["content"].as_str())
                // Its id, from the note's ids: `$x ("Richbot, start the polls…")`.
                .find(|t| t.contains("(\"Richbot, start the polls"))
                .and_then(|t| {
                    let quoted = &t[..t.find("(\"Richbot, start the polls")?];
                    let id = &quoted[quoted.rfind('$')?..];
                    Some(id.split(' ').next()?.to_owned())
                })
                .unwrap_or_default();
            let edit = json!({"event_id": lunch, "payload": {"v": 1, "blocks": [{"type": "details", "summary": "x", "body": "x"}]}, "fallback": "x"});
            return calls(&[
                ("rich_poll_end", json!({"poll": asked})),
                ("rich_poll_end", json!({"poll": lunch})),
                ("rich_edit", edit),
            ]);
        }
        // The note of the later question quotes the earlier one: asked last, matched first.
        if last["role"] == "user" && said.ends_with("start the polls") {
            let lunch = json!({"question": "Lunch?", "answers": ["Pizza", "Sushi"]});
            let dinner = json!({"question": "Dinner?", "answers": ["Soup", "Salad"], "kind": "undisclosed", "end_after_secs": 60});
            return calls(&[("rich_poll", lunch), ("rich_poll", dinner)]);
        }
        text("[no reply]")
    });
    env.alice.say(&room, "Richbot, start the polls").await;
    env.wait_turns(&room, 1).await;

    let events = env.alice.messages(&room).await;
    let polls: Vec<&Value> = events.iter().filter(|e| e["type"] == START && e["sender"] == BOT).collect();
    assert_eq!(polls.len(), 2, "{events:#?}");
    let (lunch, dinner) = (polls[0]["event_id"].as_str().expect("id"), polls[1]["event_id"].as_str().expect("id"));
    let content = &polls[0]["content"];
    assert_eq!(
        content[START]["answers"],
        json!([{"id": "1", "org.matrix.msc1767.text": "Pizza"}, {"id": "2", "org.matrix.msc1767.text": "Sushi"}])
    );
    assert_eq!(content[START]["kind"], "org.matrix.msc3381.poll.disclosed");
    assert_eq!(content["org.matrix.msc1767.text"], "Lunch?\n1. Pizza\n2. Sushi", "a text fallback");
    assert_eq!(polls[1]["content"][START]["kind"], "org.matrix.msc3381.poll.undisclosed");
    // Each shown by a message too, for clients that draw no polls (the two calls of one
    // reply may run at once: found by their question, not their place).
    let shown = |question: &str| {
        let head = format!("📊 {question}\n");
        let found = events.iter().find(|e| e["content"]["body"].as_str().is_some_and(|b| b.starts_with(&head)));
        found.cloned().unwrap_or_else(|| panic!("{question} shown: {events:#?}"))
    };
    let (lunch_shown, dinner_shown) = (shown("Lunch?"), shown("Dinner?"));
    assert_eq!(lunch_shown["sender"], BOT);
    assert_eq!(lunch_shown["content"]["msgtype"], "m.notice");
    assert_eq!(
        lunch_shown["content"]["body"],
        "📊 Lunch?\n1. Pizza\n2. Sushi\nVote in the poll, or reply with a number."
    );
    assert_eq!(
        dinner_shown["content"]["body"],
        "📊 Dinner?\n1. Soup\n2. Salad\nVote in the poll, or reply with a number. It ends in 60 seconds. The votes \
         are shown when it ends."
    );
    let dinner_shown = dinner_shown["event_id"].as_str().expect("id").to_owned();

    env.alice.send(&room, "org.matrix.msc3381.poll.response", vote(lunch, "2")).await;
    env.bob.send(&room, "org.matrix.msc3381.poll.response", vote(lunch, "1")).await;
    env.alice.send(&room, "org.matrix.msc3381.poll.response", vote(lunch, "1")).await; // her latest counts
    // Bob votes on dinner by replying to its message with a number: a vote, not a question.
    let reply =
        json!({"msgtype": "m.text", "body": "2", "m.relates_to": {"m.in_reply_to": {"event_id": dinner_shown}}});
    env.bob.send(&room, "m.room.message", reply).await;
    env.alice.say(&room, "Richbot, end the lunch poll").await;
    env.wait_turns(&room, 2).await;

    let requests = env.llm.requests();
    let prompt = requests.iter().find(|r| listed(r, "Lunch?").is_some()).expect("a prompt listing the polls");
    let system = told(prompt);
    assert!(
        system.contains(&format!("- {lunch} \"Lunch?\" (open, disclosed): \"Pizza\": 2 (@alice:localhost, @bob:localhost); \"Sushi\": 0. 2 votes")),
        "{system}"
    );
    assert!(system.contains(&format!("- {dinner} \"Dinner?\" (open, ends ")), "{system}");
    assert!(
        system.contains("undisclosed): 1 vote so far; its results are for when it ends"),
        "an undisclosed tally waits: {system}"
    );
    assert_eq!(asked(&requests), 2, "bob's vote asked the model nothing");
    let results = tool_results(requests.last());
    assert_eq!(results[0]["code"], "not_owner", "a message that is no poll of its own: {results:?}");
    assert_eq!(results[1]["result"], "Top answer: Pizza (2 votes).", "{results:?}");
    assert_eq!(results[2]["code"], "not_owner", "a poll is not a message to edit: {results:?}");

    // The lunch poll ended when asked; dinner ends by itself a minute after it started.
    let ends = eventually("both polls end", Duration::from_secs(180), || async {
        let events = env.alice.messages(&room).await;
        let ends: Vec<Value> = events.into_iter().filter(|e| e["type"] == END && e["sender"] == BOT).collect();
        (ends.len() == 2).then_some(ends)
    })
    .await;
    let of = |poll: &str| ends.iter().find(|e| e["content"]["m.relates_to"]["event_id"] == poll).expect("its end");
    assert_eq!(of(lunch)["content"]["org.matrix.msc1767.text"], "The poll has ended. Top answer: Pizza (2 votes).");
    assert_eq!(of(dinner)["content"]["org.matrix.msc1767.text"], "The poll has ended. Top answer: Salad (1 vote).");
    // And each result as a message (posted just after the end), a reply to the poll's own
    // message.
    let lunch_shown = lunch_shown["event_id"].as_str().expect("id").to_owned();
    let results = eventually("both results posted", Duration::from_secs(60), || async {
        let events = env.alice.messages(&room).await;
        let result = |shown: &str| {
            events
                .iter()
                .find(|e| e["sender"] == BOT && e["content"]["m.relates_to"]["m.in_reply_to"]["event_id"] == shown)
                .map(|e| e["content"]["body"].clone())
        };
        Some((result(&lunch_shown)?, result(&dinner_shown)?))
    })
    .await;
    let lunch_result =
        "📊 Lunch?\nThe poll has ended. Top answer: Pizza (2 votes).\n1. Pizza: 2 votes\n2. Sushi: 0 votes";
    assert_eq!(results.0, lunch_result);
    let dinner_result =
        "📊 Dinner?\nThe poll has ended. Top answer: Salad (1 vote).\n1. Soup: 0 votes\n2. Salad: 1 vote";
    assert_eq!(results.1, dinner_result);
    let started = polls[1]["origin_server_ts"].as_i64().expect("ts");
    let ended = of(dinner)["origin_server_ts"].as_i64().expect("ts");
    assert!(ended - started >= 60_000, "not before its end_after_secs: {}", ended - started);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_dm_a_bare_number_votes_and_the_result_is_posted_when_the_poll_ends() {
    let env = Env::start().await;
    env.llm.respond_with(move |request| {
        let last = request["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
        let said = last["content"].as_str().unwrap_or_default();
        if last["role"] == "user" && said.ends_with("poll me about tea") {
            return calls(&[("rich_poll", json!({"question": "Tea?", "answers": ["Green", "Black"]}))]);
        }
        if last["role"] == "user" && said.ends_with("close it") {
            let tea = listed(request, "Tea?").unwrap_or_default();
            return calls(&[("rich_poll_end", json!({"poll": tea}))]);
        }
        text("[no reply]")
    });
    let room = env.dm().await;
    env.alice.say(&room, "poll me about tea").await;
    env.wait_turns(&room, 1).await;
    env.alice.say(&room, "2").await;
    env.alice.say(&room, "close it").await;
    env.wait_turns(&room, 2).await;
    let requests = env.llm.requests();
    let results = tool_results(requests.last());
    assert_eq!(results[0]["result"], "Top answer: Black (1 vote).", "{results:?}");
    assert_eq!(asked(&requests), 2, "the number was a vote, not a question");
    eventually("the result posted", Duration::from_secs(60), || async {
        let events = env.alice.messages(&room).await;
        let mut posted = events.iter().filter(|e| e["sender"] == BOT).filter_map(|e| e["content"]["body"].as_str());
        posted.any(|b| b.starts_with("📊 Tea?\nThe poll has ended. Top answer: Black (1 vote).")).then_some(())
    })
    .await;
}
