//! The store against what strangers and members can put in it (SQLite, and PostgreSQL in
//! the `it_postgres` run, which refuses a NUL in text): the personas' crypto state keeps
//! working, and one crypto inbox row that keeps failing moves aside.

use richbot::crypto::key;
use richbot::store::{CryptoWrite, GroupSessionRow, Store};

use crate::support::postgres::database_url;

async fn store() -> (Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = database_url(dir.path(), "t.db").await;
    (Store::open(&url).await.expect("open"), dir)
}

const PERSONA: &str = "@richbot_bot:localhost";

#[tokio::test]
async fn crypto_keys_made_of_a_strangers_ids_save_and_read_back() {
    let (s, _dir) = store().await;
    let hostile = key::of(key::WITHHELD, &["!r:localhost", "bad\u{0}session\u{1f}x%"]);
    assert!(!hostile.contains('\u{0}'), "{hostile:?}");
    assert!(hostile.ends_with("bad%00session%1Fx%25"), "encoded, separator and escape included: {hostile:?}");
    let plain = key::of(key::WITHHELD, &["!r:localhost", "bad"]);
    assert_eq!(plain, format!("{}!r:localhost\u{1f}bad", key::WITHHELD), "real ids are kept as they are");
    let w =
        CryptoWrite { kv: vec![(hostile.clone(), Some("{\"code\":\"m.unverified\"}".into()))], ..Default::default() };
    s.crypto_write(PERSONA, &w).await.expect("a stranger's session id saves");
    assert_eq!(s.crypto_kv(PERSONA, &hostile).await.expect("read").as_deref(), Some("{\"code\":\"m.unverified\"}"));
    let prefix = key::under(key::WITHHELD, &["!r:localhost"]);
    assert_eq!(s.crypto_kv_prefixed(PERSONA, &prefix).await.expect("scan").len(), 1, "found by its room");
    // Two parts that differ never make one key.
    assert_ne!(key::of(key::BUNDLE, &["a\u{1f}b", "c"]), key::of(key::BUNDLE, &["a", "b\u{1f}c"]));
    assert_ne!(key::of(key::CUSTOM, &["%00"]), key::of(key::CUSTOM, &["\u{0}"]));
}

fn room_key(room: &str, value: &str) -> CryptoWrite {
    let row = GroupSessionRow {
        session_id: "session".into(),
        room_id: room.into(),
        sender_key: "curve".into(),
        sender_data_type: 1,
        backed_up: false,
        value: value.into(),
    };
    CryptoWrite { group_sessions: vec![row], ..Default::default() }
}

#[tokio::test]
async fn a_room_key_sent_again_for_another_room_is_dropped_not_moved() {
    let (s, _dir) = store().await;
    s.crypto_write(PERSONA, &room_key("!ours:localhost", "first")).await.expect("save");
    // A member re-sends it labelled with another room: the persona keeps reading ours.
    s.crypto_write(PERSONA, &room_key("!theirs:localhost", "forged")).await.expect("save");
    let (room, value, _) = s.crypto_group_session(PERSONA, "session").await.expect("read").expect("kept");
    assert_eq!((room.as_str(), value.as_str()), ("!ours:localhost", "first"));
    assert!(s.crypto_group_sessions(PERSONA, Some("!theirs:localhost")).await.expect("read").is_empty());
    // The same room's key, better (an earlier index): replaced as before.
    s.crypto_write(PERSONA, &room_key("!ours:localhost", "better")).await.expect("save");
    let (_, value, _) = s.crypto_group_session(PERSONA, "session").await.expect("read").expect("kept");
    assert_eq!(value, "better");
}

