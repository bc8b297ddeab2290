//! Store queries on a fresh database (SQLite, or PostgreSQL in the `it_postgres` run;
//! SQLite's own files, WAL and flushes are tested on SQLite in both): the invariants the
//! pipeline leans on (turns claim and finish their events atomically, a crashed turn is
//! found again, an outbox claim is idempotent, edit slots are never shared), and
//! environment overrides of the config.

use richbot::store::{NewEvent, NewWrite, OutboxState, Store, TurnRecord};
use ruma::{event_id, room_id, user_id};
use serde_json::json;

use crate::support::message;
use crate::support::postgres::database_url;

/// A test's database: its folder (the SQLite file's) and URL.
struct Db {
    dir: tempfile::TempDir,
    url: String,
}

impl Db {
    fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
}

/// A store on this run's database.
async fn store() -> (Store, Db) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = database_url(dir.path(), "t.db").await;
    let s = Store::open(&url).await.expect("open");
    (s, Db { dir, url })
}

/// A store on an SQLite file, for what only SQLite has.
async fn sqlite_store() -> (Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Store::open(&format!("sqlite://{}", dir.path().join("t.db").display())).await.expect("open");
    (s, dir)
}

#[tokio::test]
async fn concurrent_edit_slots_are_spaced_and_never_shared() {
    let (s, _d) = store().await;
    let content = json!({});
    let sent = richbot::store::NewSent {
        event_id: event_id!("$m"),
        room_id: room_id!("!r"),
        sender: user_id!("@bot:x"),
        thread_root: None,
        replaces: None,
        content: &content,
        sent_at: 1_000,
        next_edit_at: 3_500,
    };
    s.record_sent(&sent).await.expect("sent");
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            s.reserve_edit_slot(event_id!("$m"), user_id!("@bot:x"), 1_000, 2_500).await.expect("slot").expect("owner")
        }));
    }
    let mut slots = Vec::new();
    for t in tasks {
        slots.push(t.await.expect("task"));
    }
    slots.sort_unstable();
    let want: Vec<i64> = (0..10).map(|i| 3_500 + i * 2_500).collect();
    assert_eq!(slots, want);
    assert_eq!(
        s.reserve_edit_slot(event_id!("$m"), user_id!("@other:x"), 0, 2_500).await.expect("query"),
        None,
        "not the owner"
    );
    assert_eq!(
        s.reserve_edit_slot(event_id!("$nope"), user_id!("@bot:x"), 0, 2_500).await.expect("query"),
        None,
        "unknown message"
    );
    // A landed write pushes the next slot past its completion time.
    s.edit_landed(event_id!("$m"), &json!({}), 100_000, 2_500).await.expect("landed");
    assert_eq!(s.reserve_edit_slot(event_id!("$m"), user_id!("@bot:x"), 0, 2_500).await.expect("q"), Some(102_500));
}

