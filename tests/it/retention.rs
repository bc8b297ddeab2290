//! Retention on a fresh database: history older than `bot.history_days` and what derives
//! from it go (pending events and running turns stay, whatever their age; voice messages'
//! words with their history), token use and audio seconds go after the budgets' day, a
//! finished turn keeps no record of its replies or tool results, a turn is finished once,
//! and a redaction scrubs a running turn's record at once.

use std::time::Duration;

use richbot::store::{Budgets, NewSent, Store, TurnRecord};
use ruma::{event_id, room_id, user_id};
use serde_json::json;

use crate::support::message;
use crate::support::postgres::database_url;

const DAY: i64 = 86_400_000;
const NOW: i64 = 1_800_000_000_000;

async fn store() -> (Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = database_url(dir.path(), "r.db").await;
    (Store::open(&url).await.expect("open"), dir)
}

fn sent<'a>(id: &'a ruma::EventId, at: i64, content: &'a serde_json::Value) -> NewSent<'a> {
    NewSent {
        event_id: id,
        room_id: room_id!("!r:x"),
        sender: user_id!("@bot:x"),
        thread_root: None,
        replaces: None,
        content,
        sent_at: at,
        next_edit_at: at + 2_500,
    }
}

#[tokio::test]
async fn history_past_the_retention_goes_with_what_derives_from_it_and_the_rest_stays() {
    let (s, _dir) = store().await;
    let (room, bot, alice) = (room_id!("!r:x"), user_id!("@bot:x"), user_id!("@alice:x"));
    let old = NOW - 40 * DAY;
    let mut done_old = message("$old", "!r:x");
    done_old.processed = true;
    s.insert_events(&[done_old, message("$old_pending", "!r:x")], old).await.expect("old events");
    let mut fresh = message("$fresh", "!r:x");
    fresh.processed = true;
    s.insert_events(&[fresh], NOW - DAY).await.expect("new events");
    let finished = s.start_turn(room, bot, alice, &[], None, old).await.expect("turn");
    s.record_reply(finished.id, 1, "{}").await.expect("reply");
    let record =
        TurnRecord { outcome: "answered".into(), rounds: 1, prompt_tokens: 1, completion_tokens: 1, cached_tokens: 0 };
    assert!(s.finish_turn(finished.id, &record, old + 1).await.expect("finish"));
    assert!(s.replies(finished.id).await.expect("replies").is_empty(), "a finished turn keeps no replies");
    assert!(!s.finish_turn(finished.id, &record, old + 2).await.expect("again"), "finished once");
    let running = s.start_turn(room, bot, alice, &[], None, old).await.expect("turn");
    let content = json!({"body": "x"});
    s.record_sent(&sent(event_id!("$sent_old"), old, &content)).await.expect("sent");
    s.record_sent(&sent(event_id!("$sent_new"), NOW - DAY, &content)).await.expect("sent");
    let budgets = Budgets { per_user: 0, per_room: 0, total: 0 };
    s.reserve_tokens(alice, room, 10, budgets, NOW - 3 * DAY).await.expect("reserve").expect("room");
    s.reserve_tokens(alice, room, 20, budgets, NOW - 1_000).await.expect("reserve").expect("room");
    // Voice messages' words, and the seconds counted for the audio budget.
    s.record_transcript(room, event_id!("$voice_old"), alice, "old words", 4, old).await.expect("words");
    s.record_transcript(room, event_id!("$voice_new"), alice, "new words", 3, NOW - 1_000).await.expect("words");
    s.record_transcript(room, event_id!("$voice_new"), alice, "again", 3, NOW - 500).await.expect("once");
    assert_eq!(s.audio_seconds_today(alice, NOW).await.expect("seconds"), 3, "a word kept once, counted once");

    let pruned = s.prune(Duration::from_secs(30 * 86_400), NOW).await.expect("prune");
    assert_eq!((pruned.events, pruned.turns, pruned.sent, pruned.usage), (1, 1, 1, 1), "{pruned:?}");
    // (What a persona sent is in the history too, from when it was recorded.)
    let left: Vec<String> = s.room_events(room).await.expect("events").iter().map(|e| e.event_id.to_string()).collect();
    let received: Vec<&String> = left.iter().filter(|id| !id.starts_with("$sent")).collect();
    assert_eq!(received, ["$old_pending", "$fresh"], "a pending event stays, however old");
    assert!(s.unfinished_turn(room).await.expect("query").is_some_and(|(t, _)| t.id == running.id));
    assert!(s.sent_message(event_id!("$sent_old")).await.expect("query").is_none());
    assert!(s.sent_message(event_id!("$sent_new")).await.expect("query").is_some());
    assert_eq!(s.day_use(alice, NOW).await.expect("use").tokens, 20);
    let voices = [event_id!("$voice_old"), event_id!("$voice_new")];
    let words = s.transcripts(room, &voices).await.expect("words");
    assert_eq!(words.into_iter().collect::<Vec<_>>(), [(voices[1].to_owned(), ("new words".to_owned(), 3))]);
    assert_eq!(s.audio_seconds_today(alice, NOW).await.expect("seconds"), 3);
    assert_eq!(s.prune(Duration::from_secs(30 * 86_400), NOW).await.expect("again"), Default::default());
}

#[tokio::test]
async fn a_redaction_scrubs_a_running_turns_record_of_replies_and_tool_results() {
    let (s, _dir) = store().await;
    let (room, bot, alice) = (room_id!("!r:x"), user_id!("@bot:x"), user_id!("@alice:x"));
    s.insert_events(&[message("$q", "!r:x"), message("$other", "!r:x")], NOW).await.expect("events");
    let seqs: Vec<i64> = s.pending_events(room).await.expect("pending").iter().take(1).map(|e| e.seq).collect();
    let turn = s.start_turn(room, bot, alice, &seqs, None, NOW).await.expect("turn");
    s.record_reply(turn.id, 1, "{\"text\": \"quoting the secret\"}").await.expect("reply");
    s.record_tool_result(turn.id, 0, "the file's contents").await.expect("result");
    s.scrub_turn_records(room, event_id!("$other"), None).await.expect("scrub");
    assert_eq!(s.replies(turn.id).await.expect("replies").len(), 1, "another event's redaction leaves it");
    // At the door, only the sender's own redaction scrubs (another's waits for the check
    // of its power, in the room's worker).
    s.scrub_turn_records(room, event_id!("$q"), Some(user_id!("@mallory:x"))).await.expect("scrub");
    assert_eq!(s.replies(turn.id).await.expect("replies").len(), 1, "not by someone else at the door");
    s.scrub_turn_records(room, event_id!("$q"), None).await.expect("scrub");
    assert!(s.replies(turn.id).await.expect("replies").is_empty());
    assert_eq!(s.tool_result(turn.id, 0).await.expect("result"), None);
}
