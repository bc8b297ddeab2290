//! The homeserver client's retry policy against a scripted stand-in homeserver: 429 waits
//! as asked (capped), 5xx backs off, other 4xx are permanent, attempts are bounded.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::any;
use richbot::matrix::{Client, Error, RetryPolicy};
use ruma::{room_id, user_id};
use serde_json::{Value, json};

type Script = Arc<Mutex<VecDeque<(u16, Value, Option<&'static str>)>>>;

async fn homeserver(script: Vec<(u16, Value, Option<&'static str>)>) -> (String, Script, Arc<Mutex<Vec<String>>>) {
    let script: Script = Arc::new(Mutex::new(script.into()));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (s, v) = (script.clone(), seen.clone());
    let app = Router::new().fallback(any(move |uri: axum::http::Uri, headers: HeaderMap| {
        let (s, v) = (s.clone(), v.clone());
        async move {
            v.lock()
                .expect("lock")
                .push(format!("{uri} {}", headers.get("authorization").and_then(|h| h.to_str().ok()).unwrap_or("")));
            let (status, body, retry_after) = s.lock().expect("lock").pop_front().unwrap_or((500, json!({}), None));
            let mut resp = (StatusCode::from_u16(status).expect("status"), axum::Json(body)).into_response();
            if let Some(secs) = retry_after {
                resp.headers_mut().insert("retry-after", secs.parse().expect("header"));
            }
            resp
        }
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, script, seen)
}

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
    let (url, _, seen) = homeserver(vec![
        (429, json!({"errcode": "M_LIMIT_EXCEEDED", "retry_after_ms": 150}), None),
        (502, json!({}), None),
        (200, json!({"event_id": "$landed"}), None),
    ])
    .await;
    let start = Instant::now();
    assert_eq!(send(&url).await.expect("landed").as_str(), "$landed");
    assert!(start.elapsed() >= Duration::from_millis(150), "waited as the server asked");
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 3);
    assert!(
        seen.iter()
            .all(|r| r.contains("/rooms/%21r%3Ax/send/m.room.message/rb.t.1?user_id=%40rb_a%3Ax Bearer as_secret")),
        "{seen:?}"
    );
}

#[tokio::test]
async fn retry_after_headers_are_honoured_up_to_the_cap() {
    let (url, _, _) = homeserver(vec![
        (429, json!({"errcode": "M_LIMIT_EXCEEDED"}), Some("30")),
        (200, json!({"event_id": "$e"}), None),
    ])
    .await;
    let start = Instant::now();
    assert!(send(&url).await.is_ok());
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(300) && waited < Duration::from_secs(10), "capped wait: {waited:?}");
}

#[tokio::test]
async fn other_client_errors_are_permanent_and_not_retried() {
    let (url, _, seen) = homeserver(vec![(403, json!({"errcode": "M_FORBIDDEN", "error": "not in room"}), None)]).await;
    match send(&url).await {
        Err(Error::Refused { status, errcode, error }) => {
            assert_eq!((status, errcode.as_str(), error.as_str()), (403, "M_FORBIDDEN", "not in room"))
        }
        other => panic!("expected a permanent refusal, got {other:?}"),
    }
    assert_eq!(seen.lock().expect("lock").len(), 1);
}

#[tokio::test]
async fn attempts_are_bounded() {
    let (url, _, seen) = homeserver(vec![]).await; // 500 forever
    assert!(matches!(send(&url).await, Err(Error::Unavailable(_))));
    assert_eq!(seen.lock().expect("lock").len(), 4);
    let closed = "http://127.0.0.1:9"; // nothing listens on the discard port
    assert!(matches!(send(closed).await, Err(Error::Unavailable(_))));
}

#[tokio::test]
async fn registering_a_user_that_exists_counts_as_done() {
    let (url, _, _) = homeserver(vec![(400, json!({"errcode": "M_USER_IN_USE", "error": "taken"}), None)]).await;
    Client::new(&url, "as", policy()).register("rb_a").await.expect("in use is fine");
    let (url, _, _) = homeserver(vec![(400, json!({"errcode": "M_EXCLUSIVE", "error": "not yours"}), None)]).await;
    assert_eq!(
        Client::new(&url, "as", policy()).register("mallory").await.expect_err("refused").errcode(),
        Some("M_EXCLUSIVE")
    );
}
