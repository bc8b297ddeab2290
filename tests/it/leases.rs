//! What several instances on one database lean on, each instance a store of its own (its
//! own connections, as another process would have): a room lease is held by one instance
//! at a time, renewed, given back, and taken over once it runs out; the work no live lease
//! covers is found; the door learns watched rooms, busy rooms and members from the database; budget
//! reservations made at once never overspend; and an approval decided by one instance
//! releases the turn waiting on another. (SQLite in the `it` run, PostgreSQL in
//! `it_postgres`, where the instances really race.)

use std::sync::Arc;

use richbot::approval::{Approvals, Decision};
use richbot::store::{Budgets, Store};
use ruma::{OwnedUserId, event_id, room_id, user_id};
use serde_json::json;

use crate::support::message;
use crate::support::postgres::database_url;

const NOW: i64 = 1_000_000_000_000;
const LEASE: i64 = 30_000;

/// Two stores on one fresh database (the folder holds the SQLite file).
async fn two_instances() -> (Store, Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = database_url(dir.path(), "shared.db").await;
    let a = Store::open(&url).await.expect("open");
    let b = Store::open(&url).await.expect("open again");
    (a, b, dir)
}

#[tokio::test]
async fn a_room_lease_has_one_holder_until_it_is_given_back_or_runs_out() {
    let (a, b, _dir) = two_instances().await;
    let room = room_id!("!r:x");
    assert!(a.claim_room(room, "a", None, NOW, LEASE).await.expect("claim"), "a free room is claimed");
    assert!(!b.claim_room(room, "b", None, NOW + 1, LEASE).await.expect("claim"), "a held room is refused");
    assert!(a.claim_room(room, "a", None, NOW + 2, LEASE).await.expect("claim"), "its holder claims it again");

    // Renewing moves the end: at the old end, the room is still a's.
    assert_eq!(a.renew_leases("a", None, NOW + 20_000, LEASE).await.expect("renew"), 1);
    assert!(!b.claim_room(room, "b", None, NOW + LEASE + 2, LEASE).await.expect("claim"), "renewed");
    assert_eq!(b.room_lease(room).await.expect("read").map(|(h, _)| h).as_deref(), Some("a"));

    // Given back: free at once, and only by its holder.
    b.release_room(room, "b").await.expect("not b's to give back");
    assert!(!b.claim_room(room, "b", None, NOW + 20_001, LEASE).await.expect("claim"));
    a.release_room(room, "a").await.expect("release");
    assert!(b.claim_room(room, "b", None, NOW + 20_002, LEASE).await.expect("claim"), "given back: free");

    // b dies: its lease runs out, and a takes the room over.
    let end = NOW + 20_002 + LEASE;
    assert!(!a.claim_room(room, "a", None, end - 1, LEASE).await.expect("claim"), "not before its end");
    assert!(a.claim_room(room, "a", None, end, LEASE).await.expect("claim"), "run out: taken over");
    assert_eq!(b.renew_leases("b", None, end + 1, LEASE).await.expect("renew"), 0, "b has nothing left to renew");
    assert_eq!(a.release_all("a").await.expect("release all"), 1);
    assert_eq!(a.room_lease(room).await.expect("read"), None);
}

#[tokio::test]
async fn of_two_instances_claiming_rooms_at_once_exactly_one_gets_each() {
    let (a, b, _dir) = two_instances().await;
    let rooms: Vec<String> = (0..40).map(|i| format!("!race{i}:x")).collect();
    let claims = |s: Store, holder: &'static str| {
        let rooms = rooms.clone();
        tokio::spawn(async move {
            let mut won = Vec::new();
            for r in &rooms {
                let room: ruma::OwnedRoomId = r.as_str().try_into().expect("room id");
                if s.claim_room(&room, holder, None, NOW, LEASE).await.expect("claim") {
                    won.push(r.clone());
                }
            }
            won
        })
    };
    let (won_a, won_b) = (claims(a.clone(), "a"), claims(b.clone(), "b"));
    let (won_a, won_b) = (won_a.await.expect("a"), won_b.await.expect("b"));
    assert_eq!(won_a.len() + won_b.len(), rooms.len(), "every room went to exactly one: {won_a:?} {won_b:?}");
    assert!(won_a.iter().all(|r| !won_b.contains(r)));
}

