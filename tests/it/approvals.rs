//! Approvals in the store, on a fresh database: a decision counts only when the asker's
//! reaction was sent before the deadline (however soon it arrives), it is spent by one
//! run of the call, and a call whose approved run was cut off is a new ask, with its own
//! notice, never the old decision again.

use richbot::approval::Approvals;
use richbot::store::Store;
use ruma::{event_id, room_id, user_id};
use serde_json::json;

use crate::support::postgres::database_url;

async fn store() -> (Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = database_url(dir.path(), "a.db").await;
    (Store::open(&url).await.expect("open"), dir)
}

/// A turn of Alice's in `!r:x`, started now: its id, and now (ms).
async fn alices_turn(s: &Store) -> (i64, i64) {
    let now = richbot::clock::now_ms();
    let turn = s.start_turn(room_id!("!r:x"), user_id!("@bot:x"), user_id!("@alice:x"), &[], None, now).await;
    (turn.expect("turn").id, now)
}

/// The asker's ✅ to `notice`, sent at `sent_at` (ms).
fn check_mark(id: &str, notice: &str, sent_at: i64) -> richbot::store::NewEvent {
    let mut e = crate::support::message(id, "!r:x");
    e.event_type = "m.reaction".into();
    e.origin_ts = sent_at;
    e.event = json!({"type": "m.reaction", "content": {"m.relates_to": {
        "rel_type": "m.annotation", "event_id": notice, "key": "✅"}}})
    .to_string();
    e
}

#[tokio::test]
async fn a_check_mark_sent_after_the_deadline_never_counts_and_one_sent_before_does() {
    let (s, _dir) = store().await;
    let (turn, now) = alices_turn(&s).await;
    let new = |nth| crate::support::approval(turn, nth, now);
    let late = s.open_approval(&new(0)).await.expect("open");
    s.set_approval_notice(late.id, event_id!("$late")).await.expect("notice");
    let in_time = s.open_approval(&new(1)).await.expect("open");
    s.set_approval_notice(in_time.id, event_id!("$in_time")).await.expect("notice");
    let approvals = Approvals::new(s.clone());
    let mut events = [check_mark("$yes1", "$late", now + 60_001), check_mark("$yes2", "$in_time", now + 60_000)];
    approvals.at_door(&mut events).await.expect("door");
    assert!(events.iter().all(|e| e.processed), "both are settled at the door");
    let decision = |id| {
        let s = s.clone();
        async move { s.approval(id).await.expect("read").expect("there").decision }
    };
    assert_eq!(decision(late.id).await, None, "sent a millisecond late: not a decision");
    assert_eq!(decision(in_time.id).await.as_deref(), Some("allow"));
}

#[tokio::test]
async fn an_approval_is_spent_by_one_run_and_the_next_ask_is_a_new_attempt() {
    let (s, _dir) = store().await;
    let (turn, now) = alices_turn(&s).await;
    let new = crate::support::approval(turn, 0, now);
    let first = s.open_approval(&new).await.expect("open");
    assert_eq!(s.open_approval(&new).await.expect("again").id, first.id, "a resumed wait finds its approval");
    assert!(s.decide_approval(first.id, "allow", None, now).await.expect("decide"));
    assert!(s.use_approval(first.id, now).await.expect("use"), "the run spends it");
    assert!(!s.use_approval(first.id, now).await.expect("use"), "once");
    assert!(!s.tool_started(turn, 0).await.expect("started"));
    s.start_tool(turn, 0, now).await.expect("start");
    assert!(s.tool_started(turn, 0).await.expect("started"));
    // The run was cut off: the call is asked again, as a new attempt with no decision.
    let second = s.open_approval(&new).await.expect("open");
    assert_ne!(second.id, first.id);
    assert_eq!((second.attempt, second.decision.clone(), second.notice_event.clone()), (1, None, None));
    assert_eq!(s.approval(first.id).await.expect("read").expect("kept").decision.as_deref(), Some("allow"));
}

#[tokio::test]
async fn a_check_mark_stored_before_its_notice_was_recorded_decides_the_wait() {
    let (s, _dir) = store().await;
    let (turn, now) = alices_turn(&s).await;
    let opened = s.open_approval(&crate::support::approval(turn, 0, now)).await.expect("open");
    // The notice went out, richbot was killed before recording it, and the asker's ✅
    // arrived at the door of the next run before the resumed turn recorded it.
    let approvals = Approvals::new(s.clone());
    let mut events = [check_mark("$yes", "$notice", now + 1)];
    approvals.at_door(&mut events).await.expect("door");
    assert!(!events[0].processed, "not known as an approval's reaction yet");
    s.insert_events(&events, now).await.expect("stored");
    s.set_approval_notice(opened.id, event_id!("$notice")).await.expect("notice");
    let opened = s.approval(opened.id).await.expect("read").expect("there");
    let waited = tokio::time::timeout(std::time::Duration::from_secs(30), approvals.wait(&opened)).await;
    assert_eq!(
        waited.expect("decided without waiting for the deadline").expect("wait"),
        richbot::approval::Decision::Allow
    );
    assert!(
        s.pending_events(room_id!("!r:x")).await.expect("pending").is_empty(),
        "the reaction is settled, no turn of its own"
    );
}