#[tokio::test]
async fn a_turn_claims_its_events_and_finishing_it_marks_them_processed_together() {
    let (s, _d) = store().await;
    let room = room_id!("!r:x");
    let new = s.insert_events(&[message("$a", "!r:x"), message("$b", "!r:x"), message("$a", "!r:x")], 1).await;
    assert_eq!(new.expect("insert"), 2, "an event id is stored once");
    assert_eq!(s.rooms_with_pending().await.expect("rooms"), [room.to_owned()]);
    let pending = s.pending_events(room).await.expect("pending");
    let first = pending[0].seq;
    let turn = s.start_turn(room, user_id!("@bot:x"), user_id!("@alice:x"), &[first], None, 10).await.expect("turn");

    // Claimed by the running turn: no longer pending, but found again as its events.
    let left: Vec<_> = s.pending_events(room).await.expect("pending").into_iter().map(|e| e.event_id).collect();
    assert_eq!(left, [event_id!("$b").to_owned()]);
    let (found, events) = s.unfinished_turn(room).await.expect("query").expect("the running turn");
    assert_eq!(found, richbot::store::TurnRow { resumed: true, ..turn.clone() }, "the same turn, read back");
    assert!(!turn.resumed, "a turn just started has nothing recorded to replay");
    assert_eq!(events.iter().map(|e| e.event_id.as_str()).collect::<Vec<_>>(), ["$a"]);
    assert!(!events[0].processed);

    // What is kept to resume it goes with its end.
    s.record_reply(turn.id, 0, "{}").await.expect("reply");
    s.start_tool(turn.id, 0, 15).await.expect("start");
    s.record_tool_result(turn.id, 0, "the file's contents").await.expect("result");
    let record =
        TurnRecord { outcome: "answered".into(), rounds: 2, prompt_tokens: 5, completion_tokens: 3, cached_tokens: 0 };
    assert!(s.finish_turn(turn.id, &record, 20).await.expect("finish"));
    assert!(s.unfinished_turn(room).await.expect("query").is_none(), "a finished turn is not resumed");
    assert!(s.replies(turn.id).await.expect("replies").is_empty());
    assert_eq!(s.tool_result(turn.id, 0).await.expect("result"), None);
    assert!(!s.tool_started(turn.id, 0).await.expect("started"));
    let again = TurnRecord { outcome: "no_reply".into(), ..record.clone() };
    assert!(!s.finish_turn(turn.id, &again, 30).await.expect("finish"), "finished once");
    assert!(s.event(event_id!("$a")).await.expect("query").expect("stored").processed);
    assert_eq!(s.turn_outcomes(room).await.expect("outcomes"), [("answered".to_owned(), 2, 5, 3)]);
    s.mark_processed(&[s.pending_events(room).await.expect("pending")[0].seq]).await.expect("mark");
    assert!(s.rooms_with_pending().await.expect("rooms").is_empty());
}

#[tokio::test]
async fn an_outbox_claim_is_idempotent_and_keeps_its_first_transaction_id() {
    let (s, _d) = store().await;
    let (room, bot) = (room_id!("!r:x"), user_id!("@bot:x"));
    let write = |txn_id| NewWrite { txn_id, turn: 7, seq: 0, room, sender: bot, kind: "send", content_hash: "h1" };
    let first = s.outbox_claim(&write("rb.i.7.0"), 1).await.expect("claim");
    assert_eq!((first.txn_id.as_str(), &first.state), ("rb.i.7.0", &OutboxState::Pending));
    assert_eq!(first.attempts, 0, "nothing attempted before the first claim");
    // A resumed turn claims the same write (even with another candidate id): the same row,
    // whose claim counted as an attempt (its PUT may have landed unseen).
    let again = s.outbox_claim(&write("rb.other.7.0"), 2).await.expect("claim");
    assert_eq!(again, richbot::store::OutboxRow { attempts: 1, ..first.clone() }, "may have landed unseen");
    let attempted = s.outbox_claim(&write("rb.i.7.0"), 2).await.expect("claim");
    assert_eq!((attempted.attempts, attempted.same), (2, true), "each claim of a pending write counts");
    let other = NewWrite { content_hash: "another", ..write("rb.i.7.0") };
    assert!(!s.outbox_claim(&other, 2).await.expect("claim").same, "a different content under the same id");
    s.outbox_sent("rb.i.7.0", event_id!("$landed")).await.expect("sent");
    let done = s.outbox_claim(&write("rb.i.7.0"), 3).await.expect("claim");
    assert_eq!(done.state, OutboxState::Sent(event_id!("$landed").to_owned()));

    let refused = NewWrite { txn_id: "rb.i.7.1", turn: 7, seq: 1, room, sender: bot, kind: "send", content_hash: "h2" };
    s.outbox_claim(&refused, 4).await.expect("claim");
    s.outbox_failed("rb.i.7.1", "M_FORBIDDEN (403): no").await.expect("failed");
    let row = s.outbox_claim(&refused, 5).await.expect("claim");
    assert_eq!(row.state, OutboxState::Failed("M_FORBIDDEN (403): no".into()));
}

#[tokio::test]
async fn reopening_keeps_the_instance_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = database_url(dir.path(), "t.db").await;
    let a = Store::open(&url).await.expect("open").instance_id().await.expect("id");
    let b = Store::open(&url).await.expect("open").instance_id().await.expect("id");
    assert_eq!(a, b);
    assert_eq!(a.len(), 10);
}

