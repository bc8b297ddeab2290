//! Edits of one message land at least the pace apart at the homeserver, however long
//! each PUT takes: an edit asked for while the one before it is still on its way counts
//! its slot from when that one landed. (The pace is kept in the process, above the
//! store: SQLite is enough here.)

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::Method;
use ruma::{EventId, room_id, user_id};
use serde_json::{Value, json};

use richbot::outbox::{Outbox, Write, WriteId};
use richbot::store::Store;

/// When each PUT arrived and when its answer left, in the order they arrived.
type Log = Arc<Mutex<Vec<(Instant, Option<Instant>)>>>;

/// A homeserver stand-in whose second PUT (the first edit) takes `slow` to answer, and
/// which tells `first_edit` when that PUT has arrived.
async fn homeserver(log: Log, slow: Duration, first_edit: Arc<tokio::sync::Notify>) -> String {
    let app = Router::new()
        .fallback(move |State((log, first_edit)): State<(Log, Arc<tokio::sync::Notify>)>, method: Method| async move {
            if method != Method::PUT {
                return axum::Json(json!({}));
            }
            let n = {
                let mut log = log.lock().expect("log");
                log.push((Instant::now(), None));
                log.len() - 1
            };
            if n == 1 {
                first_edit.notify_one();
                tokio::time::sleep(slow).await;
            }
            log.lock().expect("log")[n].1 = Some(Instant::now());
            axum::Json(json!({"event_id": format!("$landed{n}")}))
        })
        .with_state((log, first_edit));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    url
}

fn edit_of(sent: &EventId, body: &str) -> Value {
    json!({"msgtype": "m.text", "body": format!("* {body}"), "m.new_content": {"msgtype": "m.text", "body": body},
        "m.relates_to": {"rel_type": "m.replace", "event_id": sent}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_asked_for_while_a_slow_one_is_on_its_way_lands_the_pace_after_it() {
    const PACE: Duration = Duration::from_millis(400);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&format!("sqlite://{}", dir.path().join("t.db").display())).await.expect("open");
    let log = Log::default();
    let first_edit = Arc::new(tokio::sync::Notify::new());
    let url = homeserver(log.clone(), 3 * PACE, first_edit.clone()).await;
    let matrix = richbot::matrix::Client::new(&url, "as_token", Default::default());
    let outbox = Outbox::new(matrix, store, "i".to_owned(), PACE.as_millis() as u64);
    let (room, persona) = (room_id!("!r:x"), user_id!("@richbot:x"));
    let sent = outbox
        .send(&Write { id: WriteId::agent(1), room, persona }, &json!({"msgtype": "m.text", "body": "a"}), None)
        .await
        .expect("sent");

    let first = async {
        outbox.edit(&Write { id: WriteId::agent(2), room, persona }, &sent, &edit_of(&sent, "b")).await.expect("b")
    };
    let second = async {
        // Asked for while the first edit's PUT is at the homeserver.
        first_edit.notified().await;
        outbox.edit(&Write { id: WriteId::agent(3), room, persona }, &sent, &edit_of(&sent, "c")).await.expect("c")
    };
    let ((b, _), (c, waited)) = tokio::join!(first, second);
    assert_ne!(b, c);

    let log = log.lock().expect("log").clone();
    assert_eq!(log.len(), 3, "the message and its two edits");
    let (Some(first_answered), (second_arrived, _)) = (log[1].1, log[2]) else { panic!("unanswered: {log:?}") };
    // Clocks read in whole milliseconds: a millisecond's grace.
    let gap = second_arrived.checked_duration_since(first_answered);
    assert!(
        gap.is_some_and(|gap| gap + Duration::from_millis(1) >= PACE),
        "the second edit came {gap:?} after the first landed (none: before)"
    );
    assert!(waited >= PACE.as_millis() as u64, "it says it waited: {waited} ms");
}
