//! Who may use a PostgreSQL database at once (`store::engine`, `lock.rs`): any number of `serve`
//! instances (they share the rooms through leases), but `richbot migrate` only alone: it
//! is refused while an instance serves, with the holder named, and an instance is refused
//! while it copies; a room lease ends with its holder's session, and an instance whose
//! lock connection PostgreSQL dropped takes it again. (On SQLite the data file's lock allows one process; `first_run` tests
//! it.)

use std::sync::Arc;
use std::time::Duration;

use richbot::queue::RoomQueue;
use richbot::room::Leases;
use richbot::store::Store;
use ruma::room_id;
use sqlx::Connection;

use crate::support::eventually;
use crate::support::postgres::fresh_database;

#[tokio::test]
async fn instances_serve_side_by_side_but_migrate_runs_alone() {
    let url = fresh_database().await;
    let (first, second, migrate) = (
        Store::open(&url).await.expect("open"),
        Store::open(&url).await.expect("open"),
        Store::open(&url).await.expect("open"),
    );

    let one = first.serving().await.expect("serve").expect("a lock on PostgreSQL");
    let two = second.serving().await.expect("a second instance serves beside the first");
    let refused = migrate.exclusive().await.expect_err("migrate is refused while instances serve");
    let message = refused.to_string();
    assert!(message.starts_with("another richbot process holds this database (PostgreSQL backend "), "{message}");

    one.release().await.expect("release");
    two.expect("held").release().await.expect("release");
    let copying = migrate.exclusive().await.expect("the database is free").expect("held");
    first.serving().await.expect_err("no instance serves while migrate copies");
    copying.release().await.expect("release");
    assert!(first.serving().await.expect("free again").is_some());
}

/// A lease names its holder's session (the backend of its `serve` lock): once that
/// connection is gone, as a killed process's is, the room is free before the lease's end.
#[tokio::test]
async fn a_room_lease_ends_with_its_holders_session() {
    const NOW: i64 = 1_000_000_000_000;
    let url = fresh_database().await;
    let (a, b) = (Store::open(&url).await.expect("open"), Store::open(&url).await.expect("open"));
    let held = a.serving().await.expect("serve").expect("a lock on PostgreSQL");
    let room = room_id!("!r:x");
    a.insert_events(&[crate::support::message("$q", "!r:x")], 1).await.expect("a question");
    assert!(a.claim_room(room, "a", Some(held.session()), NOW, 60_000).await.expect("claim"));
    assert!(!b.claim_room(room, "b", None, NOW + 1, 60_000).await.expect("claim"), "held while a lives");
    assert!(b.unleased_work(NOW + 1).await.expect("poll").is_empty());

    drop(held); // the connection closes without a goodbye, as a killed process's does
    eventually("the lease ends with a's session", Duration::from_secs(10), || async {
        b.claim_room(room, "b", None, NOW + 2, 60_000).await.expect("claim").then_some(())
    })
    .await;
    assert_eq!(b.room_lease(room).await.expect("read").map(|(h, _)| h).as_deref(), Some("b"));
}

/// PostgreSQL drops the `serve` lock's connection (a server restart, an administrator's
/// `pg_terminate_backend`): the instance takes the lock again and its leases name the new
/// session, so they do not look dead to the other instances.
#[tokio::test]
async fn a_lost_serve_lock_is_taken_again_and_the_leases_follow_it() {
    let url = fresh_database().await;
    let (a, b) = (Store::open(&url).await.expect("open"), Store::open(&url).await.expect("open"));
    let held = a.serving().await.expect("serve").expect("a lock on PostgreSQL");
    let first = held.session();
    let leases = Leases::new(a.clone(), Duration::from_secs(60), Some(held));
    let keeper = tokio::spawn({
        let leases = leases.clone();
        async move { leases.keep(Arc::new(RoomQueue::default())).await }
    });
    let room = room_id!("!r:x");
    assert!(leases.claim(room).await.expect("claim"));

    let mut admin = sqlx::PgConnection::connect(&url).await.expect("connect");
    sqlx::query("SELECT pg_terminate_backend($1)").bind(first as i32).execute(&mut admin).await.expect("terminate");
    eventually("the lock taken again", Duration::from_secs(10), || async {
        leases.session().filter(|s| *s != first).map(|_| ())
    })
    .await;
    let now = richbot::clock::now_ms();
    assert!(!b.claim_room(room, "b", None, now, 60_000).await.expect("claim"), "the lease is still a's");
    assert!(leases.claim(room).await.expect("claim"), "and a holds it");
    keeper.abort();
}
