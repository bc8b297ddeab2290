//! The homeserver client's retry policy against a scripted stand-in homeserver, over real
//! HTTP: retries reuse the request (path, transaction id, token), other 4xx are permanent,
//! attempts are bounded. How long each wait is (429 as asked and capped, 5xx doubling) is
//! measured on paused time in `matrix::retry`'s unit tests.

use std::time::Duration;

use richbot::matrix::{Client, Error, RetryPolicy};
use ruma::{room_id, user_id};
use serde_json::json;

use crate::support::fake_hs::{FakeHs, Reply};

fn policy() -> RetryPolicy {
    RetryPolicy { attempts: 4, base: Duration::from_millis(5), max_wait: Duration::from_millis(300) }
}

async fn send(url: &str) -> Result<ruma::OwnedEventId, Error> {
    Client::new(url, "as_secret", policy())
        .send(room_id!("!r:x"), "m.room.message", "rb.t.1", &json!({"body": "x"}), user_id!("@rb_a:x"))
        .await
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_retried_until_the_send_lands() {
    let hs = FakeHs::scripted(vec![
        Reply::rate_limited(1),
        Reply::unavailable(502),
        Reply::ok(json!({"event_id": "$landed"})),
    ])
    .await;
    assert_eq!(send(&hs.url).await.expect("landed").as_str(), "$landed");
    let seen = hs.requests();
    assert_eq!(seen.len(), 3);
    assert!(
        seen.iter().all(|r| r.uri.ends_with("/rooms/%21r%3Ax/send/m.room.message/rb.t.1?user_id=%40rb_a%3Ax")
            && r.authorization == "Bearer as_secret"),
        "{seen:?}"
    );
}

#[tokio::test]
async fn other_client_errors_are_permanent_and_not_retried() {
    let hs = FakeHs::scripted(vec![Reply::refused(403, "M_FORBIDDEN", "not in room")]).await;
    match send(&hs.url).await {
        Err(Error::Refused { status, errcode, error }) => {
            assert_eq!((status, errcode.as_str(), error.as_str()), (403, "M_FORBIDDEN", "not in room"))
        }
        other => panic!("expected a permanent refusal, got {other:?}"),
    }
    assert_eq!(hs.requests().len(), 1);
}

#[tokio::test]
async fn attempts_are_bounded() {
    let hs = FakeHs::scripted(vec![]).await; // 500 forever
    assert!(matches!(send(&hs.url).await, Err(Error::Unavailable(_))));
    assert_eq!(hs.requests().len(), 4);
    let closed = "http://127.0.0.1:9"; // nothing listens on the discard port
    assert!(matches!(send(closed).await, Err(Error::Unavailable(_))));
}

#[tokio::test]
async fn registering_a_user_that_exists_counts_as_done() {
    let hs = FakeHs::scripted(vec![Reply::refused(400, "M_USER_IN_USE", "taken")]).await;
    Client::new(&hs.url, "as", policy()).register("rb_a").await.expect("in use is fine");
    let hs = FakeHs::scripted(vec![Reply::refused(400, "M_EXCLUSIVE", "not yours")]).await;
    assert_eq!(
        Client::new(&hs.url, "as", policy()).register("mallory").await.expect_err("refused").errcode(),
        Some("M_EXCLUSIVE")
    );
}

#[tokio::test]
async fn a_ping_the_homeserver_could_not_connect_is_made_again_and_a_refusal_is_not() {
    // Just after a restart, Synapse's first try may go over a dead kept-alive connection.
    let connection_failed = || Reply::refused(502, "M_CONNECTION_FAILED", "AlreadyCalled");
    let hs = FakeHs::scripted(vec![connection_failed(), Reply::ok(json!({"duration_ms": 7}))]).await;
    assert_eq!(Client::new(&hs.url, "as", policy()).ping("richbot", "t").await.expect("second try"), 7);
    assert_eq!(hs.requests().len(), 2);
    // A homeserver that keeps failing to connect is told after three tries.
    let hs = FakeHs::scripted(vec![connection_failed(), connection_failed(), connection_failed(), connection_failed()])
        .await;
    let e = Client::new(&hs.url, "as", policy()).ping("richbot", "t").await.expect_err("never reached");
    assert_eq!((e.errcode(), hs.requests().len()), (Some("M_CONNECTION_FAILED"), 3));
    // richbot's own refusal (a wrong hs_token) does not change on a second try.
    let hs = FakeHs::scripted(vec![Reply::refused(502, "M_BAD_STATUS", "403")]).await;
    Client::new(&hs.url, "as", policy()).ping("richbot", "t").await.expect_err("refused");
    assert_eq!(hs.requests().len(), 1);
}
