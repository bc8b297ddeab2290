//! One `serve` per PostgreSQL database (`store::lock`): a second process on the same
//! database is refused with the holder named, and may start once the first is gone. (On
//! SQLite the data file's lock does this; `first_run` tests it.)

use richbot::store::Store;

use crate::support::postgres::fresh_database;

#[tokio::test]
async fn a_second_instance_on_the_same_database_is_refused_until_the_first_is_gone() {
    let url = fresh_database().await;
    let first = Store::open(&url).await.expect("open");
    let second = Store::open(&url).await.expect("open again");

    let held = first.exclusive().await.expect("take").expect("a lock on PostgreSQL");
    let refused = second.exclusive().await.expect_err("a second instance is refused");
    let message = refused.to_string();
    assert!(message.starts_with("another richbot is serving this database (PostgreSQL backend "), "{message}");

    held.release().await.expect("release");
    let taken = second.exclusive().await.expect("the database is free again");
    assert!(taken.is_some());
}