/// `serve` starting while `richbot check` (or another instance) opens the same new
/// database: every opener ends with the whole schema, none fails half-way (SQLite's
/// migrations take no lock, so two openers raced to create the same table).
#[tokio::test]
async fn openers_of_a_new_database_at_once_all_end_migrated() {
    for round in 0..4 {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = database_url(dir.path(), "t.db").await;
        let opens = (0..4).map(|_| Store::open(&url));
        for (n, opened) in futures::future::join_all(opens).await.into_iter().enumerate() {
            let store = opened.unwrap_or_else(|e| panic!("round {round}, opener {n}: {e}"));
            assert_eq!(store.instance_id().await.expect("id").len(), 10);
        }
    }
}

#[test]
fn environment_overrides_config_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("reg.yaml"), "id: r\nurl: null\nas_token: as_token_for_the_tests\nhs_token: hs_token_for_the_tests\nsender_localpart: richbot\nnamespaces:\n  users: [{exclusive: true, regex: '@rb_.*:example\\.org'}]\n").expect("reg");
    let toml = "[homeserver]\nurl = \"http://hs\"\nserver_name = \"example.org\"\n[appservice]\nregistration = \"reg.yaml\"\n[llm]\nbase_url = \"http://llm/v1\"\nmodel = \"a\"\n";
    let env = vec![
        ("RICHBOT__LLM__MODEL".to_owned(), "b".to_owned()),
        ("RICHBOT__BOT__MAX_PARALLEL_ROOMS".to_owned(), "3".to_owned()),
        ("RICHBOT__PERSONAS__0__LOCALPART".to_owned(), "rb_x".to_owned()),
        ("OPENAI_API_KEY".to_owned(), "sk-env".to_owned()),
    ];
    let s = richbot::config::from_str(toml, "c.toml".as_ref(), dir.path(), env).expect("valid");
    assert_eq!(s.config.llm.model, "b");
    assert_eq!(s.config.bot.max_parallel_rooms, 3);
    assert_eq!(s.personas[0].localpart, "rb_x");
    assert_eq!(s.api_key.as_deref(), Some("sk-env"));
    assert!(s.allowed("@anyone:example.org") && !s.allowed("@eve:evil.org"), "default: this homeserver only");
    assert!(!format!("{:?}", s.config.llm).contains("sk-"), "secrets are not printed");
    let everything = format!("{s:?}");
    assert!(
        !everything.contains("sk-env") && !everything.contains("hs_token") && !everything.contains("as_token"),
        "{everything}"
    );

    // An all-digit value for a string key stays a string (and is never echoed).
    let digits = vec![("RICHBOT__LLM__API_KEY".to_owned(), "1234567890".to_owned())];
    let s = richbot::config::from_str(toml, "c.toml".as_ref(), dir.path(), digits).expect("a string key");
    assert_eq!(s.config.llm.api_key.as_deref(), Some("1234567890"));
    let wrong = vec![("RICHBOT__BOT__MAX_PARALLEL_ROOMS".to_owned(), "sk-not-a-number".to_owned())];
    let err = richbot::config::from_str(toml, "c.toml".as_ref(), dir.path(), wrong).expect_err("not a number");
    assert!(!err.to_string().contains("sk-not-a-number"), "{err}");

    let bad = richbot::config::from_str(
        toml,
        "c.toml".as_ref(),
        dir.path(),
        vec![("RICHBOT__PERSONAS__0__LOCALPART".to_owned(), "mallory".to_owned())],
    );
    let msg = bad.expect_err("outside the namespace").to_string();
    assert!(
        msg.starts_with("personas[0].localpart: @mallory:example.org is outside the registration's user namespace"),
        "{msg}"
    );
}

