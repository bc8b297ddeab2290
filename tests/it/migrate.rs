//! `richbot migrate`: a deployment's state (its personas' crypto included) survives a round
//! trip from SQLite to this run's database (PostgreSQL in the `it_postgres` run) and back,
//! with every table's rows counted on both sides; a busy, missing or non-empty database is
//! refused.

use richbot::store::{Budgets, NewApproval, NewEvent, NewSent, NewWrite, Store, TurnRecord};
use ruma::{event_id, room_id, user_id};
use serde_json::json;

use crate::support::postgres::database_url;

/// The persona's Olm machine over the store's crypto state.
async fn machine(s: &Store) -> matrix_sdk_crypto::OlmMachine {
    let state = richbot::crypto::DbState::new(s.clone(), "@bot:x");
    let (user, device) =
        (matrix_sdk_common::ruma::user_id!("@bot:x"), matrix_sdk_common::ruma::device_id!("RBMIGRATE"));
    matrix_sdk_crypto::OlmMachine::with_store(user, device, state, None).await.expect("a machine")
}

/// A message the persona encrypted in `!r:x`, as its room would hold it; and its identity.
async fn sealed(s: &Store) -> (serde_json::Value, String) {
    let m = machine(s).await;
    let room = matrix_sdk_common::ruma::room_id!("!r:x");
    m.share_room_key(room, std::iter::empty(), matrix_sdk_crypto::EncryptionSettings::default()).await.expect("key");
    let body = serde_json::value::to_raw_value(&json!({"msgtype": "m.text", "body": "sealed"})).expect("raw");
    let body = matrix_sdk_common::ruma::serde::Raw::from_json(body);
    let out = m.encrypt_room_event_raw(room, "m.room.message", &body).await.expect("encrypted");
    let content: serde_json::Value = serde_json::from_str(out.content.json().get()).expect("json");
    let event = json!({"type": "m.room.encrypted", "event_id": "$s", "sender": "@bot:x", "room_id": "!r:x",
                       "origin_server_ts": 1, "content": content});
    (event, m.identity_keys().ed25519.to_base64())
}

/// The moved crypto state: the same identity, and the persona's own message decrypts.
async fn assert_crypto(s: &Store, (event, identity): &(serde_json::Value, String)) {
    let m = machine(s).await;
    assert_eq!(&m.identity_keys().ed25519.to_base64(), identity, "the same device identity");
    let raw = matrix_sdk_common::ruma::serde::Raw::from_json(serde_json::value::to_raw_value(event).expect("raw"));
    let any = matrix_sdk_crypto::DecryptionSettings {
        sender_device_trust_requirement: matrix_sdk_crypto::TrustRequirement::Untrusted,
    };
    let clear = m.decrypt_room_event(&raw, matrix_sdk_common::ruma::room_id!("!r:x"), &any).await.expect("decrypts");
    assert!(clear.event.json().get().contains("\"sealed\""));
}

const NOW: i64 = 1_000_000_000_000;

fn message(id: &str) -> NewEvent {
    crate::support::message(id, "!r:x")
}

fn pending_write(turn: i64) -> NewWrite<'static> {
    let (room, sender) = (room_id!("!r:x"), user_id!("@bot:x"));
    NewWrite { txn_id: "rb.i.2.0", turn, seq: 0, room, sender, kind: "send", content_hash: "h" }
}