#[tokio::test]
async fn a_crypto_inbox_rows_failures_are_counted_and_a_piece_set_aside_leaves_the_rest_of_its_row() {
    let (s, _dir) = store().await;
    let rows: Vec<(String, String)> = (1..=3).map(|i| (PERSONA.to_owned(), format!("{{\"n\":{i}}}"))).collect();
    s.crypto_inbox_add(&rows, 0).await.expect("add");
    let seqs: Vec<i64> = s.crypto_inbox(PERSONA, 10).await.expect("read").into_iter().map(|r| r.seq).collect();
    let broken = seqs[1];
    for attempt in 1..=3 {
        assert_eq!(s.crypto_inbox_failed(PERSONA, broken).await.expect("count"), attempt);
    }
    let read = s.crypto_inbox(PERSONA, 10).await.expect("read");
    assert_eq!(read[1].attempts, 3, "{read:?}");
    // Two pieces of the row set aside in turn; the row keeps the rest, then goes with its last.
    assert!(
        s.crypto_inbox_set_aside(PERSONA, broken, "{\"piece\":1}", Some("{\"rest\":1}"), "no\u{0}pe", 4)
            .await
            .expect("aside")
    );
    let read = s.crypto_inbox(PERSONA, 10).await.expect("read");
    assert_eq!((read[1].seq, read[1].body.as_str()), (broken, "{\"rest\":1}"), "the rest stays, in its place");
    assert!(s.crypto_inbox_set_aside(PERSONA, broken, "{\"rest\":1}", None, "again", 5).await.expect("aside"));
    let left: Vec<i64> = s.crypto_inbox(PERSONA, 10).await.expect("read").into_iter().map(|r| r.seq).collect();
    assert_eq!(left, [seqs[0], seqs[2]], "the others stay, in order");
    let aside = s.crypto_inbox_aside(PERSONA).await.expect("aside");
    assert_eq!(aside, [(broken, "no\u{fffd}pe".to_owned()), (broken, "again".to_owned())]);
    // A row already gone (taken meanwhile) sets nothing aside, and counts no failure.
    assert!(!s.crypto_inbox_set_aside(PERSONA, broken, "x", None, "gone", 6).await.expect("aside"));
    assert_eq!(s.crypto_inbox_failed(PERSONA, broken).await.expect("count"), 0);
}

fn vote(n: usize, sender: &str, poll: &str, answer: &str, at: i64) -> richbot::store::NewEvent {
    let content = serde_json::json!({
        "m.relates_to": {"rel_type": "m.reference", "event_id": poll},
        "org.matrix.msc3381.poll.response": {"answers": [answer]},
    });
    let event = serde_json::json!({
        "type": "org.matrix.msc3381.poll.response", "event_id": format!("$v{n}"), "room_id": "!r:localhost",
        "sender": sender, "origin_server_ts": at, "content": content,
    });
    richbot::store::NewEvent {
        event_id: format!("$v{n}").try_into().expect("id"),
        room_id: "!r:localhost".try_into().expect("room"),
        sender: sender.try_into().expect("sender"),
        event_type: "org.matrix.msc3381.poll.response".into(),
        state_key: None,
        origin_ts: at,
        event: event.to_string(),
        processed: true,
    }
}

#[tokio::test]
async fn a_member_who_stuffs_a_poll_with_votes_still_counts_once_and_hides_nobody() {
    let (s, _dir) = store().await;
    let (poll_id, room) = (ruma::event_id!("$poll"), ruma::room_id!("!r:localhost"));
    let answers = vec!["tea".to_owned(), "coffee".to_owned()];
    let start = 1_000;
    let new = richbot::store::NewPoll {
        event_id: poll_id,
        room_id: room,
        persona: ruma::user_id!("@richbot_bot:localhost"),
        question: "Which?",
        answers: &answers,
        disclosed: true,
        created_at: start,
        end_at: None,
        text_event_id: ruma::event_id!("$shown"),
    };
    s.record_poll(&new).await.expect("poll");
    // 10,001 votes for tea from one member (more than any fixed window), then one each
    // for coffee from two others; and one vote sent before the poll began, not counted.
    let (tea, coffee) = (richbot::polls::answer_id(0), richbot::polls::answer_id(1));
    let stuffed: Vec<_> = (0..10_001).map(|i| vote(i, "@stuffer:localhost", "$poll", &tea, start + 1)).collect();
    for chunk in stuffed.chunks(1_000) {
        s.insert_events(chunk, start).await.expect("insert");
    }
    let late = [
        vote(20_000, "@alice:localhost", "$poll", &coffee, start + 5),
        vote(20_001, "@bob:localhost", "$poll", &coffee, start + 6),
        vote(20_002, "@carol:localhost", "$poll", &tea, start - 1),
    ];
    s.insert_events(&late, start).await.expect("insert");
    let row = s.poll(poll_id).await.expect("read").expect("recorded");
    let tally = richbot::polls::count(&s, &row).await.expect("count");
    assert_eq!(tally.votes, 3, "{tally:?}");
    assert_eq!(tally.counts[0].1, vec!["@stuffer:localhost".to_owned()]);
    assert_eq!(tally.counts[1].1, vec!["@alice:localhost".to_owned(), "@bob:localhost".to_owned()]);
    assert!(tally.result().contains("coffee"), "{}", tally.result());

    // Votes by reply weigh the same: each member's latest of either kind counts. The
    // stuffer's 2,000 replies came before his response; Alice's reply came after hers;
    // Dave votes by reply only; one replay of an event counts once.
    let reply = |n: usize, sender: &str, at: i64, answer: &str| {
        let (event, sender) = (format!("$reply{n}"), sender.to_owned());
        (event, sender, at, answer.to_owned())
    };
    let mut replies: Vec<_> = (0..2_000).map(|i| reply(i, "@stuffer:localhost", start, &coffee)).collect();
    replies.push(reply(5_000, "@alice:localhost", start + 7, &tea));
    replies.push(reply(5_001, "@dave:localhost", start + 8, &coffee));
    replies.push(reply(5_001, "@dave:localhost", start + 8, &coffee));
    for (event, sender, at, answer) in &replies {
        let (event, sender) = (ruma::EventId::parse(event).expect("id"), ruma::UserId::parse(sender).expect("user"));
        let r =
            richbot::store::PollReply { event_id: &event, poll_id: row.id, sender: &sender, origin_ts: *at, answer };
        s.record_poll_reply(&r).await.expect("reply");
    }
    let tally = richbot::polls::count(&s, &row).await.expect("count");
    assert_eq!(tally.counts[0].1, vec!["@alice:localhost".to_owned(), "@stuffer:localhost".to_owned()], "{tally:?}");
    assert_eq!(tally.counts[1].1, vec!["@bob:localhost".to_owned(), "@dave:localhost".to_owned()], "{tally:?}");
    assert_eq!(tally.votes, 4);
}

