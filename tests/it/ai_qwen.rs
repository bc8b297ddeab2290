//! Against a genuine instruction-tuned model: Qwen2.5-Coder-1.5B-Instruct on llama.cpp's
//! `llama-server` (`support::qwen`), nearly greedy with a fixed seed, and a real Synapse.
//! It writes its tool calls as text, copies what its prompt shows, and says it did what
//! it did not: what it says varies with the prompt (the time, the ids), so these tests
//! hold richbot's guarantees, not the model's quality: a member never reads a call
//! written out, an annotation or an empty message; a reminder asked for is set (by the
//! model's call, or filled in when it only promised or declined) and fires; a written
//! call is run as the call. One conversation, a few minutes on two
//! busy cores (a cold prompt of about 1,400 tokens takes 30-60 s there on two threads; the
//! lane runs on one, beside the rest of the suite).

use std::time::Duration;

use serde_json::Value;

use crate::support::answers::{self, contents};
use crate::support::qwen::{self, QWEN, Sampling};
use crate::support::{BOT, Env, Options, eventually, room_id};

/// Asks `question` as alice and waits for its turn to end: what the persona posted for
/// it, every body and each message's latest content.
async fn ask(env: &Env, room: &str, question: &str) -> (i64, Vec<Value>, Vec<Value>) {
    let store = env.store().await;
    // Turns that answered members (a reminder's posting is a turn of its own).
    let answered = || async {
        let turns = store.turn_outcomes(&room_id(room)).await.expect("turns");
        turns.iter().filter(|t| t.0 != "scheduled").count()
    };
    let before = answered().await;
    let asked_at = richbot::clock::now_ms();
    env.alice.say(room, question).await;
    eventually(&format!("the turn of {question:?}"), Duration::from_secs(1300), || async {
        (answered().await > before).then_some(())
    })
    .await;
    let (all, finals) = contents(&env.alice.messages(room).await, asked_at);
    (asked_at, all, finals)
}

/// Nothing a member must never read: a call written out, a copied annotation, an empty
/// body, in any message or live edit.
fn assert_clean(all: &[Value], log: &std::path::Path) {
    for c in all.iter().filter(|c| c["msgtype"] != "m.notice") {
        let body = c["body"].as_str().unwrap_or_default();
        assert!(!answers::pseudo_call(body), "a call written out was shown: {body:?} (server log: {})", log.display());
        assert!(!answers::annotation(body), "an annotation was shown: {body:?} (server log: {})", log.display());
        assert!(!answers::empty(body), "an empty message was shown: {all:#?} (server log: {})", log.display());
    }
}

fn metric(metrics: &str, name: &str) -> u64 {
    metrics.lines().filter(|l| l.starts_with(name)).filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok()).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qwen_sets_a_reminder_that_fires_and_no_answer_shows_a_raw_call_an_annotation_or_nothing() {
    let llama = qwen::start(Sampling::Steady, 1, 1).await;
    let lines = "idle_timeout_secs = 240\nmax_tokens = 512\nstream = true\n".to_owned();
    let llm = Some((llama.base_url.clone(), QWEN.to_owned(), lines));
    // A turn of a few requests on one busy core: more than the default five minutes.
    let extra_toml = "[limits]\nturn_deadline_secs = 1200\n".to_owned();
    let env = Env::start_with(Options { llm, llm_timeout_secs: 600, extra_toml, ..Default::default() }).await;
    let room = env.dm().await;

    // A reminder: set by a call (made, written or filled in when the answer only promised
    // it), and posted when its time comes.
    let (asked_at, all, finals) = ask(&env, &room, "Remind me in 30 seconds to stretch.").await;
    assert_clean(&all, &llama.log);
    assert!(!finals.is_empty(), "the member was answered");
    let store = env.store().await;
    let set = store.active_schedules(None, Some(&room_id(&room))).await.expect("schedules");
    let fired = metric(&env.metrics().await, "richbot_schedules_fired_total");
    assert!(set.len() == 1 || fired == 1, "the reminder was set: {finals:#?} (server log: {})", llama.log.display());
    eventually("the reminder fires", Duration::from_secs(300), || async {
        (metric(&env.metrics().await, "richbot_schedules_fired_total") == 1).then_some(())
    })
    .await;
    let reminded = env.alice.messages_from(&room, BOT).await;
    let at = reminded.last().and_then(|e| e["origin_server_ts"].as_i64()).unwrap_or_default();
    assert!(at >= asked_at + 25_000, "posted at its time, not before: {} s", (at - asked_at) / 1000);

    // A chart of given numbers: whatever the model makes of it (in three runs here: a
    // rich message from a call written as text, once; a garbled sentence, once; the
    // benchmark measures which), nothing raw reaches the member, and a rich message the
    // model's call (made or written) posted is what the member reads.
    const POSTED: &str = "richbot_tool_calls_total{tool=\"rich_send\",result=\"ok\"}";
    let before = metric(&env.metrics().await, POSTED);
    let (_, all, finals) = ask(&env, &room, "Chart these monthly sales: Jan 120, Feb 135, Mar 160, Apr 150.").await;
    assert_clean(&all, &llama.log);
    assert!(!finals.is_empty(), "the member was answered");
    let posted = metric(&env.metrics().await, POSTED) - before;
    assert!(posted == 0 || finals.iter().any(answers::rich), "a posted rich message is read: {finals:#?}");

    // A follow-up: the model sees its earlier answers as clean text, with no ids to copy.
    let (_, all, finals) = ask(&env, &room, "Thanks! What did I ask you to remind me about?").await;
    assert_clean(&all, &llama.log);
    assert!(!finals.is_empty(), "the member was answered");
}