#[tokio::test]
async fn work_under_a_live_lease_is_left_to_its_holder_and_found_once_it_runs_out() {
    let (a, b, _dir) = two_instances().await;
    a.insert_events(&[message("$1", "!held:x"), message("$2", "!free:x"), message("$3", "!held:x")], 1)
        .await
        .expect("insert");
    a.claim_room(room_id!("!held:x"), "a", None, NOW, LEASE).await.expect("claim");
    let found = b.unleased_work(NOW + 1).await.expect("poll");
    assert_eq!(found, [room_id!("!free:x").to_owned()], "the held room is a's");
    let found = b.unleased_work(NOW + LEASE).await.expect("poll");
    assert_eq!(found, [room_id!("!held:x").to_owned(), room_id!("!free:x").to_owned()], "oldest first, once");
    let seqs: Vec<i64> = b.pending_events(room_id!("!free:x")).await.expect("pending").iter().map(|e| e.seq).collect();
    b.mark_processed(&seqs).await.expect("done");
    assert_eq!(b.unleased_work(NOW + 1).await.expect("poll"), Vec::<ruma::OwnedRoomId>::new());
}

#[tokio::test]
async fn the_door_learns_which_rooms_are_watched_busy_and_whose_personas_are_joined() {
    let (a, b, _dir) = two_instances().await;
    let (persona, alice) = (user_id!("@bot:x"), user_id!("@alice:x"));
    let personas: Vec<OwnedUserId> = vec![persona.to_owned(), user_id!("@helper:x").to_owned()];
    a.set_membership(room_id!("!joined:x"), persona, "join").await.expect("join");
    a.set_membership(room_id!("!joined:x"), alice, "join").await.expect("join");
    a.set_membership(room_id!("!left:x"), persona, "leave").await.expect("left");
    a.set_membership(room_id!("!others:x"), alice, "join").await.expect("someone else");
    a.set_membership(room_id!("!waiting:x"), persona, "join").await.expect("join");
    a.insert_events(&[message("$m", "!waiting:x")], 1).await.expect("a pending event");
    let asked: Vec<ruma::OwnedRoomId> = ["!joined:x", "!left:x", "!others:x", "!waiting:x", "!unknown:x"]
        .iter()
        .map(|r| (*r).try_into().expect("room id"))
        .collect();
    let mut facts = b.door_facts(&asked, &personas).await.expect("facts");
    facts.sort_by(|x, y| x.room.cmp(&y.room));
    let seen: Vec<(&str, bool, Vec<&str>, i64)> = facts
        .iter()
        .map(|f| (f.room.as_str(), f.busy, f.personas.iter().map(|p| p.as_str()).collect(), f.joined))
        .collect();
    assert_eq!(
        seen,
        [
            ("!joined:x", false, vec!["@bot:x"], 2),
            ("!left:x", false, vec![], 0),
            ("!waiting:x", true, vec!["@bot:x"], 0),
        ],
        "watched: a persona's membership, or events waiting; members counted where idle"
    );
    assert!(b.door_facts(&[], &personas).await.expect("none asked").is_empty());
}

