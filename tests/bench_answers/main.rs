//! A benchmark, not a test: what a member reads when an ordinary instruction-tuned model
//! answers. Thirteen realistic questions in one DM (weather, a comparison table, a chart
//! of given numbers, a countdown, a recipe, code, a reminder, a follow-up, chit-chat,
//! another language, a poll, a question about an earlier message, and one in a second
//! room), answered by Qwen2.5-Coder-1.5B-Instruct on llama.cpp's `llama-server` (its own
//! chat template, Qwen's recommended sampling) through a real Synapse.
//!
//! Per question it prints: the seconds to the first message and to the turn's end, the
//! model requests and the prompt tokens the server evaluated (from its log), the tool
//! calls richbot ran (and how many it read from text the model wrote), and what the
//! member read: a rich message, clean text, a pseudo-call (a tool call written as text),
//! a leaked annotation (`[event_id: …]`, `[Now: …]`, `@user [$id]:`), or an empty body,
//! in any message or live edit the turn posted, and whether the answer is on topic (a
//! keyword). At the end: whether the reminder fired at its time, and the second room's
//! first question's evaluated share of its prompt (the tools and system prompt reused
//! from the first room's).
//!
//! Run it with `cargo test --release --test bench_answers` (`BENCH_SEED`, default 1;
//! `BENCH_SAMPLING=steady` samples nearly greedily instead of as Qwen recommends;
//! `LLAMA_VERBOSE=1` has the server log every prompt it is sent, in `target/llama/`;
//! `LLAMA_ARGS` adds the server's own flags, e.g. `--cache-ram 0`).
//! It takes 10-20 minutes on two cores. `cargo test` does not build or run it.

#[allow(dead_code)]
#[path = "../it/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::answers::{self, contents};
use support::qwen::{self, QWEN, Sampling};
use support::{BOT, Env, Options, User, eventually, room_id};

/// A question, and a word an on-topic answer holds (any of them, `|`-separated).
const QUESTIONS: &[(&str, &str)] = &[
    ("What's the weather like in Porto today?", "porto"),
    ("Compare Python, Rust and Go for web backends in a table.", "rust"),
    ("Chart these monthly sales: Jan 120, Feb 135, Mar 160, Apr 150.", "sales|jan"),
    ("How long is it until New Year 2027? Show me a countdown.", "2027"),
    ("Give me a simple pancake recipe.", "flour"),
    ("Write a Python function that reverses a string.", "def "),
    ("Remind me in 2 minutes to stretch.", "stretch|remind"),
    ("And how many pancakes does that recipe make?", "pancake"),
    ("Thanks, you're very helpful!", "welcome|glad|happy|pleasure|anytime"),
    ("Qual é a capital de Portugal?", "lisboa|lisbon"),
    ("Make a poll: pizza or sushi for lunch?", "pizza"),
    ("What was the first city I asked you about?", "porto"),
];
const REMINDER: usize = 6;

/// What the member read of one turn.
#[derive(Debug, Default)]
struct Read {
    rich: bool,
    pseudo_call: bool,
    annotation: bool,
    empty: bool,
    on_topic: bool,
    text: String,
}

fn read(all: &[Value], finals: &[Value], keyword: &str) -> Read {
    let mut r = Read::default();
    for c in all {
        let body = c["body"].as_str().unwrap_or_default();
        if c["msgtype"] == "m.notice" {
            continue;
        }
        r.pseudo_call |= answers::pseudo_call(body);
        r.annotation |= answers::annotation(body);
        // A poll's start has no body of its own (its text is in the poll's fields).
        r.empty |= answers::empty(body) && !answers::rich(c);
    }
    let shown: Vec<&Value> = finals.iter().filter(|c| c["msgtype"] != "m.notice").collect();
    r.rich = shown.iter().any(|c| answers::rich(c));
    r.text = shown.iter().filter_map(|c| c["body"].as_str()).collect::<Vec<_>>().join(" / ");
    let lower = r.text.to_lowercase();
    r.on_topic = keyword.split('|').any(|k| lower.contains(k));
    r
}

/// Whether `event` is the reminder asked for at `asked` (ms): the persona's message about
/// stretching, from 100 s on (asked for "in 2 minutes", posted within its minute).
fn is_reminder(event: &Value, asked: i64) -> bool {
    event["sender"] == BOT
        && event["content"]["body"].as_str().is_some_and(|b| b.to_lowercase().contains("stretch"))
        && event["origin_server_ts"].as_i64().is_some_and(|ts| ts >= asked + 100_000)
}