#[tokio::test]
async fn a_redaction_scrubs_the_text_and_its_edits_from_the_database_file() {
    let (s, dir) = store().await;
    let room = room_id!("!r:x");
    let mut secret = message("$pw", "!r:x");
    secret.event =
        json!({"type": "m.room.message", "content": {"msgtype": "m.text", "body": "my password is hunter2"}})
            .to_string();
    let mut edit = message("$pw2", "!r:x");
    edit.event = json!({"type": "m.room.message", "content": {"msgtype": "m.text", "body": "* hunter2!",
        "m.new_content": {"msgtype": "m.text", "body": "hunter2!"}, "m.relates_to": {"rel_type": "m.replace", "event_id": "$pw"}}})
    .to_string();
    s.insert_events(&[secret, edit, message("$other", "!r:x")], 1).await.expect("insert");
    assert_eq!(s.redact(room, event_id!("$pw")).await.expect("redact"), 2, "the message and its edit");
    let history = s.history(room, i64::MAX, 10).await.expect("history");
    assert!(history.iter().all(|e| !e.event.to_string().contains("hunter2")));
    assert_eq!(history.iter().filter(|e| e.content().get("body").is_some()).count(), 1, "the other message stays");
    if s.backend() != richbot::store::Backend::Sqlite {
        return;
    }
    let mut on_disk = Vec::new();
    for entry in std::fs::read_dir(dir.path()).expect("dir") {
        on_disk.extend(std::fs::read(entry.expect("entry").path()).expect("read"));
    }
    assert!(!on_disk.windows(7).any(|w| w == b"hunter2"), "not in the database, its WAL or free pages");
}

/// A reader that keeps a transaction open (an admin's `sqlite3` shell, say) keeps the WAL
/// from being truncated after a redaction: the redaction still returns, and other writes
/// are not held up meanwhile; once the reader is gone the next redaction truncates it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_holding_the_wal_neither_hangs_a_redaction_nor_the_writes_beside_it() {
    use sqlx::{Connection, Executor};
    let (s, dir) = sqlite_store().await;
    s.insert_events(&[message("$one", "!r:x"), message("$two", "!r:x")], 1).await.expect("insert");
    let mut reader = sqlx::SqliteConnection::connect(&format!("sqlite://{}", dir.path().join("t.db").display()))
        .await
        .expect("reader");
    reader.execute("BEGIN").await.expect("begin");
    reader.fetch_all("SELECT * FROM events").await.expect("read");

    // Generous bounds for a loaded machine; a redaction that waits on the reader in
    // SQLite's busy handler, try after try, takes over 40 minutes.
    let bound = std::time::Duration::from_secs(60);
    let redaction = tokio::spawn({
        let s = s.clone();
        async move { s.redact(room_id!("!r:x"), event_id!("$one")).await }
    });
    let write = tokio::time::timeout(bound, s.insert_events(&[message("$three", "!r:x")], 1)).await;
    write.expect("a write beside the redaction is not held up").expect("insert");
    let redacted = tokio::time::timeout(bound, redaction).await.expect("the redaction returns").expect("task");
    assert_eq!(redacted.expect("redact"), 1);

    reader.execute("COMMIT").await.expect("end the read");
    reader.close().await.expect("close");
    s.redact(room_id!("!r:x"), event_id!("$two")).await.expect("redact");
    let wal = std::fs::metadata(dir.path().join("t.db-wal")).expect("the WAL").len();
    assert_eq!(wal, 0, "with no reader left, the WAL is truncated");
}

#[tokio::test]
async fn the_database_and_its_wal_are_owner_only() {
    let (s, dir) = sqlite_store().await;
    s.insert_events(&[message("$a", "!r:x")], 1).await.expect("write something");
    #[cfg(unix)]
    for entry in std::fs::read_dir(dir.path()).expect("dir") {
        use std::os::unix::fs::PermissionsExt;
        let path = entry.expect("entry").path();
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", path.display());
    }
}