#[tokio::test]
async fn reservations_from_several_instances_at_once_never_overspend() {
    const INSTANCES: usize = 6;
    const ROUNDS: usize = 20;
    let dir = tempfile::tempdir().expect("tempdir");
    let url = database_url(dir.path(), "budget.db").await;
    let mut instances = Vec::new();
    for _ in 0..INSTANCES {
        instances.push(Store::open(&url).await.expect("open"));
    }
    // Each round, every instance asks at once for 100 tokens in a room of its own round,
    // whose budget holds three such calls.
    let budgets = Budgets { per_user: 0, per_room: 300, total: 0 };
    let start = Arc::new(tokio::sync::Barrier::new(INSTANCES));
    let mut tasks = Vec::new();
    for (i, s) in instances.into_iter().enumerate() {
        let start = start.clone();
        tasks.push(tokio::spawn(async move {
            let user: OwnedUserId = format!("@u{i}:x").try_into().expect("user id");
            let mut granted = [0; ROUNDS];
            for (round, n) in granted.iter_mut().enumerate() {
                let room: ruma::OwnedRoomId = format!("!r{round}:x").try_into().expect("room id");
                start.wait().await;
                if s.reserve_tokens(&user, &room, 100, budgets, NOW).await.expect("reserve").is_ok() {
                    *n += 1;
                }
            }
            granted
        }));
    }
    let mut granted = [0; ROUNDS];
    for t in tasks {
        for (total, n) in granted.iter_mut().zip(t.await.expect("task")) {
            *total += n;
        }
    }
    assert_eq!(granted, [3; ROUNDS], "300 tokens hold three reservations of 100, however many ask at once");
}

#[tokio::test]
async fn an_approval_decided_by_one_instance_releases_the_turn_waiting_on_another() {
    let (a, b, _dir) = two_instances().await;
    let (room, alice) = (room_id!("!r:x"), user_id!("@alice:x"));
    let now = richbot::clock::now_ms();
    let turn = a.start_turn(room, user_id!("@bot:x"), alice, &[], None, now).await.expect("turn");
    let new = crate::support::approval(turn.id, 0, now);
    let approval = a.open_approval(&new).await.expect("open");
    a.set_approval_notice(approval.id, event_id!("$notice")).await.expect("notice");

    let waiting = Approvals::new(a.clone()).sharing();
    let wait = tokio::spawn(async move { waiting.wait(&approval).await });
    let mut check = crate::support::message("$yes", "!r:x");
    check.event_type = "m.reaction".into();
    check.event = json!({"type": "m.reaction", "content": {"m.relates_to": {
        "rel_type": "m.annotation", "event_id": "$notice", "key": "✅"}}})
    .to_string();
    let mut events = [check];
    Approvals::new(b.clone()).at_door(&mut events).await.expect("decide");
    assert!(events[0].processed, "the reaction is settled where it arrived");
    let decided = tokio::time::timeout(std::time::Duration::from_secs(30), wait).await;
    let decision = decided.expect("the waiting turn saw the decision well before the deadline");
    assert_eq!(decision.expect("task").expect("wait"), Decision::Allow);
}

#[tokio::test]
async fn the_fence_holds_only_for_the_live_holder_of_the_turns_room() {
    let (a, b, _dir) = two_instances().await;
    let room = room_id!("!fenced:x");
    let turn = a.start_turn(room, user_id!("@bot:x"), user_id!("@alice:x"), &[], None, NOW).await.expect("turn");
    assert!(!a.holds_turn_room(turn.id, "a", NOW).await.expect("fence"), "no lease, no writes");
    assert!(a.claim_room(room, "a", None, NOW, LEASE).await.expect("claim"));
    assert!(a.holds_turn_room(turn.id, "a", NOW + 1).await.expect("fence"));
    assert!(!b.holds_turn_room(turn.id, "b", NOW + 1).await.expect("fence"), "not another instance");
    // a froze past its lease; b took the room over: a's writes are fenced off.
    assert!(!a.holds_turn_room(turn.id, "a", NOW + LEASE).await.expect("fence"));
    assert!(b.claim_room(room, "b", None, NOW + LEASE, LEASE).await.expect("takeover"));
    assert!(!a.holds_turn_room(turn.id, "a", NOW + LEASE + 1).await.expect("fence"));
    assert!(b.holds_turn_room(turn.id, "b", NOW + LEASE + 1).await.expect("fence"));
}
