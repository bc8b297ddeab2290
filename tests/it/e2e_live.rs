//! Live answers against a real Synapse and a scripted model that streams (SSE): the first
//! message soon after the first token, with the live marker; edits at the pace; a final
//! edit with the whole text and no marker; a stream cut off part-way; a long answer in
//! several messages; text and a tool call in one reply, in order. It also measures how
//! soon the first text is visible (printed: run with `--nocapture`).

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::llm::Step;
use crate::support::{BOT, Env};

fn live(m: &Value) -> bool {
    m["content"].get("org.matrix.msc4357.live").is_some()
        || m["content"]["m.new_content"].get("org.matrix.msc4357.live").is_some()
}

fn is_edit(m: &Value) -> bool {
    m["content"]["m.relates_to"]["rel_type"] == "m.replace"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_is_shown_live_edited_at_the_pace_and_finished_without_the_marker() {
    let env = Env::start().await;
    // A bold sentence every three words: the first is shown as soon as it is complete,
    // and a snapshot taken inside a sentence (two times in three) closes its bold.
    let piece = |i: usize| match i % 3 {
        0 => format!("**word{i} "),
        1 => format!("word{i} "),
        _ => format!("word{i}**. "),
    };
    let pieces: Vec<String> = (0..39).map(piece).collect();
    let whole: String = pieces.concat().trim().to_owned();
    env.llm.script([Step::Pieces(pieces, Duration::from_millis(200))]);
    let dm = env.dm().await;
    env.alice.say(&dm, "tell me a long story").await;
    env.wait_turns(&dm, 1).await;
    let posted = env.alice.messages_from(&dm, BOT).await;
    let first = posted.first().expect("a first message");
    assert!(live(first), "the first message carries the live marker: {first}");
    let first_piece = env.llm.first_pieces()[0];
    let visible = first["origin_server_ts"].as_i64().expect("ts") - first_piece;
    assert!(visible <= 1_500, "visible {visible} ms after the first token");
    let edits: Vec<&Value> = posted.iter().filter(|m| is_edit(m)).collect();
    assert!(!edits.is_empty() && edits.len() <= 5, "coalesced, at most 8 s / 2.5 s + 2: {}", edits.len());
    let times: Vec<i64> =
        std::iter::once(first).chain(edits.iter().copied()).filter_map(|m| m["origin_server_ts"].as_i64()).collect();
    assert!(times.windows(2).all(|w| w[1] - w[0] >= 2_450), "writes to one message 2.5 s apart: {times:?}");
    // An unclosed `**` would show as literal asterisks, in the HTML and in the plain body.
    let snapshots: Vec<&Value> = std::iter::once(&first["content"])
        .chain(edits.iter().filter(|e| live(e)).map(|e| &e["content"]["m.new_content"]))
        .collect();
    let html = |c: &Value| c["formatted_body"].as_str().unwrap_or_default().to_owned();
    assert!(html(snapshots[0]).ends_with("word2</strong>.</p>"), "a whole first sentence: {}", html(snapshots[0]));
    let shown = |c: &Value| format!("{}{}", c["body"].as_str().unwrap_or_default(), html(c));
    assert!(snapshots.iter().all(|c| !shown(c).contains("**")), "bold closed in every snapshot: {snapshots:#?}");
    let last = edits.last().expect("a final edit");
    assert!(!live(last), "the final edit has no live marker");
    let final_content = &last["content"]["m.new_content"];
    assert_eq!(final_content["org.richbot.source"], whole.as_str(), "the whole answer, exactly");
    assert_eq!(final_content["body"], whole.replace("**", ""), "as plain text");
    assert!(edits[..edits.len() - 1].iter().all(|e| live(e)), "edits before the last are live");
    assert_eq!(env.wait_turns(&dm, 1).await[0].0, "answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_off_part_way_ends_with_the_text_so_far_and_a_note() {
    let env = Env::start().await;
    let pieces: Vec<String> = ["The first half. ", "Then more ", "and more "].iter().map(|s| (*s).to_owned()).collect();
    env.llm.script([Step::Cut(pieces, Duration::from_millis(400))]);
    let dm = env.dm().await;
    env.alice.say(&dm, "go on").await;
    let turns = env.wait_turns(&dm, 1).await;
    assert!(turns[0].0.starts_with("llm_failed"), "{}", turns[0].0);
    let posted = env.alice.messages_from(&dm, BOT).await;
    let last = posted.last().expect("a last write");
    assert!(!live(last), "never left live: {last}");
    let body = if is_edit(last) { &last["content"]["m.new_content"]["body"] } else { &last["content"]["body"] };
    let body = body.as_str().expect("body");
    assert!(body.starts_with("The first half. Then more and more") && body.contains("cut short"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_answer_arrives_in_several_messages_in_order_and_text_before_a_tool_call_lands_first() {
    let env = Env::start().await;
    let paragraph = "All work and no play makes a very long answer. ".repeat(40);
    let long: String = (0..85).map(|i| format!("{i}: {paragraph}")).collect::<Vec<_>>().join("\n\n");
    assert!(long.len() > 150_000);
    let weather = json!({"payload": {"v": 1, "blocks": [{"type": "weather", "location": "Lisbon", "temp": 21}]}, "fallback": "Lisbon 21 °C"});
    env.llm.script([
        Step::Pieces(vec![long.clone()], Duration::from_millis(10)),
        Step::Say("Here is the weather:".into(), vec![("rich_send".into(), weather.to_string())]),
        Step::Text("That is all.".into()),
    ]);
    let dm = env.dm().await;
    env.alice.say(&dm, "a very long answer, please").await;
    env.wait_turns(&dm, 1).await;
    let parts: Vec<Value> = env.alice.messages_from(&dm, BOT).await.into_iter().filter(|m| !is_edit(m)).collect();
    assert!(parts.len() >= 10, "150 KB in parts of at most 16 KB: {}", parts.len());
    assert!(parts.iter().all(|m| m["content"].to_string().len() < 61_440), "each within one event");
    let text: Vec<&str> = parts.iter().filter_map(|m| m["content"]["body"].as_str()).collect();
    assert_eq!(
        text.join("\n\n").split_whitespace().collect::<Vec<_>>(),
        long.split_whitespace().collect::<Vec<_>>(),
        "in order, nothing lost"
    );

    env.alice.say(&dm, "and the weather?").await;
    env.wait_turns(&dm, 2).await;
    let after: Vec<Value> =
        env.alice.messages_from(&dm, BOT).await.into_iter().filter(|m| !is_edit(m)).skip(parts.len()).collect();
    let bodies: Vec<&str> = after.iter().filter_map(|m| m["content"]["body"].as_str()).collect();
    assert_eq!(bodies, ["Here is the weather:", "Lisbon 21 °C", "That is all."], "text, then the card, then the rest");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_visible_text_after_the_first_token() {
    let env = Env::start().await;
    let dm = env.dm().await;
    let mut delays = Vec::new();
    for i in 0..8 {
        let pieces = vec![format!("Answer {i}. "), "It goes on ".into(), "a little.".into()];
        env.llm.script([Step::Pieces(pieces, Duration::from_millis(400))]);
        env.alice.say(&dm, &format!("question {i}")).await;
        env.wait_turns(&dm, i + 1).await;
        let first_piece = env.llm.first_pieces()[i];
        let shown = env
            .alice
            .messages_from(&dm, BOT)
            .await
            .into_iter()
            .filter(|m| !is_edit(m))
            .nth(i)
            .and_then(|m| m["origin_server_ts"].as_i64())
            .expect("a message");
        delays.push(shown - first_piece);
    }
    delays.sort_unstable();
    let p50 = delays[delays.len() / 2];
    let p99 = delays[delays.len() - 1];
    eprintln!("first visible text after the first token: p50 {p50} ms, p99 {p99} ms (n = {})", delays.len());
    assert!(p99 <= 1_500, "{delays:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_runs_long_is_named_on_the_answer_then_taken_back() {
    let opts = crate::support::Options { extra_toml: "[bot]\nedit_interval_ms = 3000\n".into(), ..Default::default() };
    let env = Env::start_with(opts).await;
    let tracker = |step: &str| json!({"v": 1, "blocks": [{"type": "details", "summary": "Order", "body": step}]});
    env.llm.respond_with(move |req| {
        let results: Vec<Value> = req["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "tool")
            .filter_map(|m| serde_json::from_str(m["content"].as_str()?).ok())
            .collect();
        match results.len() {
            0 => crate::support::llm::call("rich_send", json!({"payload": tracker("packed"), "fallback": "Order: packed"})),
            1 => {
                let edit = |step: &str| {
                    json!({"event_id": results[0]["event_id"], "payload": tracker(step), "fallback": format!("Order: {step}")})
                        .to_string()
                };
                Step::Say(
                    "Updating the tracker now.".into(),
                    vec![("rich_edit".into(), edit("shipped")), ("rich_edit".into(), edit("delivered"))],
                )
            }
            _ => Step::Text("[no reply]".into()),
        }
    });
    let dm = env.dm().await;
    env.alice.say(&dm, "where is my order?").await;
    env.wait_turns(&dm, 1).await;
    let posted = env.alice.messages_from(&dm, BOT).await;
    let answer = posted.iter().find(|m| m["content"]["body"] == "Updating the tracker now.").expect("the answer");
    let id = answer["event_id"].as_str().expect("id");
    let edits: Vec<&Value> =
        posted.iter().filter(|m| is_edit(m) && m["content"]["m.relates_to"]["event_id"] == id).collect();
    let noted = edits
        .iter()
        .position(|e| e["content"]["m.new_content"]["body"].as_str().is_some_and(|b| b.contains("running rich_edit")))
        .expect("the running tool was named on the answer");
    assert!(live(edits[noted]), "while it runs, the answer is live again");
    let last = edits.last().expect("edits");
    assert!(edits.len() > noted + 1 && !live(last), "then taken back for good");
    assert_eq!(last["content"]["m.new_content"]["body"], "Updating the tracker now.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_that_refuses_streaming_is_remembered_and_answered_without_it() {
    let env = Env::start().await;
    env.llm.refuse_streaming();
    env.llm.respond_with(|_| Step::Text("Plain, not streamed.".into()));
    let dm = env.dm().await;
    env.alice.say(&dm, "first").await;
    env.wait_turns(&dm, 1).await;
    env.alice.say(&dm, "second").await;
    env.wait_turns(&dm, 2).await;
    let streamed: Vec<bool> = env.llm.requests().iter().map(|r| r["stream"] == true).collect();
    assert_eq!(streamed, [true, false, false], "refused once, then asked without streaming");
    let answers = env.alice.messages_from(&dm, BOT).await;
    assert_eq!(answers.len(), 2, "{answers:#?}");
    assert!(answers.iter().all(|m| m["content"]["body"] == "Plain, not streamed." && !live(m)));
}

/// What a message reads as in the end: the text of the last write to it (its last edit,
/// or itself), whether that write is live, and the messages in the order they were posted.
fn final_texts(posted: &[Value]) -> Vec<(String, bool)> {
    let mut out: Vec<(String, String, bool)> = Vec::new();
    for m in posted {
        if is_edit(m) {
            let target = m["content"]["m.relates_to"]["event_id"].as_str().unwrap_or_default();
            if let Some(slot) = out.iter_mut().find(|(id, _, _)| id == target) {
                slot.1 = m["content"]["m.new_content"]["body"].as_str().unwrap_or_default().to_owned();
                slot.2 = live(m);
            }
        } else {
            let id = m["event_id"].as_str().unwrap_or_default().to_owned();
            out.push((id, m["content"]["body"].as_str().unwrap_or_default().to_owned(), live(m)));
        }
    }
    out.into_iter().map(|(_, text, live)| (text, live)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_streamed_answers_of_prose_and_of_angle_bracket_code_arrive_whole_and_none_is_left_live() {
    let env = Env::start().await;
    let dm = env.dm().await;
    // 16 KB of prose, then 12 KB of `<`-heavy code: each nears or passes what one edit
    // can carry (an edit holds the text twice; `<` is four bytes of HTML).
    let prose = "The quick brown fox jumps over the lazy dog again and again. ".repeat(270);
    let code = format!("```html\n{}```", "<td><b>a</b>&lt;</td>\n".repeat(560));
    assert!(prose.len() >= 16_000 && code.len() >= 12_000);
    for (i, answer) in [&prose, &code].into_iter().enumerate() {
        let pieces: Vec<String> =
            answer.as_bytes().chunks(800).map(|c| String::from_utf8_lossy(c).into_owned()).collect();
        env.llm.script([Step::Pieces(pieces, Duration::from_millis(150))]);
        env.alice.say(&dm, "a long one, please").await;
        let turns = env.wait_turns(&dm, i + 1).await;
        assert_eq!(turns[i].0, "answered", "{turns:?}");
    }
    let texts = final_texts(&env.alice.messages_from(&dm, BOT).await);
    assert!(texts.iter().all(|(_, live)| !live), "no message is left live: {texts:?}");
    let said: String = texts.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>().join("\n");
    // A body is plain text: the code's fences are not in it (its parts are each fenced).
    let words = |s: &str| s.split_whitespace().filter(|w| !w.starts_with("```")).map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(words(&said), words(&format!("{prose}\n{code}")), "both answers, whole and in order");
    assert!(texts.len() > 2, "each was cut into parts that fit an edit: {}", texts.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_refused_on_a_streamed_chat_request_is_told_as_misconfiguration() {
    let env = Env::start().await;
    // The models list answers; only chat requests are refused, streamed as they are asked.
    env.llm.respond_with(|_| Step::Status(401));
    let dm = env.dm().await;
    env.alice.say(&dm, "hello?").await;
    let turns = env.wait_turns(&dm, 1).await;
    assert!(turns[0].0.starts_with("misconfigured: ") && turns[0].0.contains("refused the API key"), "{}", turns[0].0);
    let said = env.alice.messages_from(&dm, BOT).await;
    let body = said[0]["content"]["body"].as_str().unwrap_or_default();
    assert!(body.contains("misconfigured") && !body.contains("try again in a little while"), "{body}");
    assert_eq!(env.llm.requests()[0]["stream"], true, "the request streamed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_and_unfinished_streams_are_billed_and_an_unfinished_one_says_it_was_cut() {
    let env = Env::start().await;
    let dm = env.dm().await;
    let text = "Some text that streams for a while. ".repeat(40);
    let pieces: Vec<String> = text.as_bytes().chunks(360).map(|c| String::from_utf8_lossy(c).into_owned()).collect();
    env.llm.script([Step::Cut(pieces.clone(), Duration::from_millis(50))]);
    env.alice.say(&dm, "go").await;
    env.wait_turns(&dm, 1).await;
    let store = env.store().await;
    let alice = crate::support::user_id("@alice:localhost");
    let after_cut = store.day_use(&alice, richbot::clock::now_ms()).await.expect("use").tokens;
    assert!(after_cut >= (text.len() / 4) as u64, "a cut stream costs its prompt and what streamed: {after_cut}");

    // A stream that closes without saying it finished is cut too, not posted as whole.
    env.llm.script([Step::Unfinished(pieces, Duration::from_millis(50))]);
    env.alice.say(&dm, "again").await;
    let turns = env.wait_turns(&dm, 2).await;
    assert!(turns[1].0.starts_with("llm_failed"), "{turns:?}");
    let texts = final_texts(&env.alice.messages_from(&dm, BOT).await);
    let (last, live) = texts.last().expect("an answer");
    assert!(!live && last.contains("cut short"), "{last}");
    let after = store.day_use(&alice, richbot::clock::now_ms()).await.expect("use").tokens;
    assert!(after >= after_cut + (text.len() / 4) as u64, "billed as well: {after} after {after_cut}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_deadline_during_a_stream_finishes_the_live_message_with_the_text_so_far() {
    let env = Env::start_with(crate::support::Options {
        extra_toml: "[limits]\nturn_deadline_secs = 4\n".into(),
        ..Default::default()
    })
    .await;
    let pieces: Vec<String> = (0..60).map(|i| format!("Sentence {i}. ")).collect();
    env.llm.script([Step::Pieces(pieces, Duration::from_millis(300))]);
    let dm = env.dm().await;
    env.alice.say(&dm, "a slow one").await;
    let turns = env.wait_turns(&dm, 1).await;
    assert_eq!(turns[0].0, "deadline");
    let posted = env.alice.messages_from(&dm, BOT).await;
    let texts = final_texts(&posted);
    let (answer, live) = &texts[0];
    assert!(!live, "not left live: {answer}");
    assert!(answer.starts_with("Sentence 0. Sentence 1.") && answer.contains("cut short"), "{answer}");
    assert_eq!(posted.last().expect("the notice")["content"]["msgtype"], "m.notice", "then the deadline notice");
}