/// Many transactions committed at once share their flushes (group commit), and a flush
/// follows every commit it covers; with `synchronous = normal` nothing is flushed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_commits_share_their_wal_flushes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("g.db").display());
    let s = Store::open(&url).await.expect("open");
    let writers = (0..16).map(|i| {
        let s = s.clone();
        tokio::spawn(async move { s.insert_events(&[message(&format!("$g{i}"), "!r:x")], 1).await.expect("insert") })
    });
    for w in futures::future::join_all(writers).await {
        w.expect("writer");
    }
    // Their 16 syncs at once, from one task (polled in order, not left to the scheduler:
    // on a loaded machine spawned writers ran one after another, each flushing alone).
    for synced in futures::future::join_all((0..16).map(|_| s.sync())).await {
        synced.expect("sync");
    }
    let flushes = s.flushes();
    assert!((1..16).contains(&flushes), "16 commits, {flushes} flushes");
    s.sync().await.expect("sync");
    assert_eq!(s.flushes(), flushes + 1, "a sync after the last flush flushes again");

    let normal =
        Store::open_with(&format!("sqlite://{}", dir.path().join("n.db").display()), false).await.expect("open");
    normal.insert_events(&[message("$n", "!r:x")], 1).await.expect("insert");
    normal.sync().await.expect("sync");
    assert_eq!(normal.flushes(), 0);
}

/// With members kept in memory (as `serve` does), every change of membership is seen at
/// once, from memory (the inbox's door reads them without a query).
#[tokio::test]
async fn cached_members_follow_every_change() {
    let (s, _d) = store().await;
    let s = s.caching_members();
    let room = room_id!("!m:x");
    let (alice, bob) = (user_id!("@alice:x").to_owned(), user_id!("@bob:x").to_owned());
    assert!(s.known_members(room).is_none());
    s.set_joined_members(room, std::slice::from_ref(&alice)).await.expect("set");
    assert_eq!(s.known_members(room).as_deref(), Some(&[alice.clone()][..]));
    s.set_membership(room, &bob, "join").await.expect("join");
    assert_eq!(s.known_members(room).as_deref(), Some(&[alice.clone(), bob.clone()][..]));
    s.set_membership(room, &alice, "leave").await.expect("leave");
    assert_eq!(&*s.joined_members(room).await.expect("read"), std::slice::from_ref(&bob));
    // At start, the rooms the personas are in are read in one query.
    let fresh = Store::open(&_d.url).await.expect("open").caching_members();
    let other = room_id!("!empty:x").to_owned();
    fresh.warm_members(&[room.to_owned(), other.clone()]).await.expect("warm");
    assert_eq!(fresh.known_members(room).as_deref(), Some(&[bob][..]));
    assert_eq!(fresh.known_members(&other).as_deref(), Some(&[][..]));
}

/// The rooms two users share are those both are joined in now: not one where either only
/// was invited or has left, whichever of them is in more rooms (the persona, in many,
/// and the asker, in few: the query walks the second's rooms).
#[tokio::test]
async fn shared_rooms_are_those_both_are_joined_in() {
    let (s, _d) = store().await;
    let (persona, asker) = (user_id!("@bot:x"), user_id!("@asker:x"));
    for n in 0..50 {
        let room = ruma::RoomId::parse(format!("!p{n:02}:x")).expect("room id");
        s.set_membership(&room, persona, "join").await.expect("persona joins");
    }
    let (both, invited, left, theirs) = (room_id!("!p07:x"), room_id!("!p08:x"), room_id!("!p09:x"), room_id!("!a:x"));
    s.set_membership(both, asker, "join").await.expect("join");
    s.set_membership(room_id!("!p03:x"), asker, "join").await.expect("join");
    s.set_membership(invited, asker, "invite").await.expect("invite");
    s.set_membership(left, asker, "join").await.expect("join");
    s.set_membership(left, asker, "leave").await.expect("leave");
    s.set_membership(theirs, asker, "join").await.expect("join");
    let expected = vec![room_id!("!p03:x").to_owned(), both.to_owned()];
    assert_eq!(s.shared_rooms(persona, asker).await.expect("shared"), expected);
    assert_eq!(s.shared_rooms(asker, persona).await.expect("shared"), expected);
    s.set_membership(room_id!("!p03:x"), persona, "leave").await.expect("persona leaves");
    assert_eq!(s.shared_rooms(persona, asker).await.expect("shared"), vec![both.to_owned()]);
}

