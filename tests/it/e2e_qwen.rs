//! Against a genuine instruction-tuned model: Qwen2.5-Coder-1.5B-Instruct on llama.cpp's
//! `llama-server` with its own chat template (`support::qwen`), and a real Synapse. It is
//! the model an admin would try first on a small CPU, and it writes tool calls as text,
//! copies what its prompt shows and promises what it did not do, so here what a member
//! reads is judged, not just the wire. One DM, three questions in a row, with nearly
//! greedy sampling (the same answers for the same prompt): a rich message, a reminder that
//! really fires, and a follow-up, none of them showing the member a written call, a
//! copied annotation or an empty body. A long test (two to four minutes on two cores: one
//! model, a cold prompt of ~1,400 tokens, and the minute the reminder waits), run once, on
//! SQLite. `tests/bench_answers` asks a dozen more questions, on demand.

use std::time::Duration;

use serde_json::Value;

use crate::support::answers::{contents, rich, unfit};
use crate::support::qwen::{self, QWEN, Sampling};
use crate::support::{Env, Options, eventually, room_id};

/// Waits (generously: a real model on a busy CPU) for the `n`th turn in `room` to end,
/// and returns what the persona posted there since `since` (ms): every content, and each
/// message's latest.
async fn answered(env: &Env, room: &str, n: usize, since: i64) -> (Vec<Value>, Vec<Value>) {
    let store = env.store().await;
    eventually(&format!("turn {n} answered by the model"), Duration::from_secs(900), || async {
        (store.turn_outcomes(&room_id(room)).await.expect("turns").len() >= n).then_some(())
    })
    .await;
    contents(&env.alice.messages(room).await, since)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordinary_model_answers_richly_sets_a_reminder_that_fires_and_leaks_nothing() {
    let llama = qwen::start(Sampling::Steady, 1).await;
    let lines = "stream = true\nmax_tokens = 1024\n".to_owned();
    let llm = Some((llama.base_url.clone(), QWEN.to_owned(), lines));
    // richbot's default time limit (60 s of silence): a cold first prompt on a busy
    // machine is waited for while llama.cpp pings (every 30 s) as it reads it.
    let env = Env::start_with(Options { llm, llm_timeout_secs: 60, ..Default::default() }).await;
    let room = env.dm().await;
    let log = llama.log.display();

    // A table: this model writes the rich message's arguments out as JSON, and richbot
    // runs them as the call.
    let asked = richbot::clock::now_ms();
    env.alice.say(&room, "Compare Python, Rust and Go for web backends in a table.").await;
    let (all, finals) = answered(&env, &room, 1, asked).await;
    assert_eq!(unfit(&all), None, "{all:#?}\n(server log: {log})");
    assert!(finals.iter().any(rich), "a rich message: {finals:#?}\n(server log: {log})");

    // A reminder: made by a schedule call (a promise in words is sent back, and the model
    // is asked for the call), never claimed without one.
    let asked = richbot::clock::now_ms();
    env.alice.say(&room, "Remind me in 1 minute to stretch.").await;
    let (all, _) = answered(&env, &room, 2, asked).await;
    assert_eq!(unfit(&all), None, "{all:#?}\n(server log: {log})");
    let store = env.store().await;
    let set = store.active_schedules(None, Some(&room_id(&room))).await.expect("schedules");
    assert_eq!(set.len(), 1, "the reminder was set: {all:#?}\n(server log: {log})");
    let (reminder, due) = (set[0].id, set[0].next_at.expect("a time"));

    // A follow-up while the reminder waits: an answer, clean.
    let asked = richbot::clock::now_ms();
    env.alice.say(&room, "Thanks! What's a good stretch for the back?").await;
    let (all, finals) = answered(&env, &room, 3, asked).await;
    assert_eq!(unfit(&all), None, "{all:#?}\n(server log: {log})");
    assert!(!finals.is_empty(), "answered: {all:#?}\n(server log: {log})");

    // The reminder, posted by its schedule in the DM at its time.
    eventually("the reminder is posted", Duration::from_secs(300), || async {
        let fired = store.schedule(reminder).await.expect("schedule").is_some_and(|s| s.fired >= 1);
        fired.then_some(())
    })
    .await;
    let (all, _) = contents(&env.alice.messages(&room).await, due.min(richbot::clock::now_ms()) - 5_000);
    assert!(!all.is_empty(), "the reminder's message");
    assert_eq!(unfit(&all), None, "{all:#?}\n(server log: {log})");
}