fn metric(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Asks `question` in `room` and waits for its turn (the `n`th in the room): the seconds
/// to the first message and to the end, and the calls the server made for it.
async fn ask(env: &Env, who: &User, room: &str, question: &str, n: usize) -> (f64, f64, i64) {
    let store = env.store().await;
    who.send(room, "m.room.message", serde_json::json!({"msgtype": "m.text", "body": question})).await;
    let started = Instant::now();
    let asked_at = richbot::clock::now_ms();
    let mut first = None;
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        if first.is_none()
            && who
                .messages(room)
                .await
                .iter()
                .any(|e| e["sender"] == BOT && e["origin_server_ts"].as_i64().unwrap_or(0) >= asked_at)
        {
            first = Some(started.elapsed().as_secs_f64());
        }
        // A reminder's posting is a turn of its own, not an answer.
        let turns = store.turn_outcomes(&room_id(room)).await.expect("turns");
        if turns.iter().filter(|t| t.0 != "scheduled").count() > n {
            break;
        }
        assert!(Instant::now() < deadline, "the turn of {question:?} never ended");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let end = started.elapsed().as_secs_f64();
    (first.unwrap_or(end), end, asked_at)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let seed: u64 = std::env::var("BENCH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    let steady = std::env::var("BENCH_SAMPLING").is_ok_and(|s| s == "steady");
    let llama = qwen::start(if steady { Sampling::Steady } else { Sampling::Recommended }, seed, 2).await;
    let lines = "idle_timeout_secs = 240\nmax_tokens = 1024\nstream = true\n".to_owned();
    let llm = Some((llama.base_url.clone(), QWEN.to_owned(), lines));
    let env = Env::start_with(Options { llm, llm_timeout_secs: 300, ..Default::default() }).await;
    let room = env.dm().await;
    println!(
        "| # | question | first s | final s | requests | evaluated | tools (written) | read | on topic | answer |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let (mut seen, mut shown_ok, mut bad) = (0, 0, (0, 0, 0));
    let mut reminder_asked = 0;
    for (n, (question, keyword)) in QUESTIONS.iter().enumerate() {
        let before = env.metrics().await;
        let (first, end, asked_at) = ask(&env, &env.alice, &room, question, n).await;
        if n == REMINDER {
            reminder_asked = asked_at;
        }
        let after = env.metrics().await;
        let calls = llama.calls();
        let mine = calls.get(seen..).unwrap_or_default();
        seen = calls.len();
        let evaluated: u64 = mine.iter().map(|c| c.evaluated).sum();
        let tools = metric(&after, "richbot_tool_calls_total") - metric(&before, "richbot_tool_calls_total");
        let written =
            metric(&after, "richbot_llm_written_calls_total") - metric(&before, "richbot_llm_written_calls_total");
        // The reminder's own posting is no answer to the question it falls in.
        let events: Vec<Value> = env
            .alice
            .messages(&room)
            .await
            .into_iter()
            .filter(|e| n == REMINDER || reminder_asked == 0 || !is_reminder(e, reminder_asked))
            .collect();
        let (all, finals) = contents(&events, asked_at);
        let r = read(&all, &finals, keyword);
        let what = match (r.pseudo_call, r.annotation, r.empty, r.rich) {
            (true, ..) => "pseudo-call",
            (_, true, ..) => "annotation",
            (_, _, true, _) => "empty",
            (.., true) => "rich",
            _ if finals.is_empty() => "nothing",
            _ => "clean text",
        };
        bad.0 += usize::from(r.pseudo_call);
        bad.1 += usize::from(r.annotation);
        bad.2 += usize::from(r.empty);
        if matches!(what, "rich") || (what == "clean text" && r.on_topic) {
            shown_ok += 1;
        }
        let text: String = r.text.chars().take(70).collect::<String>().replace(['\n', '|'], " ");
        println!(
            "| {} | {question} | {first:.1} | {end:.1} | {} | {evaluated} | {tools} ({written}) | {what} | {} | {text} |",
            n + 1,
            mine.len(),
            if r.on_topic { "yes" } else { "no" },
        );
    }
    // The reminder: posted by a schedule two minutes (give or take its minute) after it was
    // asked for.
    eventually("the reminder's time passes", Duration::from_secs(600), || async {
        (richbot::clock::now_ms() > reminder_asked + 200_000).then_some(())
    })
    .await;
    let events = env.alice.messages(&room).await;
    let reminder: Vec<i64> = events
        .iter()
        .filter(|e| is_reminder(e, reminder_asked))
        .filter_map(|e| e["origin_server_ts"].as_i64())
        .collect();
    let turns = env.store().await.turn_outcomes(&room_id(&room)).await.expect("turns");
    let scheduled = turns.iter().filter(|t| t.0 == "scheduled").count();
    // A second room of the same persona: its first question reuses the first room's prefix.
    let other = env.bob.create_room(&[BOT], true).await;
    env.wait_joined_seen_by(&env.bob, &other, BOT).await;
    let (_, second_end, _) = ask(&env, &env.bob, &other, "What is 12 times 12?", 0).await;
    let calls = llama.calls();
    let second = calls.get(seen..).and_then(|c| c.first()).copied();
    println!();
    println!(
        "summary: {shown_ok} of {} answers a rich message or clean on-topic text; pseudo-calls shown {}, leaked \
         annotations {}, empty bodies {}",
        QUESTIONS.len(),
        bad.0,
        bad.1,
        bad.2
    );
    println!(
        "reminder: {} scheduled turn(s); posted 'stretch' at {:?} s after it was asked",
        scheduled,
        reminder.iter().map(|ts| (ts - reminder_asked) / 1000).collect::<Vec<_>>()
    );
    if let Some(c) = calls.first() {
        println!("first question's prompt: {} tokens", c.prompt);
    }
    if let Some(s) = second {
        println!(
            "second room's first question: evaluated {} of {} prompt tokens ({:.0}%), {second_end:.1} s",
            s.evaluated,
            s.prompt,
            s.evaluated as f64 * 100.0 / s.prompt.max(1) as f64
        );
    }
}