/// Under a steady stream of commits the WAL is checkpointed and reused, not grown without
/// end (a checkpoint that never completes lets it reach gigabytes).
#[tokio::test]
async fn the_wal_stays_small_under_a_steady_stream_of_commits() {
    let (s, dir) = sqlite_store().await;
    let body = "x".repeat(300);
    for t in 0..300 {
        let batch: Vec<NewEvent> = (0..100)
            .map(|i| NewEvent {
                event: json!({"type": "m.room.message", "content": {"msgtype": "m.text", "body": body}}).to_string(),
                ..message(&format!("$w{t}x{i}"), &format!("!r{}:x", i % 50))
            })
            .collect();
        s.insert_events(&batch, 1).await.expect("insert");
        s.sync().await.expect("sync");
    }
    let wal = std::fs::metadata(dir.path().join("t.db-wal")).expect("wal").len();
    assert!(wal < 16 * 1024 * 1024, "WAL is {wal} bytes after 30,000 events");
}

#[cfg(unix)]
#[tokio::test]
async fn a_database_path_that_is_a_symlink_is_refused_and_its_target_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("elsewhere.txt");
    std::fs::write(&target, "not a database").expect("write");
    let link = dir.path().join("t.db");
    std::os::unix::fs::symlink(&target, &link).expect("link");
    let e = Store::open(&format!("sqlite://{}", link.display())).await.expect_err("refused").to_string();
    assert!(e.contains("is a symbolic link"), "{e}");
    assert_eq!(std::fs::read_to_string(&target).expect("read"), "not a database");
    let lock = richbot::store::lock_file(&format!("sqlite://{}", link.display())).map(drop);
    assert!(lock.is_ok(), "the lock beside it is a file of its own");
}

#[tokio::test]
async fn a_sent_message_is_in_the_history_at_once_and_its_echo_is_not_stored_twice() {
    let (s, _db) = store().await;
    let (room, bot) = (room_id!("!r:x"), user_id!("@bot:x"));
    s.insert_events(&[message("$q", "!r:x")], 1).await.expect("question");
    let content = json!({"msgtype": "m.text", "body": "the answer"});
    let sent = richbot::store::NewSent {
        event_id: event_id!("$a"),
        room_id: room,
        sender: bot,
        thread_root: None,
        replaces: None,
        content: &content,
        sent_at: 2,
        next_edit_at: 2,
    };
    s.record_sent(&sent).await.expect("sent");
    let history = s.history(room, i64::MAX, 10).await.expect("history");
    let said: Vec<(&str, &str)> =
        history.iter().map(|e| (e.sender.as_str(), e.content()["body"].as_str().unwrap_or(""))).collect();
    assert_eq!(said, [("@alice:x", "$q"), ("@bot:x", "the answer")], "before the homeserver echoes it");
    // The echo, when it comes, is the same event.
    let echo = NewEvent {
        event_id: event_id!("$a").to_owned(),
        room_id: room.to_owned(),
        sender: bot.to_owned(),
        event_type: "m.room.message".into(),
        state_key: None,
        origin_ts: 3,
        event: json!({"type": "m.room.message", "content": content}).to_string(),
        processed: false,
    };
    assert_eq!(s.insert_events(&[echo], 3).await.expect("echo"), 0, "not stored twice");
    assert!(s.pending_events(room).await.expect("pending").iter().all(|e| e.event_id != "$a"), "nothing to do for it");

    // Recorded again with the write it landed as, as a resumed turn does when a crash came
    // between recording it and marking its write sent: the write is sent, the message
    // still there once.
    let write = NewWrite { txn_id: "rb.i.9.0", turn: 9, seq: 0, room, sender: bot, kind: "send", content_hash: "h" };
    s.outbox_claim(&write, 4).await.expect("claim");
    s.record_landed(&sent, Some("rb.i.9.0")).await.expect("recorded again");
    assert_eq!(s.outbox_claim(&write, 5).await.expect("claim").state, OutboxState::Sent(event_id!("$a").to_owned()));
    assert_eq!(s.history(room, i64::MAX, 10).await.expect("history").len(), 2, "the question and the answer");
}