/// A deployment mid-flight: a finished turn, a running one with a recorded reply and an
/// approval waiting, a sent message with its edit slot, budgets spent, an outbox row
/// landed and one pending, a room mode. Returns the running turn's id.
async fn fill(s: &Store) -> i64 {
    let (room, bot, alice) = (room_id!("!r:x"), user_id!("@bot:x"), user_id!("@alice:x"));
    s.insert_events(&[message("$q1"), message("$q2")], NOW).await.expect("events");
    let seqs: Vec<i64> = s.pending_events(room).await.expect("pending").iter().map(|e| e.seq).collect();
    let done = s.start_turn(room, bot, alice, &seqs[..1], None, NOW).await.expect("turn");
    let record = TurnRecord {
        outcome: "answered".into(),
        rounds: 1,
        prompt_tokens: 30,
        completion_tokens: 12,
        cached_tokens: 20,
    };
    s.finish_turn(done.id, &record, NOW + 1).await.expect("finish");
    let running = s.start_turn(room, bot, alice, &seqs[1..], None, NOW + 2).await.expect("turn");
    s.record_reply(running.id, 0, r#"{"role":"assistant"}"#).await.expect("reply");
    let approval = NewApproval {
        turn_id: running.id,
        nth: 0,
        room_id: room,
        asker: alice,
        tool: "files__delete",
        shown_hash: "h",
        now: NOW,
        expires_at: NOW + 120_000,
    };
    s.open_approval(&approval).await.expect("approval");
    let content = json!({"body": "hi", "msgtype": "m.text"});
    let sent = NewSent {
        event_id: event_id!("$a1"),
        room_id: room,
        sender: bot,
        thread_root: None,
        replaces: None,
        content: &content,
        sent_at: NOW,
        next_edit_at: NOW + 2_500,
    };
    s.record_sent(&sent).await.expect("sent");
    let budgets = Budgets { per_user: 1_000, per_room: 0, total: 0 };
    let reserved = s.reserve_tokens(alice, room, 100, budgets, NOW).await.expect("reserve").expect("room left");
    s.settle_tokens(reserved, 42, 30, 20).await.expect("settle");
    let landed = NewWrite { txn_id: "rb.i.1.0", turn: done.id, ..pending_write(done.id) };
    s.outbox_claim(&landed, NOW).await.expect("claim");
    s.outbox_sent("rb.i.1.0", event_id!("$a1")).await.expect("landed");
    s.outbox_claim(&pending_write(running.id), NOW).await.expect("claim");
    s.set_room_mode(room, "quiet").await.expect("mode");
    running.id
}

/// What richbot reads back after the move is what it wrote before; the pending write has
/// been claimed `attempts` times (each claim of a pending write counts as an attempt).
async fn assert_state(s: &Store, instance: &str, running: i64, attempts: i64) {
    let (room, alice) = (room_id!("!r:x"), user_id!("@alice:x"));
    assert_eq!(s.instance_id().await.expect("instance"), instance, "the markers of earlier writes stay ours");
    let (turn, events) = s.unfinished_turn(room).await.expect("query").expect("the running turn resumes");
    assert_eq!((turn.id, events.len(), events[0].event_id.as_str()), (running, 1, "$q2"));
    assert_eq!(s.replies(running).await.expect("replies"), [r#"{"role":"assistant"}"#]);
    assert_eq!(s.turn_outcomes(room).await.expect("outcomes"), [("answered".to_owned(), 1, 30, 12)]);
    let mine = s.sent_message(event_id!("$a1")).await.expect("query").expect("still ours to edit");
    assert_eq!((mine.sender.as_str(), mine.edits), ("@bot:x", 0));
    let used = s.day_use(alice, NOW + 10).await.expect("use");
    assert_eq!((used.tokens, used.prompt, used.cached), (42, 30, 20), "budgets carry over, cached tokens too");
    let pending = s.outbox_claim(&pending_write(running), NOW + 20).await.expect("claim");
    assert_eq!((pending.txn_id.as_str(), pending.attempts, pending.same), ("rb.i.2.0", attempts, true));
    assert_eq!(s.room_mode(room).await.expect("mode").as_deref(), Some("quiet"));
    let waiting = s.approval(1).await.expect("query").expect("the approval still waits");
    assert_eq!((waiting.turn_id, waiting.decision), (running, None));
}

#[tokio::test]
async fn a_round_trip_keeps_turns_sent_messages_budgets_and_the_outbox() {
    let dir = tempfile::tempdir().expect("tempdir");
    let old = format!("sqlite://{}", dir.path().join("old.db").display());
    let source = Store::open(&old).await.expect("open");
    let running = fill(&source).await;
    let crypto = sealed(&source).await;
    let instance = source.instance_id().await.expect("instance");
    let counts = source.row_counts().await.expect("counts");
    source.close().await;

    // The command an admin runs, on the run's database.
    let new = database_url(dir.path(), "new.db").await;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_richbot"))
        .args(["migrate", "--from", &old, "--to", &new])
        .output()
        .expect("run richbot migrate");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    // Two messages received, and the persona's sent one (in the history as soon as sent).
    assert!(stdout.lines().any(|l| l.split_whitespace().eq(["events", "3", "rows"])), "{stdout}");
    assert!(stdout.contains("counts match"), "{stdout}");

    let moved = Store::open(&new).await.expect("open the new database");
    assert_state(&moved, &instance, running, 1).await;
    assert_crypto(&moved, &crypto).await;
    assert_eq!(moved.row_counts().await.expect("counts"), counts);
    moved.close().await;

    // And back, through the library call.
    let back = format!("sqlite://{}", dir.path().join("back.db").display());
    let copied = richbot::migrate::run(&new, &back).await.expect("migrate back");
    assert_eq!(copied.iter().map(|c| (c.table.clone(), c.rows)).collect::<Vec<_>>(), counts);
    let returned = Store::open(&back).await.expect("open");
    // The check of the moved database claimed the write once more, and that came back too.
    assert_state(&returned, &instance, running, 2).await;
    assert_crypto(&returned, &crypto).await;

    // New rows get new ids: the copied ids were not handed out again.
    let moved = Store::open(&new).await.expect("open");
    moved.insert_events(&[message("$q3")], NOW + 30).await.expect("a new event");
    let seqs: Vec<i64> = moved.pending_events(room_id!("!r:x")).await.expect("pending").iter().map(|e| e.seq).collect();
    let turn = moved.start_turn(room_id!("!r:x"), user_id!("@bot:x"), user_id!("@alice:x"), &seqs, None, NOW + 31);
    assert!(turn.await.expect("a new turn").id > running);
    assert!(seqs[0] > 2);
}

#[tokio::test]
async fn a_busy_missing_or_non_empty_database_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let old = format!("sqlite://{}", dir.path().join("old.db").display());
    let missing = format!("sqlite://{}", dir.path().join("missing.db").display());
    let new = database_url(dir.path(), "new.db").await;

    let err = richbot::migrate::run(&missing, &new).await.expect_err("no source").to_string();
    assert!(err.ends_with("missing.db does not exist; --from must be an existing richbot database"), "{err}");
    assert!(!dir.path().join("missing.db").exists(), "a mistyped source is not created");

    let source = Store::open(&old).await.expect("open");
    fill(&source).await;
    source.close().await;
    let serving = richbot::store::lock_file(&old).expect("lock").expect("an SQLite lock");
    let err = richbot::migrate::run(&old, &new).await.expect_err("source in use").to_string();
    assert!(err.contains("is locked by another richbot"), "{err}");
    drop(serving);

    richbot::migrate::run(&old, &new).await.expect("migrate");
    let err = richbot::migrate::run(&old, &new).await.expect_err("target not empty").to_string();
    assert!(err.contains("the target is not empty (approvals has 1 rows)"), "{err}");
    assert_eq!(
        richbot::migrate::run(&old, &old).await.expect_err("same").to_string(),
        "--from and --to are the same database"
    );
}