fn crypto_of(s: &Store) -> richbot::crypto::Crypto {
    let matrix = richbot::matrix::Client::new("http://127.0.0.1:9", "as_token", Default::default());
    let personas = [crate::support::user_id(PERSONA)];
    richbot::crypto::Crypto::new(s.clone(), matrix, &personas, std::time::Duration::from_secs(60), None, None)
}

#[tokio::test]
async fn what_the_last_probe_found_holds_from_the_next_start() {
    let (s, _dir) = store().await;
    let first = crypto_of(&s);
    first.recall().await.expect("recall");
    assert!(first.active() && !first.known_to_work(), "before any probe: rooms read, no new encrypted rooms");
    first.set_supported(true).await.expect("remember");
    let second = crypto_of(&s);
    second.recall().await.expect("recall");
    assert!(second.known_to_work(), "a restart makes encrypted DMs at once");
    second.set_supported(false).await.expect("remember");
    let third = crypto_of(&s);
    third.recall().await.expect("recall");
    assert!(!third.active(), "nor reads nor writes encrypted rooms until a probe finds it working");
}

#[tokio::test]
async fn a_crypto_save_under_a_lease_that_ran_out_or_moved_on_is_refused_whole() {
    let (s, _dir) = store().await;
    let now = richbot::clock::now_ms();
    let save = |holder: &str, generation: i64, value: &str| CryptoWrite {
        fence: Some(richbot::store::Fence { holder: holder.to_owned(), generation }),
        kv: vec![("account".to_owned(), Some(value.to_owned()))],
        ..Default::default()
    };
    // An instance took the lease a minute ago for a second, then stalled.
    let stalled = s.claim_crypto(PERSONA, "stalled", None, now - 60_000, 1_000).await.expect("claim").expect("taken");
    let refused = s.crypto_write(PERSONA, &save("stalled", stalled, "old")).await.expect_err("ran out");
    assert!(matches!(refused, richbot::store::Error::LeaseLost(_)), "{refused}");
    assert_eq!(s.crypto_kv(PERSONA, "account").await.expect("read"), None, "nothing of it landed");
    // Another instance takes it over and saves; the stalled one stays fenced out.
    let live = s.claim_crypto(PERSONA, "live", None, now, 60_000).await.expect("claim").expect("taken");
    assert_ne!(live, stalled);
    s.crypto_write(PERSONA, &save("live", live, "new")).await.expect("the holder saves");
    assert!(s.crypto_write(PERSONA, &save("stalled", stalled, "old")).await.is_err());
    assert_eq!(s.crypto_kv(PERSONA, "account").await.expect("read").as_deref(), Some("new"));
}

#[tokio::test]
async fn withheld_notices_are_capped_per_persona() {
    let (s, _dir) = store().await;
    let kv = (0..600)
        .map(|i| (key::of(key::WITHHELD, &["!r:localhost", &format!("s{i:04}")]), Some("{}".to_owned())))
        .collect();
    s.crypto_write(PERSONA, &CryptoWrite { kv, ..Default::default() }).await.expect("save");
    s.crypto_write("@other:localhost", &room_key("!r:localhost", "theirs")).await.expect("save");
    assert_eq!(s.crypto_kv_cap(PERSONA, key::WITHHELD, 500).await.expect("cap"), 100);
    let left = s.crypto_kv_prefixed(PERSONA, key::WITHHELD).await.expect("read");
    assert_eq!(left.len(), 500);
    assert!(left.first().is_some_and(|(k, _)| k.ends_with("s0100")), "the greatest kept: {:?}", left.first());
    assert_eq!(s.crypto_kv_cap(PERSONA, key::WITHHELD, 500).await.expect("cap"), 0, "at the cap, nothing more goes");
}
